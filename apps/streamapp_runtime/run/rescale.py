"""Rescale in place: a running driver follows the executor count the operator writes on its pod.

The operator writes the count on the driver pod (annotation ``contract.ANN_EXECUTORS``). Every
``POLL_SECONDS`` the runtime reads its own pod from the API server (the pod's service-account token
and CA, plain HTTPS) and, while the count differs from what Spark was asked for, applies it through
Spark's executor allocation (spark_compat): ask for the new total; on the way down, also decommission
the surplus executors, idle ones first: each takes no new task, finishes its running ones, hands its
shuffle blocks to the others and exits, so no batch fails and no query restarts. The count applied
is reported in the metrics (``contract.METRIC_EXECUTORS_TARGET``): that is how the operator sees it
took effect (else it restarts the driver with the count after a while). Why the pod's annotation,
read through the API: ``own_pod``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from streamapp_api import contract

from streamapp_runtime import spark_compat
from streamapp_runtime.run import own_pod
from streamapp_runtime.run.poller import Poller

log = logging.getLogger("streamapp.runtime")

POLL_SECONDS = 2.0


@dataclass(frozen=True)
class Step:
    """What one look does to reach the target: the total to ask for (None: asked already) and the
    executors to decommission."""

    total: int | None
    decommission: tuple[str, ...] = ()


def step(target: int, requested: int | None, active: list[tuple[str, bool]]) -> Step:
    """From the target, the total asked for last and the active executors (id, busy). Pure.

    Executors already decommissioning are not active, so a surplus is decommissioned once. Idle ones
    go first, then the newest (their loss costs the least cached state and locality)."""
    surplus = len(active) - target
    chosen: tuple[str, ...] = ()
    if surplus > 0:
        order = sorted(active, key=lambda e: (e[1], -_number(e[0])))
        chosen = tuple(executor for executor, _ in order[:surplus])
    return Step(None if target == requested else target, chosen)


def _number(executor: str) -> int:
    return int(executor) if executor.isdigit() else 0


def executor_count(annotations: dict[str, str]) -> int | None:
    """The count the operator annotated (None: none, or not a number). Pure."""
    value = annotations.get(contract.ANN_EXECUTORS, "")
    return int(value) if value.strip().isdigit() else None


class Rescaler(Poller):
    """Applies each new target to the Spark context, from a thread of its own."""

    thread_name = "streamapp-rescale"

    def __init__(self, spark, target: Callable[[], int | None], applied: int | None,
                 report: Callable[[int], None], poll: float = POLL_SECONDS):
        super().__init__(poll)
        self.spark, self.target, self.report = spark, target, report
        self.requested = applied  # the total Spark was asked for (at start: spark.executor.instances)
        if applied is not None:
            report(applied)

    def look(self) -> None:
        """Read the target once and bring Spark to it (each call safe to repeat)."""
        try:
            target = self.target()
        except (OSError, ValueError) as exc:  # the API out of reach, a token not readable, a bad answer
            self._warn(f"cannot read the executor count from the driver pod: {exc}")
            return
        if target is None or target < 0:
            return
        try:
            todo = step(target, self.requested, spark_compat.active_executors(self.spark))
            if todo.total is not None:
                if not spark_compat.request_total_executors(self.spark, todo.total):
                    self._warn("the cluster manager does not take an executor count: staying as it is")
                    return
                log.info("rescale in place: %s → %d executors", self.requested, todo.total)
                self.requested = todo.total
                self.report(todo.total)
            if todo.decommission:
                gone = spark_compat.decommission_executors(
                    self.spark, list(todo.decommission), f"rescale in place to {target} executors")
                log.info("rescale in place: decommissioning executor(s) %s", ", ".join(gone) or "none")
            self._recovered()
        except Exception as exc:  # noqa: BLE001 - py4j: a context stopping, a backend without the call
            self._warn(f"rescale to {target} executors failed: {exc}")


def for_driver_pod(spark, pod: own_pod.OwnPod | None, spark_conf: dict[str, str],
                   report: Callable[[int], None]) -> Rescaler | None:
    """A started Rescaler for a driver pod on Kubernetes (None elsewhere: a local run has no pod)."""
    if pod is None:
        return None
    try:
        applied = int(spark_conf.get("spark.executor.instances", ""))
    except ValueError:
        applied = None
    log.info("rescale in place: following %s on pod %s/%s", contract.ANN_EXECUTORS, pod.namespace, pod.name)
    return Rescaler(spark, lambda: executor_count(pod.annotations()), applied, report).start()
