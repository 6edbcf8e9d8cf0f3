"""Executors waiting for a node: the Scaling condition, status.scaling.pendingExecutors, and a Ready
driver not called degraded for it (decide/scaling/pending.py, through decide.plan)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from streamapp_operator.decide.scaling.pending import only_waiting_for_room, scaling_condition
from streamapp_operator.decide.plan import plan
from streamapp_operator.decide.world import ExecutorPods, Memory

from test_operator_plan import SETTINGS, T0, cond, world

pytestmark = pytest.mark.unit
SAID = "Unschedulable: 0/3 nodes are available: 3 Insufficient cpu."


@pytest.mark.parametrize("pods, wanted, running, status, reason, pending, words", [
    (ExecutorPods(), 4, True, False, "ExecutorsScheduled", 0, ""),
    (ExecutorPods(pending=2), 4, True, False, "ExecutorsScheduled", 0, ""),  # being created: nothing to say
    (ExecutorPods(pending=3, why=SAID, unschedulable=3), 4, True, True, "ExecutorsPending", 3,
     "3 executor pods of 4 wanted wait for room on a node: Unschedulable: 0/3 nodes are available: 3 Insufficient cpu."),
    (ExecutorPods(pending=1, why=SAID, unschedulable=1), None, True, True, "ExecutorsPending", 1,
     "1 executor pods wait for room"),
    (ExecutorPods(pending=3, why=SAID, unschedulable=3), 4, False, False, "NoDriver", None, "no driver runs"),
])
def test_scaling_condition(pods, wanted, running, status, reason, pending, words):
    found, count = scaling_condition(pods, wanted, running)
    assert (found.type, found.status, found.reason, count) == ("Scaling", status, reason, pending)
    assert words in found.message


@pytest.mark.parametrize("pods, waiting", [
    (ExecutorPods(pending=2, why=SAID, unschedulable=2), True),
    (ExecutorPods(pending=2, failed=1, why=SAID, unschedulable=2), False),  # a failed executor is a fault
    (ExecutorPods(pending=1, why="ErrImagePull: not found"), False),
    (ExecutorPods(), False),
])
def test_only_waiting_for_room(pods, waiting):
    assert only_waiting_for_room(pods) is waiting


def test_a_ready_driver_with_executors_waiting_for_a_node_is_scaling_not_degraded():
    obs = replace(world(executors=4), executor_pods=ExecutorPods(pending=3, why=SAID, unschedulable=3))
    p = plan(obs, SETTINGS, Memory(), T0)
    assert cond(p.status, "Scaling") == ("True", "ExecutorsPending")
    assert cond(p.status, "Degraded") == ("False", "AsExpected")
    # kubectl get sapp says it: REASON, and MESSAGE with the scheduler's words (nothing runs on them yet)
    assert p.status["reason"] == "ExecutorsPending" and p.status["phase"] == "Running"
    assert p.status["message"].startswith("driver running with 4 executors; 3 executor pods of ")
    assert "wait for room on a node" in p.status["message"]
    assert "Insufficient cpu" in p.status["message"]
    assert p.status["scaling"]["pendingExecutors"] == 3
    assert p.requeue is not None and p.requeue.total_seconds() <= 10  # looked at again soon
    # the node came: the condition turns False and the count goes
    placed = plan(replace(obs, status=p.status, executor_pods=ExecutorPods()), SETTINGS, Memory(), T0)
    assert cond(placed.status, "Scaling") == ("False", "ExecutorsScheduled")
    assert "reason" not in placed.status and placed.status["message"] == "driver running with 4 executors"
    assert "pendingExecutors" not in placed.status["scaling"]


def test_a_driver_not_ready_yet_with_unschedulable_executors_is_still_degraded():
    obs = replace(world(executors=4, ready=False), executor_pods=ExecutorPods(pending=3, why=SAID, unschedulable=3))
    p = plan(obs, SETTINGS, Memory(), T0)
    assert cond(p.status, "Degraded") == ("True", "ExecutorsNotRunning")
    assert cond(p.status, "Scaling") == ("True", "ExecutorsPending")
