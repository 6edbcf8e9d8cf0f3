"""The driver's fate in one reconcile: what to do to the pod and what status says about it.

restarts.restart_decision picks an action from the pod and the restart history; each action has one
function here that turns it into a DriverOutcome. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from streamapp_api import StreamApp, contract

from .. import names
from ..render import Launch, render_driver_pod
from .changes import Change
from .diagnosis import (Diagnosis, config_maps_missing, executors_not_running, failed_driver, pending_driver,
                        secrets_missing)
from .restarts import FAILURE_CAUSES, RestartDecision, RestartHistory, backoff, restart_decision
from .restore import NO_RESTORE, REASON as RESTORE_UNAVAILABLE, Restore
from .scaling.pending import only_waiting_for_room
from .scaling.rescale import NOTHING, Rescale
from .snapshot import ask_change
from .stall import stalled
from .upgrade import PRE_CHANGE_LOOK, PreChange, Verdict, differs_from_stable, pre_change
from .status import Cond, parse_time, rfc3339
from .world import DriverAction, Event, Observed, Settings

MESSAGE_LIMIT = 4096  # characters of a failed driver's last words kept in status.lastRestart.message
SUSPENDED = Cond("Ready", False, "Suspended", "spec.suspend is true")
# How often to look again while the app is not running for a reason the operator is not told of by a
# driver pod event (a claim that binds, a Secret created, executors scheduled): within 30 s of a cause
# appearing or going, whatever the resync period (see _look_again).
NOT_RUNNING_LOOK = timedelta(seconds=10)
NOT_RUNNING_LOOK_LONGEST = timedelta(seconds=30)


@dataclass(frozen=True)
class DriverInputs:
    """What the driver's fate is decided from, besides the pod and the status in ``obs``."""

    obs: Observed
    settings: Settings
    app: StreamApp  # with the spec the driver should run (while a change is refused: the applied one)
    change: Change
    launch: Launch | None  # None: no executor count known yet (partitions unreadable), no driver to start
    config: dict[str, Any] | None  # the ConfigMap the driver reads (None without a launch)
    config_hash: str | None  # of ``config``, annotated on the driver pod
    config_stale: bool  # the ConfigMap in the cluster holds something other than ``config``
    history: RestartHistory
    kafka_retry: timedelta  # when to look again while partition counts cannot be read
    now: datetime
    rescale: Rescale = NOTHING  # how a new executor count reaches the running driver (scaling/rescale.py)
    restore: Restore = NO_RESTORE  # where a new driver restores its state generation from (restore.py)
    upgrade: Verdict | None = None  # the spec change's snapshot, watch and rollback (upgrade.py)


@dataclass(frozen=True)
class DriverOutcome:
    """What one reconcile does to the driver pod, and what status says about it."""

    phase: str
    ready: Cond
    restarts: int
    last_restart: dict[str, Any] | None  # status.lastRestart
    driver_pod: str | None  # status.driverPod: the driver that should exist (None: deliberately none)
    action: DriverAction | None = None
    pod: dict[str, Any] | None = None  # the driver pod to create (action "create")
    status_first: bool = False  # record the outcome in status before acting (deletions)
    requeue: timedelta | None = None
    restarted: bool = False  # a failure was counted
    config_write: dict[str, Any] | None = None  # the ConfigMap to bring up to date
    driver_patch: dict[str, Any] | None = None  # a merge patch of the running driver pod: its annotations
    last_rescale: dict[str, Any] | None = None  # a new status.scaling.lastRescale (None: as it is)
    progress: Cond | None = None
    degraded: Cond | None = None
    events: tuple[Event, ...] = ()
    upgrade: dict[str, Any] | None = None  # status.upgrade keys to set (None values: remove)


def restart_history(obs: Observed) -> RestartHistory:
    status = obs.status
    gave_up = status.get("phase") == "Failed" and status.get("observedGeneration") == obs.generation
    last = status.get("lastRestart") or {}
    return RestartHistory(
        restarts=0 if status.get("phase") == "Failed" and not gave_up else int(status.get("restarts") or 0),
        # the backoff runs from the last failure; a planned restart waits for none
        last_restart=parse_time(last.get("time")) if last.get("reason") in FAILURE_CAUSES else None,
        driver_expected=bool(status.get("driverPod")),
        gave_up=gave_up,
    )


def driver_outcome(inputs: DriverInputs) -> DriverOutcome:
    verdict = inputs.upgrade
    if verdict is not None and verdict.rolling_back:  # the failed spec's restarts and backoff are not the stable one's
        inputs = replace(inputs, history=RestartHistory())
    decision = restart_decision(inputs.obs.driver.pod, inputs.history, inputs.app.spec.restart_policy, inputs.now)
    outcome = OUTCOME_OF_ACTION[decision.action](inputs, decision)
    if verdict is not None and verdict.rolling_back:
        gone = outcome.action in ("delete", "delete_now")  # the failed driver: no failure counted when it is gone
        outcome = replace(outcome, last_restart=verdict.last_restart, restarts=0,
                          driver_pod=None if gone else outcome.driver_pod, status_first=outcome.status_first or gone,
                          progress=Cond("Progressing", True, "RollingBack", verdict.condition.message
                                        if verdict.condition else ""))
    return outcome


def _as_recorded(inputs: DriverInputs, phase: str, ready: Cond, **changes: Any) -> DriverOutcome:
    """An outcome that leaves the driver's record in status (restarts, lastRestart, driverPod) as it
    was, but for ``changes``."""
    status = inputs.obs.status
    return replace(DriverOutcome(phase, ready, inputs.history.restarts, status.get("lastRestart"),
                                 status.get("driverPod")), **changes)


def _keep(inputs: DriverInputs, decision: RestartDecision) -> DriverOutcome:
    """The driver is pending or running: leave it, unless it is to be suspended or replaced."""
    stall = stalled(inputs.app.spec, inputs.obs.driver.pod, inputs.obs.progress)
    if decision.action == "reset_count" and stall is None:  # it ran long enough: earlier failures no longer count
        inputs = replace(inputs, history=replace(inputs.history, restarts=0))
    if inputs.app.spec.suspend:
        return _as_recorded(inputs, "Suspended", SUSPENDED, action="delete", status_first=True, driver_pod=None,
                            events=(Event("Normal", "Suspending", "stopping the driver gracefully; checkpoint kept"),))
    replacement = _replacement(inputs)
    if replacement:
        cause, why = replacement
        rescaled = cause in ("Rescale", "RescaleFallback")
        before = _snapshot_before(inputs, cause)
        if before.wait:
            return _waiting_for_snapshot(inputs, before, why)
        return _as_recorded(
            inputs, "Restarting", Cond("Ready", False, "Restarting", why),
            action="delete", status_first=True, driver_pod=None,
            last_restart={"time": rfc3339(inputs.now), "reason": cause},
            progress=Cond("Progressing", True, "Restarting", why),
            last_rescale=inputs.rescale.record if rescaled else None,
            events=(inputs.rescale.events if rescaled else ()) + before.events +
            (Event("Normal", "Restarting", f"stopping the driver gracefully: {why}"),),
            upgrade=_watch(inputs, before.taken) if cause == "SpecChange" and not _rolled_back(inputs) else None)
    if stall is not None:
        return _stalled(inputs, stall)
    return _snapshot_asked(inputs, _rescaled_in_place(inputs, _keep_running(inputs)))


def _snapshot_before(inputs: DriverInputs, cause: str) -> PreChange:
    """The snapshot before a restart for a spec change (upgrade.py); none for other restarts or a rollback."""
    if cause != "SpecChange" or _rolled_back(inputs):
        return PreChange(False)
    return pre_change(inputs.obs, inputs.app.spec, inputs.now)


def _waiting_for_snapshot(inputs: DriverInputs, before: PreChange, why: str) -> DriverOutcome:
    """The driver kept running until it reports the snapshot asked of it before the restart."""
    kept = _keep_running(inputs)
    message = f"waiting for snapshot {before.name} before restarting the driver: {why}"
    changes: dict[str, Any] = {
        "progress": Cond("Progressing", True, "SnapshotBeforeRestart", message), "events": kept.events + before.events,
        "requeue": min(filter(None, (kept.requeue, PRE_CHANGE_LOOK))),
        "upgrade": {"preSnapshot": {"name": before.name, "askedAt": rfc3339(before.asked_at or inputs.now)}}}
    if before.ask is not None and before.ask != inputs.obs.driver.snapshot_ask and inputs.obs.driver.uid is not None:
        changes["driver_patch"] = _annotated(inputs, kept, {names.ANN_SNAPSHOT: before.ask})
    return replace(kept, **changes)


def _watch(inputs: DriverInputs, snapshot: str | None) -> dict[str, Any]:
    """status.upgrade's record of a change whose driver starts now: watched until healthy (upgrade.py)."""
    watching: dict[str, Any] = {"generation": inputs.obs.generation, "startedAt": rfc3339(inputs.now)}
    if snapshot:
        watching["snapshot"] = snapshot
    return {"watching": watching, "preSnapshot": None}


def _annotated(inputs: DriverInputs, outcome: DriverOutcome, annotations: dict[str, str | None]) -> dict[str, Any]:
    """The outcome's merge patch of the running driver pod with ``annotations`` too (None removes one); the
    pod's uid in it is a precondition: a successor of the pod read is not patched."""
    obs = inputs.obs
    patch = outcome.driver_patch or {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": names.driver_pod(obs.name), "namespace": obs.namespace, "uid": obs.driver.uid}}
    meta = patch["metadata"]
    return {**patch, "metadata": {**meta, "annotations": {**(meta.get("annotations") or {}), **annotations}}}


def _snapshot_asked(inputs: DriverInputs, outcome: DriverOutcome) -> DriverOutcome:
    """A kept driver with the snapshot ask of the spec on its pod (snapshot.py): no restart for it."""
    change = ask_change(inputs.app.spec.state, inputs.obs.driver.snapshot_ask)
    if change is None or inputs.obs.driver.uid is None:
        return outcome
    return replace(outcome, driver_patch=_annotated(inputs, outcome, {names.ANN_SNAPSHOT: change.value}),
                   events=outcome.events + change.events)


def _stalled(inputs: DriverInputs, why: str) -> DriverOutcome:
    """A running driver that makes no progress with records waiting (stall.py): stop it and count a
    restart, as for a failure (the backoff runs from now); past restartPolicy.maxRestarts, leave it and
    say so."""
    policy, restarts = inputs.app.spec.restart_policy, inputs.history.restarts
    if policy.max_restarts and restarts >= policy.max_restarts:
        why = f"{why}; not restarted: gave up after {restarts} restarts (restartPolicy.maxRestarts)"
        kept = _keep_running(inputs)
        told = inputs.obs.status.get("reason") == "Stalled"
        return replace(kept, degraded=Cond("Degraded", True, "Stalled", why),
                       events=kept.events + (() if told else (Event("Warning", "Stalled", why),)))
    restarts += 1
    why = f"{why}; restart {restarts} in {_seconds(backoff(restarts, policy))}s"
    return _as_recorded(
        inputs, "Restarting", Cond("Ready", False, "Stalled", why), action="delete", status_first=True,
        driver_pod=None, restarts=restarts, last_restart={"time": rfc3339(inputs.now), "reason": "Stalled"},
        restarted=True, degraded=Cond("Degraded", True, "Stalled", why), events=(Event("Warning", "Stalled", why),))


def _rescaled_in_place(inputs: DriverInputs, outcome: DriverOutcome) -> DriverOutcome:
    """A kept driver with what a rescale in place does to it: the count written on the pod (and into
    its ConfigMap, the record of what it runs), Progressing while it applies it, the news in events."""
    rescale = inputs.rescale
    if rescale.action not in ("ask", "wait", "applied"):
        return outcome
    changes: dict[str, Any] = {"last_rescale": rescale.record, "events": outcome.events + rescale.events}
    if rescale.action == "ask":
        changes["driver_patch"] = _annotated(inputs, outcome, {
            names.ANN_EXECUTORS: str(rescale.to), names.ANN_EXECUTORS_ASKED_AT: rfc3339(inputs.now)})
        if inputs.config_stale and inputs.config is not None:
            changes["config_write"] = inputs.config
    if rescale.action in ("ask", "wait"):
        changes["progress"] = Cond("Progressing", True, "Rescaling", rescale.message)
        changes["requeue"] = min(filter(None, (outcome.requeue, rescale.requeue)), default=None)
    return replace(outcome, **changes)


def _keep_running(inputs: DriverInputs) -> DriverOutcome:
    obs = inputs.obs
    running = obs.driver.pod.state == "running"
    healthy = running and obs.driver.pod.ready
    # Running once Ready; a Ready driver whose queries turn unhealthy stays Running (Ready False)
    phase = "Running" if healthy or (running and obs.status.get("phase") == "Running") else "Starting"
    ready = Cond("Ready", healthy,
                 "DriverReady" if healthy else ("DriverNotReady" if running else "DriverPending"),
                 "" if healthy else ("queries not healthy yet (/healthz)" if running else "driver pod not running yet"))
    why = None if running else pending_driver(inputs.app, obs.driver.pod, obs.claim, _image(inputs))
    if why is not None:
        ready = Cond("Ready", False, why.reason, why.message)
    # executors that only wait for a node do not degrade a Ready driver: the Scaling condition says so
    waiting_for_room = healthy and only_waiting_for_room(obs.executor_pods)
    executors = executors_not_running(obs.executor_pods) if running and not waiting_for_room else None
    # A change with no effect on the running driver still goes into its ConfigMap, so the record of
    # what it runs stays current.
    rewrite = inputs.change.kind in ("ignore", "rescale") and inputs.config and obs.applied and inputs.config_stale
    return _as_recorded(inputs, phase, ready, driver_pod=names.driver_pod(obs.name),
                        config_write=inputs.config if rewrite else None,
                        degraded=Cond("Degraded", True, executors.reason, executors.message) if executors else None,
                        events=_told(inputs, why or executors),
                        # a pod still being created tells its news by watch events; a cause found, or a
                        # driver not Ready, is looked at again soon (its claim, executors, Secrets)
                        requeue=_look_again(inputs) if why or executors or waiting_for_room or (running and not healthy)
                        else None)


def _image(inputs: DriverInputs) -> str:
    return inputs.app.spec.image or inputs.settings.default_image


def _look_again(inputs: DriverInputs) -> timedelta:
    """How soon to look again at an app that is not Ready: every NOT_RUNNING_LOOK while that is news,
    then every third of how long it has lasted, at most NOT_RUNNING_LOOK_LONGEST. A cause still shows
    (or goes) within 30 s, and hundreds of apps waiting for their volumes to bind (kube-controller-manager
    binds a few a second: bench/README.md, "Control plane") are not each read every 10 s."""
    ready = next((c for c in inputs.obs.status.get("conditions") or [] if c.get("type") == "Ready"), None)
    since = parse_time(ready.get("lastTransitionTime")) if ready and ready.get("status") == "False" else None
    if since is None:
        return NOT_RUNNING_LOOK
    return min(NOT_RUNNING_LOOK_LONGEST, max(NOT_RUNNING_LOOK, (inputs.now - since) / 3))


def _told(inputs: DriverInputs, why: Diagnosis | None) -> tuple[Event, ...]:
    """A Warning event for a cause not reported yet: one per new reason, not one per reconcile."""
    if why is None or inputs.obs.status.get("reason") == why.reason:
        return ()
    return (Event("Warning", why.reason, why.message),)


def _replacement(inputs: DriverInputs) -> tuple[str, str] | None:
    """(lastRestart reason, why) the running driver must be replaced by one with the new settings, or None."""
    change, obs = inputs.change, inputs.obs
    if change.kind in ("restart", "reset") and obs.applied is not None and obs.applied.spec is not None:
        verb = "reset state" if change.kind == "reset" else "restart"
        return "SpecChange", f"{change.field} changed ({verb})"
    if inputs.rescale.action == "restart":
        return "Rescale", inputs.rescale.message
    if inputs.rescale.action == "fallback":
        return "RescaleFallback", inputs.rescale.message
    return None


def _wait(inputs: DriverInputs, decision: RestartDecision) -> DriverOutcome:
    """The old driver is still terminating, or the restart backoff has not passed: look again later."""
    obs, suspend = inputs.obs, inputs.app.spec.suspend
    terminating = obs.driver.pod.state == "terminating"
    if suspend and not terminating:
        return _as_recorded(inputs, "Suspended", SUSPENDED)
    ready = Cond("Ready", False, "Terminating" if terminating else "Backoff", decision.reason)
    backoff = f"restart {inputs.history.restarts} after backoff: {obs.status.get('message', '')}"
    if obs.driver.pod.state in ("failed", "succeeded"):  # the failed driver, kept during the backoff
        why = failed_driver(inputs.app, obs.driver.pod, inputs.history.restarts)
        ready = Cond("Ready", False, why.reason, f"{why.message}; restart {inputs.history.restarts} in "
                                                 f"{_seconds(decision.delay)}s")
        backoff = ready.message
    degraded = None if terminating else Cond("Degraded", True, "Restarting", backoff)
    return _as_recorded(inputs, "Suspended" if suspend else "Restarting", ready,
                        requeue=decision.delay or inputs.settings.terminating_poll, degraded=degraded)


def _seconds(delay: timedelta | None) -> int:
    return int(delay.total_seconds()) if delay else 0


def _record_failure(inputs: DriverInputs, decision: RestartDecision) -> DriverOutcome:
    """The driver failed, exited or vanished: count a restart, record it, then clear the dead pod away."""
    pod = inputs.obs.driver.pod
    restarts = inputs.history.restarts + 1
    last_restart: dict[str, Any] = {"time": rfc3339(inputs.now), "reason": decision.cause}
    if decision.exit_code is not None:
        last_restart["exitCode"] = decision.exit_code
    reason, why = "DriverFailed", decision.reason
    if pod.state != "absent":
        found = failed_driver(inputs.app, pod, restarts)
        reason, why = found.reason, found.message
        if pod.message:  # the driver's last words (the runtime's, else its log's tail)
            last_restart["message"] = pod.message.strip()[-MESSAGE_LIMIT:]
    why = f"{why}; restart {restarts} in {_seconds(decision.delay)}s"
    # The failed pod stays until the replacement is due (restarts.restart_decision): its log can be read.
    return _as_recorded(
        inputs, "Restarting", Cond("Ready", False, reason, why), status_first=True,
        restarts=restarts, last_restart=last_restart, driver_pod=None, restarted=True, requeue=decision.delay,
        degraded=Cond("Degraded", True, "DriverFailed", why), events=(Event("Warning", "DriverFailed", why),))


def _clear(inputs: DriverInputs, decision: RestartDecision) -> DriverOutcome:
    """A dead pod whose failure is already counted: delete it."""
    return _as_recorded(inputs, "Restarting", Cond("Ready", False, "DriverFailed", decision.reason),
                        action="delete_now", requeue=inputs.settings.terminating_poll)


def _give_up(inputs: DriverInputs, decision: RestartDecision) -> DriverOutcome:
    """restartPolicy.maxRestarts reached, or the driver refused the app: phase Failed until the spec changes
    (a dead pod stays for inspection)."""
    first_time = inputs.obs.status.get("phase") != "Failed"
    pod = inputs.obs.driver.pod
    reason = "MaxRestartsReached"
    if pod.state in ("failed", "succeeded"):
        found = failed_driver(inputs.app, pod, 0)
        decision = replace(decision, reason=f"{found.message}; {decision.reason}")
        if found.reason == contract.REFUSED_REASON:  # the driver refused the app: no restart was tried
            reason = found.reason
    return _as_recorded(inputs, "Failed", Cond("Ready", False, reason, decision.reason),
                        driver_pod=None, degraded=Cond("Degraded", True, reason, decision.reason),
                        events=(Event("Warning", "GaveUp", decision.reason),) if first_time else ())


def _create(inputs: DriverInputs, decision: RestartDecision) -> DriverOutcome:
    """No driver pod and none expected: start one, unless suspended or its executor count is unknown."""
    obs, app, launch = inputs.obs, inputs.app, inputs.launch
    if app.spec.suspend:
        return _as_recorded(inputs, "Suspended", SUSPENDED)
    if launch is None or inputs.config_hash is None:  # a launch comes with its ConfigMap and that one's hash
        topics = inputs.obs.kafka.missing_topics
        why = (f"topics not found: {', '.join(topics)}; the first driver is sized from their partitions" if topics
               else "partition counts needed to size the first driver")
        return _as_recorded(inputs, "Pending", Cond("Ready", False, "WaitingForKafka", why), requeue=inputs.kafka_retry)
    missing = secrets_missing(obs.namespace, obs.missing_secrets) or \
        config_maps_missing(obs.namespace, obs.missing_config_maps)
    if missing is None and inputs.restore.problem is not None:  # no app to restore the new generation from
        missing = Diagnosis(RESTORE_UNAVAILABLE, inputs.restore.problem)
    if missing is not None:  # a driver without them could not even start its container
        return _as_recorded(inputs, "Pending", Cond("Ready", False, missing.reason, missing.message),
                            requeue=_look_again(inputs), events=_told(inputs, missing))
    driver_pod = names.driver_pod(obs.name)
    return _as_recorded(
        inputs, "Starting", Cond("Ready", False, "DriverCreated", "driver pod created"), upgrade=_watch_new(inputs),
        action="create", pod=render_driver_pod(app, obs.uid, launch, inputs.config_hash, inputs.restore.location,
                                               inputs.restore.restore_id), driver_pod=driver_pod,
        config_write=inputs.config if inputs.config_stale else None,
        progress=Cond("Progressing", True, "DriverCreated", f"driver started with {launch.executors} executors"),
        events=(Event("Normal", "DriverCreated", f"driver {driver_pod} with {launch.executors} executors, "
                                                 f"checkpoint {names.checkpoint_dir(app.spec.state.reset_nonce, app.spec.state.checkpoint.location)}"),))


def _rolled_back(inputs: DriverInputs) -> bool:
    """The driver runs (or is to run) the last stable spec in place of the applied one."""
    verdict = inputs.upgrade
    return verdict is not None and (verdict.rolling_back or (verdict.condition is not None and verdict.condition.status))


def _watch_new(inputs: DriverInputs) -> dict[str, Any] | None:
    """A driver started with a spec other than the last stable one (not a rollback's) is watched from
    now: the window runs from its creation, not from the restart decided for the change (the old
    driver's graceful stop can take a minute), which began the watch with its snapshot."""
    verdict, obs = inputs.upgrade, inputs.obs
    if verdict is None or _rolled_back(inputs):
        return None
    watching = verdict.status.get("watching") or {}
    if watching.get("generation") == obs.generation:
        return {"watching": {**watching, "startedAt": rfc3339(inputs.now)}}
    return _watch(inputs, None) if differs_from_stable(verdict.stable, inputs.app.spec) else None


# One function per restarts.Action (a unit test checks none is missing).
OUTCOME_OF_ACTION = {
    "keep": _keep,
    "reset_count": _keep,
    "wait": _wait,
    "record_failure": _record_failure,
    "clear": _clear,
    "give_up": _give_up,
    "create": _create,
}
