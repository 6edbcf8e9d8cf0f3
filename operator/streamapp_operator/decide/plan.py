"""One reconcile's decision: from what was observed to a Plan of idempotent actions and a status.

Read top to bottom: invalid spec → Kafka's health → classify the change → executors → the
driver's fate (restart policy, suspend, planned replacement: driver.py) → status. Each step returns
what it decided; nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from streamapp_api import StreamApp
from streamapp_api.spec import StreamAppSpec

from .. import names
from ..render import Launch, config_hash, render_children, ui_url
from .changes import Change, classify_change
from .children import KubeObject, plan_children
from .driver import DriverInputs, DriverOutcome, driver_outcome, restart_history
from .pause import paused_plan, resumed
from .restore import Restore, resolve as resolve_restore
from .scaling.load import load_sizing
from .scaling.partitions import debounce, desired_executors, tasks_to_cover
from .scaling.pending import scaling_condition
from .scaling.rescale import NOTHING, Rescale, RescaleInputs, decide as rescale_decision
from .snapshot import SnapshotStatus, snapshot_status
from .status import Cond, fold_status, rfc3339
from .upgrade import Verdict, verdict as upgrade_verdict
from .world import Event, Memory, Observed, Plan, Progress, Settings

KAFKA_RETRY = timedelta(seconds=5)
KAFKA_RETRY_MAX = timedelta(minutes=5)


def plan(obs: Observed, settings: Settings, memory: Memory, now: datetime) -> Plan:
    if obs.paused:  # nothing of the app is touched, whatever its spec says
        return paused_plan(obs, memory, now)
    return resumed(obs, _reconciled(obs, settings, memory, now))


def _reconciled(obs: Observed, settings: Settings, memory: Memory, now: datetime) -> Plan:
    if obs.app is None:
        return _invalid(obs, memory, now)
    kafka = _kafka_health(obs, memory)
    upgrade = upgrade_verdict(obs, obs.app, obs.stable_app, now)
    change, app = _classify(obs, upgrade.app)
    sizing = _sizing(obs, app, settings, kafka.memory, now)
    children = _children(obs, app, sizing.launch, settings)
    kafka_retry = _kafka_retry(kafka.memory.kafka_failures)
    restore = upgrade.restore or resolve_restore(app, (obs.status.get("state") or {}).get("restoreFrom"),
                                                 obs.restore_source)
    driver = driver_outcome(_driver_inputs(obs, settings, app, change, sizing.launch, children, kafka_retry, now, restore,
                                           upgrade))
    return _assemble(obs, app, change, kafka, sizing, children, driver, kafka_retry, now, ui_url(app, settings.ui),
                     restore, upgrade)


def _children(obs: Observed, app: StreamApp, launch: Launch | None, settings: Settings) -> list[KubeObject]:
    if launch:
        return render_children(app, obs.uid, launch, settings.network, settings.ui)
    # Without an executor count there is no ConfigMap to write yet (it carries the count), but the
    # other children can exist already.
    return [c for c in render_children(app, obs.uid, Launch(1), settings.network, settings.ui)
            if c["kind"] != "ConfigMap"]


def _driver_inputs(obs: Observed, settings: Settings, app: StreamApp, change: Change, launch: Launch | None,
                   children: list[KubeObject], kafka_retry: timedelta, now: datetime, restore: Restore,
                   upgrade: Verdict) -> DriverInputs:
    config = next((c for c in children if c["kind"] == "ConfigMap"), None)
    wanted = config_hash(config) if config else None
    in_cluster = config_hash(obs.children.get(f"ConfigMap/{names.config_map(obs.name)}") or {})
    return DriverInputs(obs, settings, app, change, launch, config, wanted,
                        config_stale=config is not None and wanted != in_cluster, history=restart_history(obs),
                        kafka_retry=kafka_retry, now=now, rescale=_rescale(obs, settings, app, launch, now),
                        restore=restore, upgrade=upgrade)


def _rescale(obs: Observed, settings: Settings, app: StreamApp, launch: Launch | None, now: datetime) -> Rescale:
    """How a new executor count reaches the driver that runs (scaling/rescale.py): in place, or by a restart."""
    driver, progress = obs.driver, obs.progress
    if driver.pod.state not in ("pending", "running"):
        return NOTHING
    return rescale_decision(RescaleInputs(
        app.spec.scaling.in_place, launch.executors if launch else None, driver.executors, driver.executors_asked_at,
        progress.executors_target, progress.read_at is not None, driver.pod.ready,
        (obs.status.get("scaling") or {}).get("lastRescale"), settings.rescale_timeout, now))


def _assemble(obs: Observed, app: StreamApp, change: Change, kafka: _KafkaHealth, sizing: _Sizing,
              children: list[KubeObject], driver: DriverOutcome, kafka_retry: timedelta, now: datetime,
              ui: str | None, restore: Restore, upgrade: Verdict) -> Plan:
    """The Plan from what each step decided: where two steps speak to the same thing, which one wins."""
    create, patches = plan_children(children, obs.children)
    if driver.config_write is not None and driver.config_write not in create:  # else it is created anyway
        patches = [*patches, driver.config_write]
    requeue = driver.requeue
    if requeue is None:
        requeue = sizing.wait  # look again when the debounce window ends
    if requeue is None and obs.kafka.error:
        requeue = kafka_retry
    refused = (Event("Warning", "IncompatibleChange", f"{change.field}: {change.reason}"),) \
        if change.kind == "incompatible" else ()
    snapshots = snapshot_status(obs.progress, obs.status.get("state") or {},
                                app.spec.state.checkpoint.location or names.CHECKPOINT_MOUNT)
    # Kafka's trouble outranks the driver's in Degraded; the driver's news outranks a pending scale.
    status = _status(obs, app, change, driver, sizing.desired, now, progress=driver.progress or sizing.progress,
                     degraded=kafka.degraded or driver.degraded, scaling=sizing.scaling, ui=ui,
                     state=_state(obs, app, driver, restore, snapshots), upgrade=_upgrade(upgrade, driver))
    return Plan(status=status, create=tuple(create), patch=tuple(patches), driver=driver.action,
                driver_pod=driver.pod, driver_patch=driver.driver_patch, status_first=driver.status_first,
                events=kafka.events + sizing.events + refused + upgrade.events + driver.events + snapshots.events,
                requeue=requeue, due=upgrade.requeue,  # the change's health window ends
                memory=sizing.memory, restarted=driver.restarted, desired_executors=sizing.desired)


def _upgrade(upgrade: Verdict, driver: DriverOutcome) -> tuple[dict[str, Any] | None, Cond | None]:
    """status.upgrade: what the upgrade verdict says, with the driver's news (a watch begun, a snapshot asked)."""
    merged = {**upgrade.status, **(driver.upgrade or {})}
    return {k: v for k, v in merged.items() if v is not None} or None, upgrade.condition


def _kafka_retry(failures: int) -> timedelta:
    """When to look again while Kafka cannot be read: 5 s after the first failure, doubling, capped."""
    return min(KAFKA_RETRY * (1 << min(max(failures, 1) - 1, 30)), KAFKA_RETRY_MAX)  # 2^(failures-1), an int


def _invalid(obs: Observed, memory: Memory, now: datetime) -> Plan:
    first = obs.issues[0] if obs.issues else None
    where = first.path if first else "spec"
    message = "; ".join(str(i) for i in obs.issues) or "invalid StreamApp"
    conds = [Cond("SpecValid", False, "Invalid", message), Cond("Ready", False, "Invalid", f"{where} is invalid"),
             Cond("Progressing", False, "Invalid"), Cond("Degraded", False, "AsExpected")]
    status = fold_status(obs.status, phase="Invalid", message=f"{where}: {first.message if first else message}",
                         conditions=conds, now=now, generation=obs.generation, reason="Invalid",
                         restarts=obs.status.get("restarts"), last_restart=obs.status.get("lastRestart"),
                         desired_executors=obs.status.get("desiredExecutors"), driver_pod=obs.status.get("driverPod"),
                         scaling=obs.status.get("scaling"), ui_url=obs.status.get("uiURL"))
    return Plan(status=status, events=(Event("Warning", "InvalidSpec", message),), memory=memory)


@dataclass(frozen=True)
class _KafkaHealth:
    degraded: Cond | None
    events: tuple[Event, ...]
    memory: Memory  # with the consecutive failures to reach Kafka counted


def _kafka_health(obs: Observed, memory: Memory) -> _KafkaHealth:
    """Whether Kafka answered and has every topic, counting consecutive failures to reach it."""
    if obs.kafka.error:
        # one event per outage: the status message holds the error once it has been reported
        told = obs.status.get("message") == obs.kafka.error
        reason = "KafkaAuthFailed" if obs.kafka.auth_failed else "KafkaUnreachable"
        if any(s.field == "spec.kafka.secretRef" for s in obs.missing_secrets):
            reason = "SecretMissing"  # not Kafka's fault: its credentials are not there
        return _KafkaHealth(Cond("Degraded", True, reason, obs.kafka.error),
                            () if told else (Event("Warning", reason, obs.kafka.error),),
                            replace(memory, kafka_failures=memory.kafka_failures + 1))
    missing = Cond("Degraded", True, "TopicNotFound", "topics not found: " + ", ".join(obs.kafka.missing_topics)) \
        if obs.kafka.missing_topics else None
    return _KafkaHealth(missing, (), replace(memory, kafka_failures=0))


def _classify(obs: Observed, app: StreamApp) -> tuple[Change, StreamApp]:
    """The change against what the driver runs, and the app with the spec the driver should run."""
    applied = obs.applied
    if applied is None or applied.spec is None:
        return Change("restart", None, "first start"), app
    change = classify_change(applied.spec, app.spec)
    if change.kind == "incompatible":
        # Keep running what was applied; suspend and the snapshot asks are the settings still honoured.
        state = applied.spec.state.model_copy(update={"snapshot_nonce": app.spec.state.snapshot_nonce,
                                                      "snapshots": app.spec.state.snapshots})
        kept = applied.spec.model_copy(update={"suspend": app.spec.suspend, "state": state})
        return change, app.model_copy(update={"spec": kept})
    return change, app


@dataclass(frozen=True)
class _Sizing:
    launch: Launch | None  # None: no executor count known yet
    desired: int | None
    wait: timedelta | None  # until a pending scale has held for the debounce window
    progress: Cond | None
    events: tuple[Event, ...]
    memory: Memory  # with the pending scale
    scaling: dict[str, Any] | None = None  # status.scaling


def _launch(executors: int, settings: Settings) -> Launch:
    return Launch(executors, settings.default_image, settings.policy.functions.refuse)


def _sizing(obs: Observed, app: StreamApp, settings: Settings, memory: Memory, now: datetime) -> _Sizing:
    """The executor count to start a driver with, and a partition-driven change of it waiting out the
    debounce window; in scaling.mode load, the count the load asks for (scaling/load.py)."""
    spec = app.spec
    if spec.scaling_mode == "load":
        shuffle = _shuffle_partitions(obs, app, obs.driver.pod.state == "running")
        load = load_sizing(obs, app, memory, shuffle, now)
        return _Sizing(_launch(load.executors, settings) if load.executors else None, load.executors,
                       load.wait, load.progress, load.events, load.memory, load.scaling)
    running = obs.driver.pod.state in ("pending", "running")
    current = obs.driver.executors if running else None
    # An input topic not found sizes nothing: not created yet, or created so recently that the cached
    # partition read missed it. Sized for the topics found, a first driver was replaced seconds later
    # by a rescale (seen in the operator tests: 1 executor for 2 partitions, then a restart).
    tasks, tasks_words = tasks_to_cover(obs.kafka, app)
    desired = desired_executors(tasks, spec)
    before = memory.pending_scale
    verdict = debounce(current, desired, before, now, settings.scale_debounce, explicit=spec.executors is not None)
    window = int(settings.scale_debounce.total_seconds())
    events: tuple[Event, ...] = ()
    progress = None
    how = "rescaling the running driver in place" if spec.scaling.in_place else "restarting the driver with them"
    if verdict.pending is not None and verdict.pending != before:
        events = (Event("Normal", "ScalePending",
                        f"{tasks_words} want {verdict.pending.executors} executors "
                        f"(running {current}); {how} once that holds for {window}s"),)
    if verdict.pending is not None:
        progress = Cond("Progressing", True, "ScalePending",
                        f"{tasks_words} want {verdict.pending.executors} executors; "
                        f"waiting {window}s for it to hold, then {how}")
    executors = verdict.executors if desired is not None else (current or (obs.applied and obs.applied.executors))
    return _Sizing(_launch(executors, settings) if executors else None, desired, verdict.wait,
                   progress, events, replace(memory, pending_scale=verdict.pending),
                   _rule_status(obs, spec, desired, tasks_words, now))


def _rule_status(obs: Observed, spec: StreamAppSpec, desired: int | None, tasks_words: str,
                 now: datetime) -> dict[str, Any] | None:
    """status.scaling of the partitions and manual modes: the count the rule gives, and the rule."""
    if desired is None:
        return None
    mode = spec.scaling_mode
    if mode == "manual" and spec.scaling.mode is None:  # kubectl scale or an HPA set spec.executors
        reason = ("spec.executors (kubectl scale and an HPA set it; remove spec.executors to follow the partitions "
                  "again, or set scaling.mode)")
    elif mode == "manual":
        reason = "spec.executors"
    else:
        reason = f"{tasks_words} ÷ {spec.executor.cores} cores per executor, within minExecutors..maxExecutors"
    before = obs.status.get("scaling") or {}
    changed = before.get("mode") != mode or before.get("target") != desired
    return {"mode": mode, "target": desired, "reason": reason,
            "lastDecisionTime": rfc3339(now) if changed or not before.get("lastDecisionTime") else before["lastDecisionTime"]}


def _remedy(change: Change, name: str) -> str:
    if change.reset_proof:  # a new resetNonce would not help: say what does
        return (f"Revert the change, or move the app to a new claim: delete the app and its claim (kubectl delete "
                f"streamapp {name}; kubectl delete pvc {names.checkpoint_claim(name)}; its state goes with it), "
                "then apply it with the change.")
    return "Set spec.state.resetNonce to start from a fresh checkpoint (the old one is kept), or revert the change."


def _status(obs: Observed, app: StreamApp, change: Change, driver: DriverOutcome, desired: int | None,
            now: datetime, progress: Cond | None, degraded: Cond | None,
            state: dict[str, Any], scaling: dict[str, Any] | None = None, ui: str | None = None,
            upgrade: tuple[dict[str, Any] | None, Cond | None] = (None, None)) -> dict[str, Any]:
    if change.kind == "incompatible":
        spec_valid = Cond("SpecValid", False, "IncompatibleChange", f"{change.field}: {change.reason}. {_remedy(change, obs.name)}")
    else:
        spec_valid = Cond("SpecValid", True, "Valid")
    phase, ready = driver.phase, driver.ready
    progress = progress or Cond("Progressing", False, "Stable" if phase in ("Running", "Suspended") else phase)
    degraded = degraded or Cond("Degraded", False, "AsExpected")
    running = obs.driver.pod.state == "running" and driver.driver_pod is not None
    scaling_cond, pending = scaling_condition(obs.executor_pods, desired or obs.driver.executors, running)
    message = ready.message or ready.reason
    if spec_valid.status is False:
        message = f"change refused: {spec_valid.message}"
    elif degraded.status:
        message = degraded.message
    elif phase == "Running":
        message = f"driver running with {_executors(obs)} executors"
        if pending:  # not a fault (a node autoscaler may be adding a node), but nothing runs on them yet
            message = f"{message}; {scaling_cond.message}"
    reason = _reason(spec_valid, ready, degraded) or (scaling_cond.reason if pending and phase == "Running" else None)
    sinks = _sinks(obs.progress)
    scaling = scaling or obs.status.get("scaling")
    last_rescale = driver.last_rescale or (obs.status.get("scaling") or {}).get("lastRescale")
    if scaling is not None:
        scaling = {k: v for k, v in scaling.items() if k not in ("pendingExecutors", "lastRescale")}
        if pending:
            scaling["pendingExecutors"] = pending
        if last_rescale:
            scaling["lastRescale"] = last_rescale
    return fold_status(
        obs.status, phase=phase, message=message[:1000], now=now, generation=obs.generation,
        conditions=[ready, progress, degraded, spec_valid, scaling_cond, *filter(None, [upgrade[1]])], reason=reason,
        executors=(_executors(obs) or 0) if running else 0,
        desired_executors=desired if desired is not None else obs.status.get("desiredExecutors"),
        selector=names.executor_selector(obs.name),
        partitions=obs.kafka.partitions if obs.kafka.partitions is not None else obs.status.get("partitions"),
        lag=obs.progress.lag if running else None,
        restarts=driver.restarts, last_restart=driver.last_restart, driver_pod=driver.driver_pod,
        state=state, sinks=sinks if running else None, scaling=scaling, ui_url=ui, upgrade=upgrade[0],
    )


def _state(obs: Observed, app: StreamApp, driver: DriverOutcome, restore: Restore,
           snapshots: SnapshotStatus) -> dict[str, Any]:
    """status.state: the checkpoint in use, what its state generation started from, its last snapshot."""
    location = app.spec.state.checkpoint.location
    state: dict[str, Any] = {"location": location} if location else {"claimName": names.checkpoint_claim(obs.name)}
    if app.spec.state.reset_nonce:
        state["resetNonce"] = app.spec.state.reset_nonce
    shuffle = _shuffle_partitions(obs, app, obs.driver.pod.state == "running" and driver.driver_pod is not None)
    if shuffle:
        state["shufflePartitions"] = shuffle
    if restore.record is not None:
        state["restoreFrom"] = restore.record
    if snapshots.last is not None:
        state["lastSnapshot"] = snapshots.last
    if snapshots.failure is not None:
        state["lastSnapshotFailure"] = snapshots.failure
    if isinstance(snapshots.kept, list):
        state["snapshots"] = snapshots.kept
    return state


def _executors(obs: Observed) -> int | None:
    """The count the driver runs with: what it reports applied, else what it was started with. A count
    asked of it in place is not what it runs until it reports it: until then, the count status had."""
    reported = obs.progress.executors_target
    if reported is not None:
        return reported
    if obs.driver.executors_asked_at is not None:
        return obs.status.get("executors") or None
    return obs.driver.executors


# Ready reasons of an app on its way up as expected: nothing for `kubectl get` to point at.
_ON_ITS_WAY = ("DriverReady", "DriverCreated", "DriverPending", "DriverNotReady", "Suspended", "Terminating",
               "Restarting")


def _reason(spec_valid: Cond, ready: Cond, degraded: Cond) -> str | None:
    """status.reason, the REASON column of `kubectl get sapp`: what keeps the app from running as its
    spec says, in one word (a refused change first: the driver runs, but not what was applied)."""
    if not spec_valid.status:
        return spec_valid.reason
    if degraded.status:
        # a failed driver: why it failed (Ready's reason) says more than that it did
        return ready.reason if degraded.reason in ("DriverFailed", "Restarting") else degraded.reason
    return None if ready.status or ready.reason in _ON_ITS_WAY else ready.reason


def _shuffle_partitions(obs: Observed, app: StreamApp, running: bool) -> int | None:
    """The count the driver reports its checkpoint uses: the runtime decides it at the checkpoint's
    first run and Spark keeps it there, so only the driver knows it (an app re-created on a retained
    checkpoint keeps the old count whatever its topics have now). While no driver reports, the last
    figure reported for the same state generation."""
    if running and obs.progress.shuffle_partitions:
        return obs.progress.shuffle_partitions
    before = obs.status.get("state") or {}
    return before.get("shufflePartitions") if before.get("resetNonce") == app.spec.state.reset_nonce else None


# status.sinks[] fields counted by the driver, and where Progress keeps them.
_SINK_COUNTS = (("transactions", "sink_transactions"), ("transactionsAborted", "sink_aborted"),
                ("partitionsSkipped", "sink_skipped"))


def _sinks(progress: Progress) -> list[dict[str, Any]] | None:
    """Per-query progress for status.sinks: lag, the time of the last batch and what the sink counted
    (exactly-once transactions, partitions skipped as written before), from the driver's metrics."""
    lag, last = dict(progress.sink_lag), dict(progress.sink_last_batch)
    counts = {field: dict(getattr(progress, attr)) for field, attr in _SINK_COUNTS}
    out = []
    for query in sorted(set(lag) | set(last)):
        entry: dict[str, Any] = {"name": query}
        if query in lag:
            entry["lag"] = lag[query]
        if query in last:
            entry["lastProgressTime"] = rfc3339(last[query])
        entry.update({field: by_query[query] for field, by_query in counts.items() if query in by_query})
        out.append(entry)
    return out or None
