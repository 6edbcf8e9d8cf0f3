"""Executors waiting for room: the Scaling condition and status.scaling.pendingExecutors. Pure.

An executor pod the scheduler cannot place stays Pending: on a cluster with a node autoscaler
(Cluster Autoscaler, Karpenter) that is how new nodes are asked for, so it is news, not a fault:
Scaling True, reason ExecutorsPending, how many of how many and what the scheduler said. Without an
autoscaler the pods wait until someone adds capacity; the condition says so all along.
"""

from __future__ import annotations

from ..status import Cond
from ..world import ExecutorPods

SCALING_STABLE = Cond("Scaling", False, "ExecutorsScheduled")


def scaling_condition(pods: ExecutorPods, wanted: int | None, running: bool) -> tuple[Cond, int | None]:
    """(the Scaling condition, status.scaling.pendingExecutors): None while no driver runs."""
    if not running:
        return Cond("Scaling", False, "NoDriver", "no driver runs: no executors are asked for"), None
    if not pods.unschedulable:
        return SCALING_STABLE, 0
    of = f" of {wanted} wanted" if wanted else ""
    said = f": {' '.join(pods.why.split())[:500]}" if pods.why else ""
    return Cond("Scaling", True, "ExecutorsPending",
                f"{pods.unschedulable} executor pods{of} wait for room on a node{said}; a node autoscaler "
                "(if the cluster has one) adds nodes for them"), pods.unschedulable


def only_waiting_for_room(pods: ExecutorPods) -> bool:
    """Every executor not running is merely unschedulable (none failed, none stuck for another reason):
    a Ready driver is then not degraded, it waits for nodes (see scaling_condition)."""
    return pods.failed == 0 and pods.unschedulable > 0 and (pods.why or "").startswith("Unschedulable")
