"""A running driver that commits no batch while records wait is restarted (lastRestart.reason Stalled):
the window (decide/stall.py) and the whole decision (decide/plan.py), from hand-built observations."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from streamapp_operator import names
from streamapp_operator.decide.plan import plan
from streamapp_operator.decide.restarts import PodObservation
from streamapp_operator.decide.stall import stall_window, stalled
from streamapp_operator.decide.world import Applied, Driver, Kafka, Memory, Observed, Progress, Settings
from streamapp_operator.render import Launch, render_children

from streamapp_testkit.operator_apps import app as make_app

pytestmark = pytest.mark.unit
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
SETTINGS = Settings(default_image="runtime:1")
MIN = timedelta(minutes=1)


def spec(**overrides):
    return make_app(**overrides).spec


@pytest.mark.parametrize("overrides, window", [
    ({}, timedelta(minutes=5)),  # back to back: the floor
    ({"trigger": "10s"}, timedelta(minutes=5)),  # 10 triggers are 100 s: the floor
    ({"trigger": "1m"}, timedelta(minutes=10)),  # 10 triggers
    ({"trigger": "1m", "restartPolicy": {"stallAfter": "90s"}}, timedelta(seconds=90)),  # the user's window
])
def test_the_window_is_ten_triggers_at_least_five_minutes_unless_set(overrides, window):
    assert stall_window(spec(**overrides)) == window


def test_real_time_mode_waits_three_checkpoint_intervals():
    # its progress comes once per 5-minute checkpoint interval, not once per record
    assert stall_window(spec().model_copy(update={"trigger": "realtime"})) == timedelta(minutes=15)


def running(since: datetime) -> PodObservation:
    return PodObservation("running", running_since=since, ready=True)


def progress(read_at: datetime | None, **queries: tuple[int, datetime | None]) -> Progress:
    """Per query: (lag, last batch)."""
    return Progress(lag=sum(lag for lag, _ in queries.values()), read_at=read_at,
                    sink_lag=tuple((q, lag) for q, (lag, _) in queries.items()),
                    sink_last_batch=tuple((q, at) for q, (_, at) in queries.items() if at is not None))


NOW = T0 + 60 * MIN


@pytest.mark.parametrize("pod, seen, why", [
    # records waiting, no batch for 10 minutes (window 5): stalled
    (running(T0), progress(NOW, big=(40, NOW - 10 * MIN)), "query big committed no batch for 10m00s with 40 records"),
    # one query of two stalled is enough
    (running(T0), progress(NOW, ok=(5, NOW - MIN), big=(7, NOW - 6 * MIN)), "query big committed no batch for 6m00s"),
    # nothing waiting: idle, not stalled
    (running(T0), progress(NOW, big=(0, NOW - 50 * MIN)), None),
    # batches keep coming: busy, not stalled
    (running(T0), progress(NOW, big=(90_000, NOW - MIN)), None),
    # just starting: running for less than the window
    (running(NOW - 4 * MIN), progress(NOW, big=(40, None)), None),
    # its metrics were not read (no data is not a stall)
    (running(T0), Progress(), None),
    # not running
    (PodObservation("pending"), progress(NOW, big=(40, NOW - 10 * MIN)), None),
    # a reading from before the driver was due: judged when it was read, not now
    (running(T0), progress(T0 + 4 * MIN, big=(40, None)), None),
    # a driver running for a while that never committed a batch, with records waiting
    (running(NOW - 6 * MIN), progress(NOW, big=(40, None)), "query big committed no batch for 6m00s"),
])
def test_a_driver_is_stalled_only_with_records_waiting_and_no_batch_for_the_window(pod, seen, why):
    found = stalled(spec(), pod, seen)
    assert (found is None) == (why is None), found
    if why:
        assert found.startswith(why) and "restartPolicy.stallAfter: 5m00s" in found


def world(*, pod: PodObservation, seen: Progress, status: dict | None = None, **overrides) -> Observed:
    app = make_app(**overrides)
    launch = Launch(2, "runtime:1")
    kids = {f"{o['kind']}/{o['metadata']['name']}": o for o in render_children(app, "uid-1", launch)}
    return Observed(name="orders", namespace="shop", uid="uid-1", generation=1,
                    status={"driverPod": names.driver_pod("orders")} if status is None else status,
                    app=app, children=kids, applied=Applied(app.spec, 2), driver=Driver(pod, 2, uid="pod-uid"),
                    kafka=Kafka(partitions=3), progress=seen)


STALLED = progress(NOW, big=(40, NOW - 10 * MIN))


def test_a_stalled_driver_is_stopped_and_counted_like_a_failure():
    p = plan(world(pod=running(T0), seen=STALLED, status={"driverPod": "orders-driver", "restarts": 1}),
             SETTINGS, Memory(), NOW)
    assert p.driver == "delete" and p.status_first and p.restarted
    assert p.status["lastRestart"] == {"time": "2026-01-01T01:00:00Z", "reason": "Stalled"}
    assert p.status["restarts"] == 2 and p.status["phase"] == "Restarting" and p.status["reason"] == "Stalled"
    assert "driverPod" not in p.status
    [event] = p.events
    assert (event.type, event.reason) == ("Warning", "Stalled")
    assert "with 40 records waiting" in event.message and "restart 2 in 20s" in event.message  # backoff 10 s, doubled


def test_the_replacement_waits_out_the_backoff_counted_from_the_stall():
    stopped = plan(world(pod=running(T0), seen=STALLED), SETTINGS, Memory(), NOW)
    gone = world(pod=PodObservation("absent"), seen=Progress(), status=stopped.status)
    early = plan(gone, SETTINGS, Memory(), NOW + timedelta(seconds=5))
    assert early.driver is None and early.requeue == timedelta(seconds=5)  # backoff 10 s for restart 1
    assert plan(gone, SETTINGS, Memory(), NOW + timedelta(seconds=11)).driver == "create"


@pytest.mark.parametrize("case, obs", [
    ("healthy", world(pod=running(T0), seen=progress(NOW, big=(40, NOW - MIN)))),
    ("idle", world(pod=running(T0), seen=progress(NOW, big=(0, NOW - 50 * MIN)))),
    ("starting", world(pod=running(NOW - MIN), seen=progress(NOW, big=(40, None)))),
    ("suspended", world(pod=running(T0), seen=STALLED, suspend=True)),
    ("window set longer", world(pod=running(T0), seen=STALLED, restartPolicy={"stallAfter": "20m"})),
])
def test_no_stall_restart_for_a_healthy_idle_starting_or_suspended_app(case, obs):
    p = plan(obs, SETTINGS, Memory(), NOW)
    assert (p.status.get("lastRestart") or {}).get("reason") != "Stalled", case
    assert not p.restarted and "Stalled" not in [e.reason for e in p.events]
    if case == "suspended":
        assert p.status["phase"] == "Suspended"


def test_past_max_restarts_a_stalled_driver_is_left_running_and_status_says_why():
    obs = world(pod=running(T0), seen=STALLED, status={"driverPod": "orders-driver", "restarts": 3},
                restartPolicy={"maxRestarts": 3})
    p = plan(obs, SETTINGS, Memory(), NOW)
    assert p.driver is None and not p.restarted and p.status["reason"] == "Stalled"
    assert "gave up after 3 restarts" in p.status["message"]
    again = plan(replace(obs, status=p.status), SETTINGS, Memory(), NOW + MIN)
    assert "Stalled" not in [e.reason for e in again.events]  # told once


def test_a_stalled_driver_that_ran_ten_minutes_keeps_its_restart_count():
    p = plan(world(pod=running(T0), seen=STALLED, status={"driverPod": "orders-driver", "restarts": 4}),
             SETTINGS, Memory(), NOW)
    assert p.status["restarts"] == 5  # not forgotten as a driver that ran long enough
