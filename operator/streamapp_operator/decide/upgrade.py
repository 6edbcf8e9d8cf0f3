"""Spec changes that restart the driver: a snapshot before, a watch after, and a rollback when asked. Pure.

- Before: a Ready driver is asked for a snapshot ``pre-<generation>-<time>`` (spec.upgrade.snapshot)
  and stopped once it reports it, or once waiting is pointless (it failed, the driver stopped being
  Ready or does not answer, ``PRE_CHANGE_WAIT`` plus two triggers passed): then ``SnapshotSkipped``.
- After: the change's driver is watched (status.upgrade.watching). Ready for spec.upgrade.healthWindow
  with no failure since the change, its spec becomes the last stable spec (status.upgrade.lastStable*).
  A failure in the window (a counted restart, a failed or refused driver, an image the node cannot have,
  no Ready driver when it ends) fails the change; a driver running but not Ready when it ends has ``LATE_GRACE`` more to get Ready or
  to exit with its own reason.
- Rollback (spec.upgrade.rollback, off by default): a failed change goes back to the last stable spec,
  on the same state generation restored from the snapshot taken before the change (the runtime replaces
  what the failed spec wrote: contract.ENV_RESTORE_ID), or on the stable spec's own generation when the
  change had moved to a new one (a reset leaves the old one as it was). The resource keeps the applied
  spec; the app runs the stable one until the spec changes again (status.upgrade.rollback).

The last stable spec is kept in status as JSON, the spec the driver ran with; it is read back as
untrusted input (observe/kube.stable_app checks it as the spec is checked).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from streamapp_api import StreamApp, contract, parse_duration
from streamapp_api.base import NAME_PATTERN
from streamapp_api.checkpoint import pre_change_snapshot_name, snapshot_location
from streamapp_api.durations import trigger_interval
from streamapp_api.spec import StreamAppSpec

from ..render.driver import snapshot_ask
from .changes import classify_change
from .restarts import FAILURE_CAUSES
from .restore import Restore
from .status import Cond, parse_time, rfc3339
from .world import Event, Observed

PRE_CHANGE_WAIT = timedelta(minutes=5)  # plus two trigger intervals: a batch to commit, then the copy
PRE_CHANGE_LOOK = timedelta(seconds=5)
# A driver still running but not Ready when the window ends gets this much more: one that is stopping after
# a failure (its Spark session closing) then exits with the failure's own reason, a slow one may yet be Ready.
LATE_GRACE = timedelta(minutes=1)
ROLLED_BACK = "RolledBack"
# Why a driver container waits that no waiting cures: the image is not on the node and may not be pulled
# (imagePullPolicy Never), or its name is not an image name. Such a change fails at once, not at the window's
# end; a pull that failed (ErrImagePull, ImagePullBackOff) may yet succeed, so it has the window.
NEVER_STARTS = ("ErrImageNeverPull", "InvalidImageName")
SPEC_LIMIT = 262144  # characters of a spec kept in status (the status model's bound)


def spec_json(spec: StreamAppSpec) -> str:
    """A spec as status keeps it: canonical JSON."""
    return json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":"))


def stable_spec(status: dict[str, Any]) -> StreamAppSpec | None:
    """status.upgrade.lastStableSpec as a spec (None: none, or not one: status is read as untrusted)."""
    text = (status.get("upgrade") or {}).get("lastStableSpec")
    if not isinstance(text, str):
        return None
    try:
        return StreamAppSpec.model_validate(json.loads(text))
    except (ValueError, ValidationError):
        return None


def may_roll_back(app: StreamApp, status: dict[str, Any], generation: int) -> bool:
    """Whether this reconcile may run the last stable spec, so it has to be read and checked (observe)."""
    upgrade = status.get("upgrade") or {}
    rollback, watching = upgrade.get("rollback") or {}, upgrade.get("watching") or {}
    if rollback.get("generation") == generation:
        return True
    return app.spec.upgrade.rollback and bool(upgrade.get("lastStableSpec")) and watching.get("generation") == generation


@dataclass(frozen=True)
class Verdict:
    """What the upgrade part decides before the driver's fate: the spec to run, and status.upgrade."""

    app: StreamApp  # with the spec the driver should run: the last stable one while rolled back
    status: dict[str, Any]  # status.upgrade, before the driver's own changes (driver.py: watching, preSnapshot)
    rolling_back: bool = False  # this reconcile rolls back: the failed driver goes, no snapshot, no backoff
    restore: Restore | None = None  # where a rolled-back driver restores its generation from (None: as usual)
    condition: Cond | None = None  # RolledBack, while the status has a rollback
    events: tuple[Event, ...] = ()
    last_restart: dict[str, Any] | None = None  # status.lastRestart of the rollback
    stable: StreamAppSpec | None = None  # the last stable spec, as status holds it
    requeue: timedelta | None = None  # when the watched change is due to be judged


def verdict(obs: Observed, app: StreamApp, stable_app: StreamApp | None, now: datetime) -> Verdict:
    """``stable_app``: the last stable spec, checked as the spec is (None: none, or not read)."""
    upgrade = dict(obs.status.get("upgrade") or {})
    rollback = upgrade.get("rollback") or {}
    stable = stable_spec(obs.status)
    if rollback.get("generation") == obs.generation and stable_app is not None:
        return Verdict(_running(stable_app, app), upgrade, restore=_restore_of(rollback, stable_app.spec),
                       condition=Cond(ROLLED_BACK, True, ROLLED_BACK, _rolled_back_words(rollback)), stable=stable)
    condition = Cond(ROLLED_BACK, False, "NewerSpec", f"generation {rollback.get('generation')} was rolled back; "
                     "this one was applied since") if rollback else None
    window = parse_duration(app.spec.upgrade.health_window)
    watching = upgrade.get("watching") or {}
    started = parse_time(watching.get("startedAt")) if watching.get("generation") == obs.generation else None
    failure = _failure(obs, started, window, now) if started is not None else None
    if failure is not None and app.spec.upgrade.rollback and stable_app is not None:
        return _roll_back(obs, app, stable_app, upgrade, watching, failure, now)
    running = _running_spec(obs, app)
    if failure is None and running is not None and _healthy(obs, started, window, now):
        text = spec_json(running)
        if len(text) <= SPEC_LIMIT:
            upgrade.update(lastStableGeneration=obs.generation, lastStableSpec=text)
            stable = running
        upgrade.pop("watching", None)
        started = None
    return Verdict(app, upgrade, condition=condition, stable=stable, requeue=_due(obs, started, window, now))


def _due(obs: Observed, started: datetime | None, window: timedelta, now: datetime) -> timedelta | None:
    """How soon to look again to judge the watched change (or to record a stable spec) on time, rather than at
    the next resync: when its window ends, or when the driver will have been Ready for the window."""
    moments = [m + window for m in (started, _ready_since(obs)) if m is not None]
    if started is not None:
        moments.append(started + window + LATE_GRACE)
    if started is None and (obs.status.get("upgrade") or {}).get("lastStableGeneration") == obs.generation:
        return None  # nothing watched, and this generation is recorded stable already
    later = [m - now for m in moments if m > now]
    return min(later) + timedelta(seconds=1) if later else None


def _running_spec(obs: Observed, app: StreamApp) -> StreamAppSpec | None:
    """The spec the driver runs, when it is this generation's: not the one before a change it is still to
    be restarted for (while the snapshot before it is taken, the old driver is Ready with the old spec)."""
    applied = obs.applied.spec if obs.applied is not None else None
    if applied is None or classify_change(applied, app.spec).kind not in ("ignore", "rescale"):
        return None
    return applied


def _running(stable_app: StreamApp, app: StreamApp) -> StreamApp:
    """The app with the stable spec, but for what is honoured whatever runs: suspend, snapshots, upgrade."""
    spec = app.spec
    state = stable_app.spec.state.model_copy(update={"snapshot_nonce": spec.state.snapshot_nonce,
                                                     "snapshots": spec.state.snapshots})
    kept = stable_app.spec.model_copy(update={"suspend": spec.suspend, "state": state, "upgrade": spec.upgrade})
    return app.model_copy(update={"spec": kept})


def _failure(obs: Observed, started: datetime, window: timedelta, now: datetime) -> str | None:
    """Why the change watched since ``started`` failed (None: it has not)."""
    last, pod = obs.status.get("lastRestart") or {}, obs.driver.pod
    at = parse_time(last.get("time"))
    if last.get("reason") in FAILURE_CAUSES and at is not None and at >= started:
        return f"its driver failed ({last['reason']}{_first_line(last.get('message'))})"
    if pod.state in ("failed", "succeeded"):
        return f"its driver {'exited' if pod.state == 'succeeded' else 'failed'}{_first_line(pod.message)}"
    if obs.status.get("phase") == "Failed":
        return "the operator gave up restarting its driver"
    if pod.state == "pending" and pod.waiting in NEVER_STARTS:
        return f"its driver cannot start ({pod.waiting}{_first_line(pod.message)})"
    if now - started >= window and not (pod.state == "running" and pod.ready):
        if pod.state == "running" and now - started < window + LATE_GRACE:
            return None
        return f"its driver was not Ready within healthWindow ({_words(window)})"
    return None


def _first_line(text: object) -> str:
    lines = str(text or "").strip().splitlines()
    return f": {lines[0][:300]}" if lines else ""


def _words(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def _ready_since(obs: Observed) -> datetime | None:
    ready = next((c for c in obs.status.get("conditions") or [] if c.get("type") == "Ready"), None)
    return parse_time(ready.get("lastTransitionTime")) if ready and ready.get("status") == "True" else None


def _healthy(obs: Observed, started: datetime | None, window: timedelta, now: datetime) -> bool:
    """The driver has been Ready for the window (since the change, when one is watched)."""
    since = _ready_since(obs)
    running = obs.driver.pod.state == "running" and obs.driver.pod.ready
    return running and since is not None and now - since >= window and (started is None or since >= started)


def _roll_back(obs: Observed, app: StreamApp, stable_app: StreamApp, upgrade: dict[str, Any],
               watching: dict[str, Any], failure: str, now: datetime) -> Verdict:
    snapshot = watching.get("snapshot")
    same_generation = app.spec.state.reset_nonce == stable_app.spec.state.reset_nonce
    record: dict[str, Any] = {
        "generation": obs.generation, "toGeneration": int(upgrade.get("lastStableGeneration") or 0),
        "time": rfc3339(now), "reason": f"generation {obs.generation} did not become healthy: {failure}"[:1024],
        "failedSpec": spec_json(app.spec)[:SPEC_LIMIT]}
    if same_generation and isinstance(snapshot, str) and re.match(NAME_PATTERN, snapshot):
        record["snapshot"] = snapshot
    upgrade = {k: v for k, v in upgrade.items() if k not in ("watching", "preSnapshot")}
    upgrade["rollback"] = record
    words = _rolled_back_words(record)
    return Verdict(_running(stable_app, app), upgrade, rolling_back=True, restore=_restore_of(record, stable_app.spec),
                   condition=Cond(ROLLED_BACK, True, ROLLED_BACK, words),
                   events=(Event("Warning", ROLLED_BACK, words),),
                   last_restart={"time": rfc3339(now), "reason": ROLLED_BACK, "message": record["reason"]},
                   stable=stable_spec(obs.status))


def _rolled_back_words(record: dict[str, Any]) -> str:
    state = (f"state restored from snapshot {record['snapshot']}" if record.get("snapshot")
             else "state as the stable spec left it")
    return (f"{record.get('reason', '')}; running the spec of generation {record.get('toGeneration')} again, "
            f"{state}. The failed spec is in status.upgrade.rollback.failedSpec; apply a changed spec to try again")


def _restore_of(record: dict[str, Any], stable: StreamAppSpec) -> Restore | None:
    """The rolled-back driver's restore: the snapshot taken before the change, replacing the generation."""
    name = record.get("snapshot")
    if not isinstance(name, str) or not re.match(NAME_PATTERN, name):
        return None
    base = stable.state.checkpoint.location or contract.CHECKPOINT_MOUNT
    return Restore(snapshot_location(base, name), restore_id=f"rollback-{record.get('generation')}")


def differs_from_stable(stable: StreamAppSpec | None, spec: StreamAppSpec) -> bool:
    """A driver started with ``spec`` is a change to watch: it restarts or resets against the stable spec
    (or no spec has been stable yet)."""
    return stable is None or classify_change(stable, spec).kind in ("restart", "reset", "incompatible")


@dataclass(frozen=True)
class PreChange:
    """The snapshot before a restart for a spec change: wait for it, or go on."""

    wait: bool
    name: str | None = None
    ask: str | None = None  # the ask to write on the driver pod while waiting
    asked_at: datetime | None = None
    taken: str | None = None  # the snapshot taken, when it was
    events: tuple[Event, ...] = field(default=())


def pre_change(obs: Observed, spec: StreamAppSpec, now: datetime) -> PreChange:
    """Whether to keep the Ready driver a little longer for a snapshot before it is stopped for ``spec``."""
    if not spec.upgrade.snapshot:
        return PreChange(False)
    recorded = (obs.status.get("upgrade") or {}).get("preSnapshot") or {}
    name, asked_at = recorded.get("name"), parse_time(recorded.get("askedAt"))
    # read back from status (untrusted): held to a snapshot name's pattern, as the runtime holds the ask
    if not (isinstance(name, str) and name.startswith(f"pre-{obs.generation}-") and re.match(NAME_PATTERN, name)
            and asked_at is not None):
        name, asked_at = pre_change_snapshot_name(obs.generation, now.timestamp()), now
    progress, state = obs.progress, obs.status.get("state") or {}
    if (progress.snapshot is not None and progress.snapshot.name == name) or \
            (state.get("lastSnapshot") or {}).get("name") == name:
        return PreChange(False, name, taken=name)
    skipped = _skipped(obs, name, spec, now - asked_at)
    if skipped is not None:
        return PreChange(False, name, events=(Event("Warning", "SnapshotSkipped",
                                                    f"restarting without snapshot {name}: {skipped}"),))
    ask = snapshot_ask(spec.state.model_copy(update={"snapshot_nonce": name}))
    first = recorded.get("name") != name
    events = (Event("Normal", "SnapshotRequested", f"asked the driver for snapshot {name} before restarting it for "
                                                   "the change"),) if first else ()
    return PreChange(True, name, ask, asked_at, events=events)


def _skipped(obs: Observed, name: str, spec: StreamAppSpec, waited: timedelta) -> str | None:
    """Why waiting for the snapshot is pointless (None: wait)."""
    pod, progress = obs.driver.pod, obs.progress
    if not (pod.state == "running" and pod.ready):
        return "the driver is not Ready, so it cannot take one (the last snapshot taken is the way back)"
    if progress.unanswered:
        return "the driver's metrics do not answer, so a snapshot could not be seen"
    failed = progress.snapshot_failure
    if failed is not None and failed.name == name:
        return f"it failed: {failed.reason}"
    limit = PRE_CHANGE_WAIT + 2 * (trigger_interval(spec.trigger) or timedelta(0))
    if waited > limit:
        return f"not taken within {_words(limit)}"
    return None
