"""A consistent copy of a checkpoint: every query at its last committed batch, while the driver runs.

Per query, the last batch ``b`` with a ``commits/<b>`` is read first; then the logs up to ``b``, the
state versions up to ``b + 1`` and the files that carry no version are copied (``layout.belongs_to``).
Spark writes each of those files once and never changes it, so a batch running meanwhile adds newer
files, which are left out; it deletes only files older than ``minBatchesToRetain`` batches, so a file
gone while the copy runs fails it (``CopyRaced``) rather than leaving a hole. ``streamapp.json``
follows, and ``_snapshot.json`` (which batch of each query the copy holds, its size and when it was
complete) is written last: a copy without it is incomplete. ``restore`` copies a complete one into an
empty checkpoint, from which each query resumes at its batch + 1, under a new query id. See
docs/state-operations.md.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from streamapp_api.checkpoint import join

from streamapp_runtime.checkpoint import files, layout
from streamapp_runtime.checkpoint.record import RECORD_FILE

SNAPSHOT_FILE = "_snapshot.json"
METADATA = "metadata"  # a query's id, Spark's StreamMetadata
COPIERS = 8  # files copied at once


class Refused(ValueError):
    """A copy or a restore that would mix or lose state; the message names the location and why."""


class CopyRaced(RuntimeError):
    """A file of the batch being copied was deleted meanwhile: copy again (a newer batch)."""


@dataclass(frozen=True)
class Copied:
    batches: dict[str, int | None]  # query -> the committed batch the copy holds (None: none yet)
    files: int
    size_bytes: int | None = None  # of the copied files (None: a snapshot written before it was recorded)
    taken_at: float | None = None  # when the copy was complete, seconds since the epoch (None: as size_bytes)


def copy_committed(source_root: str, target_root: str, clock: Callable[[], float] = time.time) -> Copied:
    """Copy the checkpoint at ``source_root`` into the empty or new ``target_root``, each query at its
    last committed batch."""
    if files.names(target_root):
        raise Refused(f"{target_root}: a checkpoint is copied into an empty or new folder")
    batches: dict[str, int | None] = {}
    chosen: list[tuple[str, str]] = []
    try:
        for query, is_folder in files.entries(source_root):
            folder = join(source_root, query)
            if not is_folder:
                continue
            # the batch first, then what belongs to it: a listing after the commit holds all of it
            batches[query] = layout.last_committed(files.names(join(folder, layout.COMMITS)))
            chosen += _query_files(folder, join(target_root, query), batches[query])
        _copy(chosen)
        record = files.read_text(join(source_root, RECORD_FILE))
    except FileNotFoundError as exc:
        raise CopyRaced(f"{source_root}: {exc.filename} was deleted while it was copied") from exc
    if record is not None:
        files.write_text(join(target_root, RECORD_FILE), record)
    size, taken_at = files.tree_bytes(target_root), clock()
    files.write_text(join(target_root, SNAPSHOT_FILE),
                     json.dumps({"batches": batches, "bytes": size, "takenAt": taken_at}, sort_keys=True) + "\n")
    return Copied(batches, len(chosen) + (record is not None), size, taken_at)


def _query_files(source: str, target: str, batch: int | None) -> list[tuple[str, str]]:
    chosen = []
    for name, is_folder in files.entries(source):
        here = join(source, name)
        if not is_folder:
            if not layout.is_temporary(name):
                chosen.append((here, join(target, name)))
        elif batch is not None or name not in (*layout.LOGS, layout.STATE):  # nothing committed: no logs, no state
            wanted = partial(layout.belongs_to, name, batch=-1 if batch is None else batch)
            chosen += _tree_files(here, join(target, name), wanted)
    return chosen


def _tree_files(source: str, target: str, wanted: Callable[[str], bool] = lambda name: True) -> list[tuple[str, str]]:
    chosen = []
    for name, is_folder in files.entries(source):
        here = join(source, name)
        if is_folder:
            chosen += _tree_files(here, join(target, name), wanted)
        elif wanted(name):
            chosen.append((here, join(target, name)))
    return chosen


def _copy(chosen: list[tuple[str, str]]) -> None:
    """Copy these (source, target) files, several at once: on an object store each file is a few
    requests, and a checkpoint has a few files per state partition and batch."""
    with ThreadPoolExecutor(COPIERS) as pool:
        for _ in pool.map(lambda pair: files.copy_file(*pair), chosen):
            pass


def snapshot_batches(snapshot_root: str) -> dict[str, int | None]:
    """Each query's batch in the snapshot at ``snapshot_root``; Refused when it has no readable
    ``_snapshot.json`` (its copy did not finish, or it is no snapshot)."""
    return snapshot_record(snapshot_root).batches


def snapshot_record(snapshot_root: str) -> Copied:
    """What ``_snapshot.json`` of the snapshot at ``snapshot_root`` records (``files``: 0, not recorded);
    Refused as ``snapshot_batches``. A size or time that is not one reads as not recorded."""
    location = join(snapshot_root, SNAPSHOT_FILE)
    text = files.read_text(location)
    if text is None:
        raise Refused(f"{snapshot_root}: no {SNAPSHOT_FILE}: not a snapshot, or an incomplete one (its copy did not "
                      "finish); it is never restored")
    try:
        found = json.loads(text)
        batches = dict(found["batches"])
    except (ValueError, KeyError, TypeError) as exc:
        raise Refused(f"{location}: unreadable ({exc}); the snapshot is not restored") from exc
    size, taken_at = found.get("bytes"), found.get("takenAt")
    return Copied(batches, 0,
                  size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None,
                  float(taken_at) if isinstance(taken_at, (int, float)) and not isinstance(taken_at, bool)
                  and math.isfinite(taken_at) and taken_at > 0 else None)


def restore(snapshot_root: str, target_root: str, besides: frozenset[str] = frozenset()) -> Copied:
    """Copy the complete snapshot at ``snapshot_root`` into the empty or new checkpoint ``target_root``:
    a run there resumes each query at its snapshot batch + 1. ``besides``: files of the runtime's own
    the target may hold already (a starting driver's owner marker)."""
    batches = snapshot_batches(snapshot_root)
    if set(files.names(target_root)) - besides:
        raise Refused(f"{target_root}: the checkpoint is not empty; a snapshot is restored into an empty or new "
                      "one (a new state generation, or delete this one first)")
    # _snapshot.json stays behind: the restored checkpoint moves past those batches at its first commit,
    # and a live checkpoint that said it was a complete snapshot would be copied as one by a plain copy.
    # Each query gets a new id (its ``metadata``): the sinks' ledgers (Postgres batch rows, exactly-once
    # Kafka markers, the dead-letter writer) know a query by it, and the batches after the snapshot are
    # planned again from the topics as they are now, so a batch id the first run wrote can cover another
    # range: skipping it as written would drop output. A new id writes them (upserts converge by key).
    # The old id's checksum goes too: Hadoop's local file system checks a file against its .crc beside it.
    left_out = {join(snapshot_root, SNAPSHOT_FILE)} | {join(join(snapshot_root, query), name) for query in batches
                                                       for name in (METADATA, f".{METADATA}.crc")}
    chosen = [(source, target) for source, target in _tree_files(snapshot_root, target_root) if source not in left_out]
    _copy(chosen)
    for query in batches:
        files.write_text(join(join(target_root, query), METADATA), new_query_metadata())
    return Copied(batches, len(chosen) + len(batches))


def new_query_metadata() -> str:
    """A query checkpoint's ``metadata`` as Spark writes it, with a new query id."""
    return json.dumps({"id": str(uuid.uuid4())}, separators=(",", ":"))
