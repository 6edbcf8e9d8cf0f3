"""A new state generation that starts from a snapshot: at the driver's start, after it took the
checkpoint's fence and before any query starts.

Where from: ``contract.ENV_RESTORE_FROM`` (the operator resolves ``spec.state.restoreFrom``, another
app's snapshot too), else this app's own ``spec.state.restoreFrom`` under its base. What to do
(``step``): a generation root that holds nothing yet is restored into (``checkpoint.copying.restore``,
as ``streamapp restore`` does); one that holds a checkpoint was restored before and has run on since,
and is left as it is. With ``contract.ENV_RESTORE_ID`` (a rollback: the operator restores the
generation the failed spec ran on) a checkpoint is replaced, unless the root's
``contract.RESTORED_FILE`` records that id: it was restored under it already, and a later driver of
the rollback goes on from there. Every restore writes that file (where from, which id); a snapshot
does not copy it. ``RESTORING_FILE`` is in the root while the copy runs: a driver that died during it
leaves it behind, and the next start deletes the half-copied root and restores again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
import logging
from typing import Literal

from streamapp_api import contract
from streamapp_api.checkpoint import join, snapshot_location

from streamapp_runtime.checkpoint import files
from streamapp_runtime.checkpoint.copying import Refused, restore, snapshot_batches
from streamapp_runtime.checkpoint.fence import OWNER_FILE, Fence

log = logging.getLogger("streamapp.runtime")

RESTORING_FILE = "_restoring.json"
FIELD = "spec.state.restoreFrom"


class RestoreRefused(Exception):
    """The generation cannot start from the snapshot asked for; the message names the field and where."""


def location(restore_from, app_name: str, base: str, environ: dict[str, str]) -> str | None:
    """The snapshot this generation starts from (None: it starts from startingOffsets)."""
    if environ.get(contract.ENV_RESTORE_FROM):
        return environ[contract.ENV_RESTORE_FROM]
    if restore_from is None:
        return None
    if restore_from.app not in (None, app_name):
        raise RestoreRefused(f"{FIELD}.app: {restore_from.app!r}: another app's snapshot is found by the operator; "
                             f"a local run restores its own snapshots only (copy the other's with `streamapp restore "
                             "--from LOCATION` instead)")
    return snapshot_location(base, restore_from.snapshot)


def step(root_names: list[str], restore_id: str | None = None,
         restored_id: str | None = None) -> Literal["restore", "again", "replace", "skip"]:
    """From what the generation root holds: restore into it, delete a half-restored one and restore
    again, replace a checkpoint not restored under ``restore_id`` (the id asked, None: none), or leave
    one that ran on since it was restored. ``restored_id``: the id its ``RESTORED_FILE`` records. Pure."""
    held = set(root_names) - {OWNER_FILE, contract.RESTORED_FILE}
    if not held:
        return "restore"
    if RESTORING_FILE in held:
        return "again"
    return "replace" if restore_id is not None and restore_id != restored_id else "skip"


def recorded_id(text: str | None) -> str | None:
    """The id a ``RESTORED_FILE`` records (None: none, or unreadable: a rollback then replaces the
    checkpoint rather than run on state it cannot tell the origin of)."""
    try:
        found = json.loads(text or "null")
    except ValueError:
        return None
    restore_id = found.get("id") if isinstance(found, dict) else None
    return restore_id if isinstance(restore_id, str) else None


def unmatched(queries: list[str], held: Iterable[str]) -> list[str]:
    """The app's queries the snapshot holds no checkpoint of (they would start from startingOffsets). Pure."""
    return [q for q in queries if q not in set(held)]


def _check_queries(app, source: str, batches: dict[str, int]) -> None:
    """A snapshot is matched to the app's queries by name: one sharing none of them is refused (sinks
    named otherwise, say an app writing to its own topics, would start afresh, their state left behind);
    a query it lacks alone (a sink added) starts from startingOffsets, and the log says so."""
    queries = [sink.query_name for sink in app.spec.sinks]
    missing = unmatched(queries, batches)
    held = ", ".join(sorted(batches)) or "none"
    if missing and len(missing) == len(queries):
        raise RestoreRefused(
            f"{FIELD}: {source} holds the queries {held}, none of this app's ({', '.join(queries)}): a query's "
            "state is found by its sink's name (spec.sinks[].name; without one, named after its input and "
            "target): give the sinks the names they have in the app that took the snapshot")
    if missing:
        log.warning("restore from %s: no checkpoint of %s there (it holds %s): they start from startingOffsets",
                    source, ", ".join(missing), held)


def at_start(app, root: str, base: str, environ: dict[str, str], fence: Fence) -> None:
    """Restore the generation at ``root`` from the snapshot ``app`` (or the operator) names, when it
    holds no checkpoint yet, or replace its checkpoint when a restore id asks to. RestoreRefused when
    the snapshot is missing or incomplete (the checkpoint is then left as it is)."""
    source = location(app.spec.state.restore_from, app.metadata.name, base, environ)
    if source is None:
        return
    restore_id = environ.get(contract.ENV_RESTORE_ID) or None
    held = files.names(root)
    restored = join(root, contract.RESTORED_FILE)
    recorded = recorded_id(files.read_text(restored)) if restore_id and contract.RESTORED_FILE in held else None
    todo = step(held, restore_id, recorded)
    if todo == "skip":
        log.info("restore from %s: skipped, checkpoint %s holds this generation's checkpoint already (restored "
                 "before%s, and run on since)", source, root, f" under id {restore_id}" if restore_id else "")
        return
    try:
        batches = snapshot_batches(source)
    except Refused as exc:
        missing = not files.names(source)
        raise RestoreRefused(f"{FIELD}: {source}: no snapshot there" if missing else f"{FIELD}: {exc}") from exc
    _check_queries(app, source, batches)
    if todo == "replace":
        log.warning("restore id %s: replacing checkpoint %s with snapshot %s", restore_id, root, source)
    elif todo == "again":
        log.warning("restore from %s: the last one into %s did not finish; restoring again", source, root)
    if todo in ("again", "replace"):
        files.delete_tree(root)
        fence.take()
    files.write_text(join(root, RESTORING_FILE), json.dumps({"from": source}) + "\n")
    try:
        copied = restore(source, root, besides=frozenset({OWNER_FILE, RESTORING_FILE, contract.RESTORED_FILE}))
    except Refused as exc:
        raise RestoreRefused(f"{FIELD}: {exc}") from exc
    # written before the marker goes: a driver that dies between the two restores again
    files.write_text(restored, json.dumps({"from": source, "id": restore_id}) + "\n")
    files.delete_tree(join(root, RESTORING_FILE))
    log.info("restored %s from %s (%d files): each query resumes after its batch %s", root, source, copied.files,
             dict(sorted(batches.items())))
