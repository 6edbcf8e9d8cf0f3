"""scaling.mode load through the plan: the decided count goes through the restart-based rescale, and
every decision lands in status.scaling and in one event."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from streamapp_operator import names
from streamapp_operator.decide.plan import plan
from streamapp_operator.decide.status import rfc3339
from streamapp_operator.decide.world import Memory, Progress

from test_operator_plan import SETTINGS, T0, cond, world

pytestmark = pytest.mark.unit
LOAD = {"scaling": {"mode": "load", "maxExecutors": 8}}


def progress(at, input_rate=1000.0, processed=2000.0, lag=0, batches=10) -> Progress:
    q = "orders-big-orders"
    return Progress(lag=lag, last_batch=at, sink_lag=((q, lag),), sink_last_batch=((q, at),),
                    input_rate=((q, input_rate),), processed_rate=((q, processed),), batch_seconds=((q, 1.0),),
                    batches=((q, batches),), read_at=at)


def test_a_first_driver_starts_from_the_partitions_and_says_so():
    p = plan(world(LOAD, pod="absent", children=False, partitions=3), SETTINGS, Memory(), T0)
    assert p.driver == "create" and p.desired_executors == 2
    assert p.status["scaling"] == {"mode": "load", "target": 2, "lastDecisionTime": "2026-01-01T00:00:00Z",
                                   "reason": "starting with 2 executors (3 partitions, until the load is measured)"}


def test_a_load_step_restarts_with_the_decided_count_once_it_held_for_the_up_window():
    memory, events, restarts = Memory(), [], []
    status = None
    restart = {"scaling": {**LOAD["scaling"], "rescale": "restart"}}
    for second in range(0, 61, 15):
        now = T0 + timedelta(seconds=second)
        obs = replace(world(restart, partitions=16, status=status), progress=progress(now, input_rate=4000, lag=60_000))
        p = plan(obs, SETTINGS, memory, now)
        memory, status = p.memory, p.status
        events += [e.reason for e in p.events]
        if p.driver:
            restarts.append((second, p.driver, p.status["lastRestart"]["reason"]))
            break
        assert cond(p.status, "Progressing") == ("True", "ScalePending")
    # 4000/s arrive and 200/s of lag to catch up (60 k in 5 min), at 700/s per executor: 6, after 30 s
    assert restarts == [(30, "delete", "Rescale")]
    assert status["scaling"]["target"] == 6 and status["desiredExecutors"] == 6
    assert "lag 60 k records" in status["scaling"]["reason"] and "up from 2 to 6" in status["scaling"]["reason"]
    assert events == ["Autoscale", "Restarting"]  # one event for the decision, none while it waited
    # the old driver gone, the next one starts with the decision
    gone = plan(world(restart, pod="absent", partitions=16, status={**status, "driverPod": None}), SETTINGS, memory,
                T0 + timedelta(seconds=45))
    assert gone.driver == "create" and "spark.executor.instances=6" in str(gone.patch)


def test_a_load_step_in_place_asks_the_running_driver_for_the_decided_count():
    memory, status, now = Memory(), None, T0
    for second in range(0, 31, 15):
        now = T0 + timedelta(seconds=second)
        obs = replace(world(LOAD, partitions=16, status=status),
                      progress=replace(progress(now, input_rate=4000, lag=60_000), executors_target=2))
        p = plan(obs, SETTINGS, memory, now)
        memory, status = p.memory, p.status
    assert p.driver is None, "no restart"
    assert p.driver_patch["metadata"]["annotations"][names.ANN_EXECUTORS] == "6"
    assert [e.reason for e in p.events] == ["Autoscale", "Rescaling"]
    assert status["scaling"]["target"] == 6 and status["executors"] == 2  # what the driver has, until it applies 6
    assert status["scaling"]["lastRescale"] == {"from": 2, "to": 6, "method": "InPlace", "time": rfc3339(now),
                                                "message": "2 → 6 executors in place: asked the running driver"}


def test_without_fresh_metrics_the_count_is_kept_and_status_says_why():
    p = plan(world(LOAD, partitions=16), SETTINGS, Memory(), T0)
    assert p.driver is None and p.desired_executors == 2
    assert p.status["scaling"]["reason"] == "no fresh metrics (the driver does not answer): keeping 2 executors"


def test_the_partition_bound_is_reported_when_it_stops_a_scale_up():
    obs = replace(world(LOAD, partitions=4), progress=progress(T0, input_rate=8000))
    p = plan(obs, SETTINGS, Memory(), T0)
    assert p.status["scaling"]["limitedBy"] == "partitions"
    assert "4 source partitions keep at most 2 executors of 2 cores busy" in p.status["scaling"]["reason"]
    assert [e.reason for e in p.events] == ["AutoscaleLimited"]
    again = plan(replace(obs, status=p.status), SETTINGS, p.memory, T0 + timedelta(seconds=15))
    assert again.events == () and again.driver is None  # said once


@pytest.mark.parametrize("spec, mode, reason", [
    ({}, "partitions", "3 partitions ÷ 2 cores per executor"),
    ({"executors": 2}, "manual", "spec.executors"),
])
def test_the_other_modes_say_their_rule(spec, mode, reason):
    p = plan(world(spec), SETTINGS, Memory(), T0)
    assert p.status["scaling"]["mode"] == mode and p.status["scaling"]["target"] == 2
    assert reason in p.status["scaling"]["reason"]
