"""What to do about the driver pod: keep it, replace it after a backoff, or give up.

The pod's fixed name is the fence: a new driver is only ever created when no pod of that name
exists, so "create" is only returned for an absent pod.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from streamapp_api import contract, parse_duration
from streamapp_api.spec import RestartPolicy

PodState = Literal["absent", "pending", "running", "terminating", "failed", "succeeded"]
# How long a driver must run before its consecutive restart count is forgotten.
STABLE_AFTER = timedelta(minutes=10)
# status.lastRestart.reason of a restart that is counted (a failure, or a driver stopped for making no
# progress: stall.py); a planned, graceful one (Rescale, SpecChange) is not counted and has no backoff.
FAILURE_CAUSES = ("DriverFailed", "DriverDeleted", "NodeLost", "Stalled")


@dataclass(frozen=True)
class PodObservation:
    state: PodState
    exit_code: int | None = None
    reason: str | None = None
    running_since: datetime | None = None
    ready: bool = False  # the pod's Ready condition: the runtime's /healthz answers 200
    # Why a pod is not running or why it ended, as the kubelet and the scheduler tell it: the driver
    # container's waiting reason (ErrImagePull, CreateContainerConfigError, ...), the scheduler's message
    # when the pod cannot be placed, and the waiting or termination message (a failed driver's last words).
    waiting: str | None = None
    unschedulable: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class RestartHistory:
    restarts: int = 0
    last_restart: datetime | None = None
    driver_expected: bool = False  # status says a driver was created and not deliberately stopped
    gave_up: bool = False


# keep: leave the driver; wait: look again later (a dead pod already counted stays for inspection
# during the backoff); create: start a driver; record_failure: count a restart (the dead pod stays);
# clear: delete a dead pod already counted, once the backoff has passed; give_up: phase Failed.
Action = Literal["keep", "wait", "create", "record_failure", "clear", "give_up", "reset_count"]


@dataclass(frozen=True)
class RestartDecision:
    action: Action
    reason: str = ""
    delay: timedelta | None = None
    exit_code: int | None = None
    cause: str | None = None  # one of FAILURE_CAUSES for record_failure and give_up


def failure_cause(pod: PodObservation) -> str:
    """Why a driver that should be running is not: the reason recorded in status.lastRestart."""
    if pod.state == "absent":
        return "DriverDeleted"
    return "NodeLost" if pod.reason == "NodeLost" else "DriverFailed"


def refused_by_driver(pod: PodObservation) -> bool:
    """The driver's termination message says it refused the app (a refused SQL function in its plans)."""
    return (pod.message or "").startswith(contract.REFUSED_REASON + ": ")


def backoff(restarts: int, policy: RestartPolicy) -> timedelta:
    """Delay before restart number ``restarts`` (1-based): backoff doubled each time, capped."""
    if restarts <= 0:
        return timedelta(0)
    base, cap = parse_duration(policy.backoff), parse_duration(policy.max_backoff)
    return min(base * (1 << min(restarts - 1, 30)), cap)  # 2^(restarts-1), as an int


def restart_decision(pod: PodObservation, history: RestartHistory, policy: RestartPolicy,
                     now: datetime) -> RestartDecision:
    if pod.state == "terminating":
        return RestartDecision("wait", "old driver still terminating")
    if pod.state in ("failed", "succeeded"):
        why = f"driver {'exited' if pod.state == 'succeeded' else 'failed'}"
        if pod.reason:
            why += f" ({pod.reason})"
        if pod.exit_code is not None:
            why += f" with exit code {pod.exit_code}"
        if history.gave_up:  # the dead pod stays for inspection
            return RestartDecision("give_up", _gave_up(why, history), exit_code=pod.exit_code,
                                   cause=failure_cause(pod))
        if not history.driver_expected:  # already counted: kept for inspection until the replacement is due
            ready_at = _ready_at(history, policy)
            if ready_at is not None and now < ready_at:
                return RestartDecision("wait", "restart backoff; the failed driver pod is kept until then",
                                       ready_at - now, exit_code=pod.exit_code)
            return RestartDecision("clear", why, exit_code=pod.exit_code)
        if refused_by_driver(pod):  # the same spec would be refused again: restarting cannot help
            return RestartDecision("give_up", f"{why}; not restarted: the driver refused the app, fix the spec",
                                   exit_code=pod.exit_code, cause=failure_cause(pod))
        return _count(history, policy, why, pod)
    if pod.state in ("pending", "running"):
        if (pod.state == "running" and history.restarts and pod.running_since is not None
                and now - pod.running_since >= STABLE_AFTER):
            return RestartDecision("reset_count", "driver ran long enough")
        return RestartDecision("keep")
    # absent
    if history.gave_up:
        return RestartDecision("give_up", _gave_up("driver gone", history), cause="DriverDeleted")
    if history.driver_expected:
        return _count(history, policy, "driver pod disappeared", pod)
    ready_at = _ready_at(history, policy)
    if ready_at is not None and now < ready_at:
        return RestartDecision("wait", "restart backoff", ready_at - now)
    return RestartDecision("create", "no driver")


def _ready_at(history: RestartHistory, policy: RestartPolicy) -> datetime | None:
    """When the next driver is due after the last counted failure (None: no failure to wait out)."""
    if history.restarts and history.last_restart is not None:
        return history.last_restart + backoff(history.restarts, policy)
    return None


def _count(history: RestartHistory, policy: RestartPolicy, why: str, pod: PodObservation) -> RestartDecision:
    cause = failure_cause(pod)
    if policy.max_restarts and history.restarts >= policy.max_restarts:
        return RestartDecision("give_up", _gave_up(why, history), exit_code=pod.exit_code, cause=cause)
    return RestartDecision("record_failure", why, backoff(history.restarts + 1, policy), pod.exit_code, cause)


def _gave_up(why: str, history: RestartHistory) -> str:
    return f"{why}; gave up after {history.restarts} restarts (restartPolicy.maxRestarts)"
