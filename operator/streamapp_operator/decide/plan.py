"""One reconcile's decision: from what was observed to a Plan of idempotent actions and a status.

Read top to bottom: invalid spec → classify the change → executors and shuffle partitions → the
driver's fate (restart policy, suspend, planned replacement) → status. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from streamapp_api import StreamApp

from .. import names
from ..render import Launch, config_hash, render_children, render_driver_pod
from .changes import Change, classify_change
from .children import plan_children
from .restarts import FAILURE_CAUSES, RestartHistory, restart_decision
from .scaling import debounce, desired_executors
from .status import Cond, fold_status, parse_time, rfc3339
from .world import Event, Memory, Observed, Plan, Settings

KAFKA_RETRY = timedelta(seconds=5)
KAFKA_RETRY_MAX = timedelta(minutes=5)


def plan(obs: Observed, settings: Settings, memory: Memory, now: datetime) -> Plan:
    if obs.app is None:
        return _invalid(obs, memory, now)
    return _Planner(obs, settings, memory, now).run()


def _invalid(obs: Observed, memory: Memory, now: datetime) -> Plan:
    first = obs.issues[0] if obs.issues else None
    where = first.path if first else "spec"
    message = "; ".join(str(i) for i in obs.issues) or "invalid StreamApp"
    conds = [Cond("SpecValid", False, "Invalid", message), Cond("Ready", False, "Invalid", f"{where} is invalid"),
             Cond("Progressing", False, "Invalid"), Cond("Degraded", False, "AsExpected")]
    status = fold_status(obs.status, phase="Invalid", message=f"{where}: {first.message if first else message}",
                         conditions=conds, now=now, generation=obs.generation,
                         restarts=obs.status.get("restarts"), lastRestart=obs.status.get("lastRestart"),
                         desiredExecutors=obs.status.get("desiredExecutors"), driverPod=obs.status.get("driverPod"))
    return Plan(status=status, events=(Event("Warning", "InvalidSpec", message),), memory=memory)


class _Planner:
    def __init__(self, obs: Observed, settings: Settings, memory: Memory, now: datetime):
        self.obs, self.settings, self.memory, self.now = obs, settings, memory, now
        self.events: list[Event] = []
        self.degraded: list[Cond] = []
        self.progress: Cond | None = None
        self.scale_wait: timedelta | None = None

    # --- the spec the driver should run ------------------------------------------------------
    def _classify(self) -> tuple[Change, StreamApp]:
        app, applied = self.obs.app, self.obs.applied
        if applied is None or applied.spec is None:
            return Change("restart", None, "first start"), app
        change = classify_change(applied.spec, app.spec)
        if change.kind == "incompatible":
            # Keep running what was applied; suspend is the one setting still honoured.
            kept = applied.spec.model_copy(update={"suspend": app.spec.suspend})
            return change, app.model_copy(update={"spec": kept})
        return change, app

    def _launch(self, app: StreamApp) -> tuple[Launch | None, int | None]:
        obs, spec = self.obs, app.spec
        running = obs.driver.pod.state in ("pending", "running")
        current = obs.driver.executors if running else None
        desired = desired_executors(obs.kafka.partitions, spec)
        before = self.memory.pending_scale
        verdict = debounce(current, desired, before, self.now, self.settings.scale_debounce,
                           explicit=spec.executors is not None)
        if verdict.pending is not None and verdict.pending != before:
            self.events.append(Event("Normal", "ScalePending",
                                     f"{obs.kafka.partitions} partitions want {verdict.pending.executors} executors "
                                     f"(running {current}); restarting once that holds for "
                                     f"{int(self.settings.scale_debounce.total_seconds())}s"))
        self.memory = replace(self.memory, pending_scale=verdict.pending)
        self.scale_wait = verdict.wait
        executors = verdict.executors if desired is not None else (current or (obs.applied and obs.applied.executors))
        if verdict.pending is not None:
            self.progress = Cond("Progressing", True, "ScalePending",
                                 f"{obs.kafka.partitions} partitions want {verdict.pending.executors} executors; "
                                 f"waiting {int(self.settings.scale_debounce.total_seconds())}s for it to hold")
        same_state = obs.applied is not None and obs.applied.spec is not None and \
            obs.applied.spec.state.reset_nonce == spec.state.reset_nonce
        shuffle = spec.shuffle_partitions or (obs.applied.shuffle_partitions if same_state else None) \
            or obs.kafka.largest_topic
        if not executors or not shuffle:
            return None, desired
        return Launch(executors, shuffle, self.settings.default_image), desired

    # --- the whole decision ------------------------------------------------------------------
    def run(self) -> Plan:
        obs = self.obs
        if obs.kafka.error:
            self.degraded.append(Cond("Degraded", True, "KafkaUnreachable", obs.kafka.error))
            if obs.status.get("message") != obs.kafka.error:
                self.events.append(Event("Warning", "KafkaUnreachable", obs.kafka.error))
            self.memory = replace(self.memory, kafka_failures=self.memory.kafka_failures + 1)
        else:
            self.memory = replace(self.memory, kafka_failures=0)
            if obs.kafka.missing_topics:
                self.degraded.append(Cond("Degraded", True, "TopicNotFound",
                                          "topics not found: " + ", ".join(obs.kafka.missing_topics)))
        change, app = self._classify()
        launch, desired = self._launch(app)
        if change.kind == "incompatible":
            self.events.append(Event("Warning", "IncompatibleChange", f"{change.field}: {change.reason}"))
        children = render_children(app, obs.uid, launch) if launch else \
            [c for c in render_children(app, obs.uid, Launch(1, 1)) if c["kind"] != "ConfigMap"]
        create, patches = plan_children(children, obs.children)
        config = next((c for c in children if c["kind"] == "ConfigMap"), None)
        return self._driver(app, change, launch, desired, create, patches, config)

    def _history(self) -> RestartHistory:
        status = self.obs.status
        gave_up = status.get("phase") == "Failed" and status.get("observedGeneration") == self.obs.generation
        last = status.get("lastRestart") or {}
        return RestartHistory(
            restarts=0 if status.get("phase") == "Failed" and not gave_up else int(status.get("restarts") or 0),
            # the backoff runs from the last failure; a planned restart waits for none
            last_restart=parse_time(last.get("time")) if last.get("reason") in FAILURE_CAUSES else None,
            driver_expected=bool(status.get("driverPod")),
            gave_up=gave_up,
        )

    def _driver(self, app, change, launch, desired, create, patches, config) -> Plan:
        obs, spec, now = self.obs, app.spec, self.now
        history = self._history()
        decision = restart_decision(obs.driver.pod, history, spec.restart_policy, now)
        restarts, last_restart, driver_pod = history.restarts, obs.status.get("lastRestart"), obs.status.get("driverPod")
        action, status_first, requeue, pod, restarted = None, False, None, None, False
        phase, ready = "Pending", Cond("Ready", False, "NoDriver", "no driver pod")
        want_hash = config_hash(config) if config else None
        config_write = None

        if decision.action in ("keep", "reset_count"):
            if decision.action == "reset_count":
                restarts = 0
            running = obs.driver.pod.state == "running"
            cause, replace_why = self._replacement(change, launch) or (None, None)
            if spec.suspend:
                action, status_first, driver_pod, phase = "delete", True, None, "Suspended"
                ready = Cond("Ready", False, "Suspended", "spec.suspend is true")
                self.events.append(Event("Normal", "Suspending", "stopping the driver gracefully; checkpoint kept"))
            elif replace_why:
                action, status_first, driver_pod, phase = "delete", True, None, "Restarting"
                last_restart = {"time": rfc3339(now), "reason": cause}
                ready = Cond("Ready", False, "Restarting", replace_why)
                self.progress = Cond("Progressing", True, "Restarting", replace_why)
                self.events.append(Event("Normal", "Restarting", f"stopping the driver gracefully: {replace_why}"))
            else:
                driver_pod = names.driver_pod(obs.name)
                healthy = running and obs.driver.pod.ready
                # Running once Ready; a Ready driver whose queries turn unhealthy stays Running (Ready False)
                phase = "Running" if healthy or (running and obs.status.get("phase") == "Running") else "Starting"
                ready = Cond("Ready", healthy,
                             "DriverReady" if healthy else ("DriverNotReady" if running else "DriverPending"),
                             "" if healthy else ("queries not healthy yet (/healthz)" if running else
                                                 "driver pod not running yet"))
                if change.kind == "ignore" and config and obs.applied and config_hash(config) != \
                        config_hash(obs.children.get(f"ConfigMap/{names.config_map(obs.name)}") or {}):
                    config_write = config  # no effect on the running driver: keep the record current
        elif decision.action == "wait":
            phase = "Suspended" if spec.suspend else "Restarting"
            ready = Cond("Ready", False, "Terminating" if obs.driver.pod.state == "terminating" else "Backoff",
                         decision.reason)
            requeue = decision.delay or self.settings.terminating_poll
            if obs.driver.pod.state != "terminating" and not spec.suspend:
                self.degraded.append(Cond("Degraded", True, "Restarting",
                                          f"restart {restarts} after backoff: {obs.status.get('message', '')}"))
            if spec.suspend and obs.driver.pod.state != "terminating":
                phase, ready, requeue = "Suspended", Cond("Ready", False, "Suspended", "spec.suspend is true"), None
        elif decision.action == "record_failure":
            restarts, driver_pod, restarted = restarts + 1, None, True
            last_restart = {"time": rfc3339(now), "reason": decision.cause}
            if decision.exit_code is not None:
                last_restart["exitCode"] = decision.exit_code
            action = "delete_now" if obs.driver.pod.state != "absent" else None
            status_first, phase, requeue = True, "Restarting", decision.delay
            why = f"{decision.reason}; restart {restarts} in {int(decision.delay.total_seconds())}s"
            ready = Cond("Ready", False, "DriverFailed", why)
            self.degraded.append(Cond("Degraded", True, "DriverFailed", why))
            self.events.append(Event("Warning", "DriverFailed", why))
        elif decision.action == "clear":
            action, phase, requeue = "delete_now", "Restarting", self.settings.terminating_poll
            ready = Cond("Ready", False, "DriverFailed", decision.reason)
        elif decision.action == "give_up":
            phase, driver_pod = "Failed", None
            ready = Cond("Ready", False, "MaxRestartsReached", decision.reason)
            self.degraded.append(Cond("Degraded", True, "MaxRestartsReached", decision.reason))
            if obs.status.get("phase") != "Failed":
                self.events.append(Event("Warning", "GaveUp", decision.reason))
        else:  # create
            if spec.suspend:
                phase, ready = "Suspended", Cond("Ready", False, "Suspended", "spec.suspend is true")
            elif launch is None:
                failures = max(self.memory.kafka_failures, 1)
                requeue = min(KAFKA_RETRY * 2 ** (failures - 1), KAFKA_RETRY_MAX)
                ready = Cond("Ready", False, "WaitingForKafka", "partition counts needed to size the first driver")
            else:
                pod = render_driver_pod(app, obs.uid, launch, want_hash)
                action, driver_pod, phase = "create", names.driver_pod(obs.name), "Starting"
                ready = Cond("Ready", False, "DriverCreated", "driver pod created")
                self.progress = Cond("Progressing", True, "DriverCreated",
                                     f"driver started with {launch.executors} executors")
                if want_hash != config_hash(obs.children.get(f"ConfigMap/{names.config_map(obs.name)}") or {}):
                    config_write = config
                self.events.append(Event("Normal", "DriverCreated",
                                         f"driver {driver_pod} with {launch.executors} executors, "
                                         f"checkpoint {names.checkpoint_dir(spec.state.reset_nonce)}"))
        if config_write is not None and config_write in create:
            config_write = None  # created anyway
        if config_write is not None:
            patches = list(patches) + [config_write]
        if requeue is None and self.scale_wait is not None:
            requeue = self.scale_wait  # look again when the debounce window ends
        if obs.kafka.error and requeue is None:
            failures = max(self.memory.kafka_failures, 1)
            requeue = min(KAFKA_RETRY * 2 ** (failures - 1), KAFKA_RETRY_MAX)
        status = self._status(app, change, phase, ready, launch, desired, restarts, last_restart, driver_pod)
        return Plan(status=status, create=tuple(create), patch=tuple(patches), driver=action, driver_pod=pod,
                    status_first=status_first, events=tuple(self.events), requeue=requeue, memory=self.memory,
                    restarted=restarted, desired_executors=desired)

    def _replacement(self, change: Change, launch: Launch | None) -> tuple[str, str] | None:
        """(lastRestart reason, why) the running driver must be replaced by one with the new settings, or None."""
        if change.kind in ("restart", "reset") and self.obs.applied is not None and self.obs.applied.spec is not None:
            verb = "reset state" if change.kind == "reset" else "restart"
            return "SpecChange", f"{change.field} changed ({verb})"
        if launch is not None and self.obs.driver.executors is not None and launch.executors != self.obs.driver.executors:
            return "Rescale", f"rescale from {self.obs.driver.executors} to {launch.executors} executors"
        return None

    def _status(self, app, change, phase, ready, launch, desired, restarts, last_restart, driver_pod) -> dict:
        obs = self.obs
        if change.kind == "incompatible":
            spec_valid = Cond("SpecValid", False, "IncompatibleChange",
                              f"{change.field}: {change.reason}. Set spec.state.resetNonce to start from a fresh "
                              "checkpoint (the old one is kept), or revert the change.")
        else:
            spec_valid = Cond("SpecValid", True, "Valid")
        progress = self.progress or Cond("Progressing", False, "Stable" if phase in ("Running", "Suspended") else phase)
        degraded = self.degraded[0] if self.degraded else Cond("Degraded", False, "AsExpected")
        running = obs.driver.pod.state == "running" and driver_pod is not None
        message = ready.message or ready.reason
        if spec_valid.status is False:
            message = f"change refused: {spec_valid.message}"
        elif degraded.status:
            message = degraded.message
        elif phase == "Running":
            message = f"driver running with {obs.driver.executors} executors"
        state = {"claimName": names.checkpoint_claim(obs.name)}
        if app.spec.state.reset_nonce:
            state["resetNonce"] = app.spec.state.reset_nonce
        if launch:
            state["shufflePartitions"] = launch.shuffle_partitions
        sinks = _sinks(obs.progress)
        return fold_status(
            obs.status, phase=phase, message=message[:1000], now=self.now, generation=obs.generation,
            conditions=[ready, progress, degraded, spec_valid],
            executors=(obs.driver.executors or 0) if running else 0,
            desiredExecutors=desired if desired is not None else obs.status.get("desiredExecutors"),
            selector=names.executor_selector(obs.name),
            partitions=obs.kafka.partitions if obs.kafka.partitions is not None else obs.status.get("partitions"),
            lag=obs.progress.lag if running else None,
            restarts=restarts, lastRestart=last_restart, driverPod=driver_pod,
            state=state, sinks=sinks if running else None,
        )


def _sinks(progress) -> list[dict] | None:
    """Per-query progress for status.sinks: lag and the time of the last batch, from the driver's metrics."""
    lag, last = dict(progress.sink_lag), dict(progress.sink_last_batch)
    out = []
    for query in sorted(set(lag) | set(last)):
        entry: dict = {"name": query}
        if query in lag:
            entry["lag"] = lag[query]
        if query in last:
            entry["lastProgressTime"] = rfc3339(last[query])
        out.append(entry)
    return out or None
