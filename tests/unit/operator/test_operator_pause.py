"""The streamapp.io/pause-reconciliation annotation: while it is "true", a reconcile acts on nothing
and says so in status; removing it resumes (decide/pause.py, decide/plan.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from streamapp_operator import names
from streamapp_operator.decide.pause import pause_asked
from streamapp_operator.decide.plan import plan
from streamapp_operator.decide.restarts import PodObservation
from streamapp_operator.decide.world import Applied, Driver, Kafka, Memory, Observed, Plan, Progress, Settings
from streamapp_operator.render import Launch, render_children

from streamapp_testkit.operator_apps import app as make_app

pytestmark = pytest.mark.unit
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
SETTINGS = Settings(default_image="runtime:1")


@pytest.mark.parametrize("annotations, asked", [
    ({names.ANN_PAUSE_RECONCILIATION: "true"}, True),
    ({names.ANN_PAUSE_RECONCILIATION: "True"}, True),
    ({names.ANN_PAUSE_RECONCILIATION: "false"}, False),
    ({names.ANN_PAUSE_RECONCILIATION: ""}, False),
    ({}, False),
    (None, False),
])
def test_only_true_pauses(annotations, asked):
    assert pause_asked(annotations) is asked


def world(pod: str, *, children: bool = True, status: dict | None = None, paused: bool = True,
          **overrides) -> Observed:
    app = make_app(**overrides)
    kids = {f"{o['kind']}/{o['metadata']['name']}": o for o in render_children(app, "uid-1", Launch(2, "runtime:1"))}
    driver = Driver(PodObservation(pod, exit_code=1, running_since=T0, ready=pod == "running"), 2, uid="pod-uid")
    return Observed(name="orders", namespace="shop", uid="uid-1", generation=2,
                    status=status if status is not None else {"phase": "Running", "driverPod": "orders-driver",
                                                              "observedGeneration": 1, "restarts": 0},
                    app=app, children=kids if children else dict.fromkeys(kids), applied=Applied(make_app().spec, 2),
                    driver=Driver(PodObservation("absent")) if pod == "absent" else driver,
                    kafka=Kafka(partitions=30), progress=Progress(), paused=paused)


def acts(p: Plan) -> bool:
    return bool(p.create or p.patch or p.driver or p.driver_patch or p.restarted or p.events)


def cond(status: dict, kind: str) -> tuple[str, str] | None:
    entry = next((c for c in status.get("conditions") or [] if c["type"] == kind), None)
    return (entry["status"], entry["reason"]) if entry else None


# Each would act if not paused: a failed driver (restart), a spec change (restart), a new count from
# 30 partitions (scaling), a suspend (stop), no children and no driver (create them).
@pytest.mark.parametrize("obs", [
    world("failed"),
    world("running", image="runtime:2"),
    world("running"),
    world("running", suspend=True),
    world("absent", children=False, status={}),
], ids=["failed driver", "spec change", "rescale", "suspend", "new app"])
def test_a_paused_app_is_left_alone_whatever_would_be_done(obs):
    assert acts(plan(replace(obs, paused=False), SETTINGS, Memory(), T0)), "unpaused, the app would be acted on"
    p = plan(obs, SETTINGS, Memory(), T0)
    assert (p.create, p.patch, p.driver, p.driver_patch, p.restarted) == ((), (), None, None, False)
    assert cond(p.status, "Paused") == ("True", "ReconciliationPaused")
    assert p.status["reason"] == "ReconciliationPaused"
    assert names.ANN_PAUSE_RECONCILIATION in p.status["message"]
    for key in ("phase", "restarts", "driverPod", "observedGeneration"):  # the rest as the last reconcile left it
        assert p.status.get(key) == obs.status.get(key)
    assert [(e.type, e.reason) for e in p.events] == [("Normal", "ReconciliationPaused")]


def test_the_pause_is_told_once_and_its_status_is_stable():
    first = plan(world("running"), SETTINGS, Memory(), T0)
    second = plan(world("running", status=first.status), SETTINGS, Memory(), T0 + timedelta(minutes=5))
    assert second.status == first.status and second.events == ()


def test_removing_the_annotation_resumes_and_says_so():
    paused = plan(world("failed"), SETTINGS, Memory(), T0)
    p = plan(world("failed", status=paused.status, paused=False), SETTINGS, Memory(), T0 + timedelta(minutes=1))
    assert p.status["lastRestart"]["reason"] == "DriverFailed" and p.restarted  # what was held back happens now
    assert cond(p.status, "Paused") is None and p.status["reason"] != "ReconciliationPaused"
    assert "ReconciliationResumed" in [e.reason for e in p.events]
    again = plan(world("failed", status=p.status, paused=False), SETTINGS, Memory(), T0 + timedelta(minutes=2))
    assert "ReconciliationResumed" not in [e.reason for e in again.events]
