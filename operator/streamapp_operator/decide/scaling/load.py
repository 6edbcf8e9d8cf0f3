"""scaling.mode load in one reconcile: from what was observed to the count to run, status.scaling and
the event that reports a decision. Pure; the decision itself is ``autoscale.decide``.

The count is applied the way every change of it is today: a driver started with it (a graceful
restart, lastRestart reason Rescale, when it differs from what the running driver has). Whatever
applies it later reads the same ``target``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from streamapp_api import StreamApp
from streamapp_api.durations import parse_duration, trigger_interval
from streamapp_api.steps import SHUFFLING_STEPS

from ..scaling_memory import LoadHistory
from ..status import Cond, parse_time, rfc3339
from ..world import Event, Memory, Observed, Progress
from .autoscale import Bounds, Decision, Policy, QueryLoad, Signals, decide, lag_trend, record_lags
from .partitions import desired_executors


@dataclass(frozen=True)
class LoadSizing:
    executors: int | None  # the count to start a driver with (None: not known yet)
    scaling: dict[str, Any]  # status.scaling
    events: tuple[Event, ...]
    progress: Cond | None  # Progressing while a change waits out its window
    memory: Memory
    wait: timedelta | None = None  # when to look again


def load_sizing(obs: Observed, app: StreamApp, memory: Memory, shuffle_partitions: int | None,
                now: datetime) -> LoadSizing:
    spec = app.spec
    before = obs.status.get("scaling") or {}
    decided_before = before.get("target") if before.get("mode") == "load" else None
    current = obs.driver.executors if obs.driver.pod.state in ("pending", "running") else None
    if current is None:
        # No driver: the next one starts with the last decision; a first one, from the partitions.
        start = decided_before or desired_executors(None if obs.kafka.missing_topics else obs.kafka.partitions, spec)
        why = "the last decision" if decided_before else f"{obs.kafka.partitions} partitions, until the load is measured"
        status = _status(before, start, f"starting with {start} executors ({why})", None, now) if start else \
            {"mode": "load", "reason": "waiting for partition counts to size the first driver"}
        return LoadSizing(start, status, (), None, replace(memory, pending_scale=None))
    history = record_lags(memory.load, obs.progress.sink_last_batch, obs.progress.sink_lag, now)
    decision = decide(_signals(obs.progress, history), _bounds(app, obs, shuffle_partitions), _policy(app), current,
                      parse_time(before.get("lastDecisionTime")), history, now)
    status = _status(before, decision.target, decision.reason, decision.limited_by, now)
    return LoadSizing(decision.target, status, _events(before, decision, current),
                      _pending(decision, current), replace(memory, pending_scale=None, load=decision.history),
                      decision.wait)


def _signals(progress: Progress, history: LoadHistory) -> Signals:
    rates = {name: dict(getattr(progress, name)) for name in ("input_rate", "processed_rate", "batch_seconds", "batches")}
    lags, last = dict(progress.sink_lag), dict(progress.sink_last_batch)
    queries = tuple(
        QueryLoad(q, rates["input_rate"].get(q, 0.0), rates["processed_rate"].get(q, 0.0),
                  rates["batch_seconds"].get(q, 0.0), lags.get(q, 0), lag_trend(history, q),
                  int(rates["batches"].get(q, 0)), last.get(q))
        for q in sorted(set(rates["input_rate"]) | set(lags)))
    return Signals(queries, progress.read_at, progress.executors)


def _bounds(app: StreamApp, obs: Observed, shuffle_partitions: int | None) -> Bounds:
    spec = app.spec
    shuffles = any(step.kind in SHUFFLING_STEPS for stream in spec.streams for step in stream.steps)
    return Bounds(spec.scaling.min_executors, spec.scaling.max_executors, spec.executor.cores, obs.kafka.partitions,
                  shuffle_partitions if shuffles else None)


def _policy(app: StreamApp) -> Policy:
    scaling = app.spec.scaling.with_load_defaults()
    assert scaling.target_utilization is not None and scaling.catch_up is not None  # set by with_load_defaults
    assert scaling.scale_up_window is not None and scaling.scale_down_window is not None
    return Policy(scaling.target_utilization, parse_duration(scaling.catch_up), parse_duration(scaling.scale_up_window),
                  parse_duration(scaling.scale_down_window),
                  trigger_interval(app.spec.trigger))


def _status(before: dict[str, Any], target: int, reason: str, limited_by: str | None, now: datetime) -> dict[str, Any]:
    changed = before.get("mode") != "load" or before.get("target") != target
    status = {"mode": "load", "target": target, "reason": reason[:1024],
              "lastDecisionTime": rfc3339(now) if changed else before.get("lastDecisionTime")}
    if limited_by:
        status["limitedBy"] = limited_by
    return {k: v for k, v in status.items() if v is not None}


def _events(before: dict[str, Any], decision: Decision, current: int) -> tuple[Event, ...]:
    """One event per decision: when the count changes, or a bound starts to hold a scale-up back."""
    if decision.target != current or (before.get("mode") == "load" and before.get("target") != decision.target):
        return (Event("Normal", "Autoscale", decision.reason),)
    held_back = decision.limited_by in ("partitions", "shufflePartitions", "maxExecutors") and \
        decision.wanted is not None and decision.wanted >= current
    if held_back and before.get("limitedBy") != decision.limited_by:
        return (Event("Normal", "AutoscaleLimited", decision.reason),)
    return ()


def _pending(decision: Decision, current: int) -> Cond | None:
    if decision.wanted is not None and decision.wanted != current and decision.target == current:
        return Cond("Progressing", True, "ScalePending", decision.reason)
    return None
