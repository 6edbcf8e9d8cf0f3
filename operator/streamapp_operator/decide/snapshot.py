"""Snapshots of a running app: the ask on its driver pod, and the driver's report into status. Pure.

spec.state.snapshotNonce and spec.state.snapshots change nothing that runs: the ask is written on the
driver pod when it is created (render/driver.py) and changed on the running pod by a patch, as the
executor count of a rescale in place is; the runtime reads it there and takes the snapshots. The
driver reports the last snapshot it took, and the last that failed, in its metrics
(observe/metrics.py): they go into status.state.lastSnapshot and lastSnapshotFailure, with one event
each (SnapshotTaken, SnapshotFailed). It reports every snapshot kept too (those it found at its start
and those it took, less those retention deleted): status.state.snapshots lists them, newest first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from streamapp_api.checkpoint import snapshot_location
from streamapp_api.spec import State

from ..render.driver import snapshot_ask
from .status import parse_time, rfc3339
from .world import Event, KeptSnapshot, Progress, SnapshotFailed, SnapshotTaken

NAME_LIMIT = 63
LOCATION_LIMIT = 1024
REASON_LIMIT = 1024
KEPT_LIMIT = 100  # snapshots listed in status, the newest


@dataclass(frozen=True)
class AskChange:
    """The snapshot ask to write on the running driver pod."""

    value: str | None  # the annotation's new value; None: remove it (the spec asks for no snapshot)
    events: tuple[Event, ...] = ()


def _parsed(ask: str | None) -> dict[str, Any] | None:
    if ask is None:
        return None
    try:
        found = json.loads(ask)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def ask_change(state: State, on_pod: str | None) -> AskChange | None:
    """The patch of the ask the running driver has (``on_pod``, the annotation as read) to what ``state``
    asks for; None when it has that already."""
    wanted = snapshot_ask(state)
    before = _parsed(on_pod)
    if _parsed(wanted) == before:
        return None
    nonce = state.snapshot_nonce
    events: tuple[Event, ...] = ()
    if nonce is not None and nonce != (before or {}).get("nonce"):
        events = (Event("Normal", "SnapshotRequested",
                        f"asked the running driver for snapshot {nonce} (after its next committed batch)"),)
    return AskChange(wanted, events)


@dataclass(frozen=True)
class SnapshotStatus:
    last: dict[str, Any] | None  # status.state.lastSnapshot
    failure: dict[str, Any] | None  # status.state.lastSnapshotFailure
    events: tuple[Event, ...] = ()
    kept: list[dict[str, Any]] | None = None  # status.state.snapshots


def _entry(name: str, taken_at: datetime | None, location: str | None, size: int | None,
           batches: tuple[tuple[str, int], ...]) -> dict[str, Any]:
    """A snapshot as status.state holds it (lastSnapshot, and each of snapshots), bounded as the model is."""
    entry: dict[str, Any] = {"name": name[:NAME_LIMIT]}
    if taken_at is not None:
        entry["takenAt"] = rfc3339(taken_at)
    if location:
        entry["location"] = location[:LOCATION_LIMIT]
    if size is not None and size >= 0:
        entry["sizeBytes"] = size
    if batches:
        entry["batches"] = dict(batches[:64])
    return entry


def _last(taken: SnapshotTaken) -> dict[str, Any]:
    return _entry(taken.name, taken.taken_at, taken.location, taken.size_bytes, taken.batches)


def _kept(found: tuple[KeptSnapshot, ...], base: str) -> list[dict[str, Any]]:
    """status.state.snapshots: newest first (those of no recorded time last), each with its location."""
    newest = sorted(found, key=lambda k: (k.taken_at is not None, k.taken_at.timestamp() if k.taken_at else 0.0,
                                          k.name), reverse=True)
    return [_entry(k.name, k.taken_at, snapshot_location(base, k.name), k.size_bytes, k.batches)
            for k in newest[:KEPT_LIMIT]]


def _failure(failed: SnapshotFailed) -> dict[str, Any]:
    return {"name": failed.name[:NAME_LIMIT], "time": rfc3339(failed.time), "reason": failed.reason[:REASON_LIMIT]}


def _same(a: dict[str, Any] | None, b: dict[str, Any] | None, *keys: str) -> bool:
    return a is not None and b is not None and all(a.get(k) == b.get(k) for k in keys)


def _words(last: dict[str, Any]) -> str:
    parts = []
    if last.get("batches"):
        parts.append("at batch " + ", ".join(f"{q} {b}" for q, b in sorted(last["batches"].items())))
    if last.get("sizeBytes") is not None:
        parts.append(f"{last['sizeBytes']} bytes")
    if last.get("location"):
        parts.append(f"in {last['location']}")
    return f"snapshot {last['name']} taken" + (": " + ", ".join(parts) if parts else "")


def snapshot_status(progress: Progress, before: dict[str, Any], base: str) -> SnapshotStatus:
    """status.state's snapshot fields from what the driver reports (``before``: status.state as it is;
    ``base``: where the app's snapshots folder is). A driver that reports none (not running, restarted
    since) leaves them as they are; a failure older than the last snapshot taken is over."""
    last, failure = before.get("lastSnapshot"), before.get("lastSnapshotFailure")
    events: list[Event] = []
    if progress.snapshot is not None:
        reported = _last(progress.snapshot)
        if not _same(reported, last, "name", "takenAt"):
            events.append(Event("Normal", "SnapshotTaken", _words(reported)))
        last = reported
    if progress.snapshot_failure is not None:
        reported = _failure(progress.snapshot_failure)
        if not _over(reported, last):
            if not _same(reported, failure, "name", "time"):
                events.append(Event("Warning", "SnapshotFailed", f"snapshot {reported['name']} failed: "
                                                                 f"{reported['reason']}; the app keeps running"))
            failure = reported
    if failure is not None and _over(failure, last):
        failure = None
    kept = before.get("snapshots") if progress.snapshots_kept is None else _kept(progress.snapshots_kept, base)
    return SnapshotStatus(last, failure, tuple(events), kept)


def _over(failure: dict[str, Any], last: dict[str, Any] | None) -> bool:
    """A snapshot was taken at or after the failure."""
    failed_at, taken_at = parse_time(failure.get("time")), parse_time((last or {}).get("takenAt"))
    return failed_at is not None and taken_at is not None and taken_at >= failed_at
