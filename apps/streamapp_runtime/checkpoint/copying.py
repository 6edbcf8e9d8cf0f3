"""A consistent copy of a checkpoint: every query at its last committed batch, while the driver runs.

Per query, the last batch ``b`` with a ``commits/<b>`` is read first; then the logs up to ``b``, the
state versions up to ``b + 1`` and the files that carry no version are copied (``layout.belongs_to``).
Spark writes each of those files once and never changes it, so a batch running meanwhile adds newer
files, which are left out; it deletes only files older than ``minBatchesToRetain`` batches, so a file
gone while the copy runs fails it (``CopyRaced``) rather than leaving a hole. ``streamapp.json``
follows, and ``_snapshot.json`` (which batch of each query the copy holds) is written last: a copy
without it is incomplete. See docs/state-operations.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from streamapp_api.checkpoint import join

from streamapp_runtime.checkpoint import files, layout
from streamapp_runtime.checkpoint.record import RECORD_FILE

SNAPSHOT_FILE = "_snapshot.json"


class CopyRaced(RuntimeError):
    """A file of the batch being copied was deleted meanwhile: copy again (a newer batch)."""


@dataclass(frozen=True)
class Copied:
    batches: dict[str, int | None]  # query -> the committed batch the copy holds (None: none yet)
    files: int


def copy_committed(source_root: str, target_root: str) -> Copied:
    """Copy the checkpoint at ``source_root`` into the empty or new ``target_root``, each query at its
    last committed batch."""
    if files.names(target_root):
        raise ValueError(f"{target_root}: a checkpoint is copied into an empty or new folder")
    batches: dict[str, int | None] = {}
    count = 0
    try:
        for query in files.names(source_root):
            folder = join(source_root, query)
            if not files.is_folder(folder):
                continue
            batches[query] = layout.last_committed(files.names(join(folder, layout.COMMITS)))
            count += _copy_query(folder, join(target_root, query), batches[query])
        record = files.read_text(join(source_root, RECORD_FILE))
    except FileNotFoundError as exc:
        raise CopyRaced(f"{source_root}: {exc.filename} was deleted while it was copied") from exc
    if record is not None:
        files.write_text(join(target_root, RECORD_FILE), record)
        count += 1
    files.write_text(join(target_root, SNAPSHOT_FILE), json.dumps({"batches": batches}, sort_keys=True) + "\n")
    return Copied(batches, count)


def _copy_query(source: str, target: str, batch: int | None) -> int:
    count = 0
    for name in files.names(source):
        here = join(source, name)
        if not files.is_folder(here):
            if not layout.is_temporary(name):
                files.copy_file(here, join(target, name))
                count += 1
        elif batch is not None or name not in (*layout.LOGS, layout.STATE):  # nothing committed: no logs, no state
            count += _copy_tree(here, join(target, name), name, -1 if batch is None else batch)
    return count


def _copy_tree(source: str, target: str, top: str, batch: int) -> int:
    count = 0
    for name in files.names(source):
        here = join(source, name)
        if files.is_folder(here):
            count += _copy_tree(here, join(target, name), top, batch)
        elif layout.belongs_to(top, name, batch):
            files.copy_file(here, join(target, name))
            count += 1
    return count
