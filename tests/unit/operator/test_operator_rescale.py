"""Rescale in place: the decision table (decide/scaling/rescale.py), then whole reconciles of a kubectl scale:
asked in place, applied, or fallen back to a restart; a change that needs a restart still restarts."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from streamapp_operator import names
from streamapp_operator.decide.plan import plan
from streamapp_operator.decide.scaling.rescale import RescaleInputs, decide
from streamapp_operator.decide.restarts import PodObservation
from streamapp_operator.decide.world import Memory, Progress

from test_operator_plan import SETTINGS, T0, cond, world

pytestmark = pytest.mark.unit
MINUTE = timedelta(seconds=60)
IN_FLIGHT = {"from": 2, "to": 4, "method": "InPlace", "time": "2026-01-01T00:00:00Z", "message": "…"}


def inputs(**changes) -> RescaleInputs:
    base = RescaleInputs(in_place=True, wanted=4, asked=2, asked_at=None, reported=2, answers=True, ready=True,
                         last=None, timeout=MINUTE, now=T0)
    return replace(base, **changes)


@pytest.mark.parametrize("given, action, says", [
    # nothing to change: the count the driver started with and runs
    (dict(wanted=2), "none", ""),
    (dict(wanted=None), "none", ""),
    # a new count, in place: asked of the running driver, also while it does not answer yet
    (dict(), "ask", "2 → 4 executors in place"),
    (dict(reported=None, answers=False), "ask", "2 → 4 executors in place"),
    (dict(ready=False, reported=None, answers=False), "ask", "2 → 4"),
    # a driver that answers but reports no count applied is older than rescale in place: restarted now
    (dict(reported=None), "fallback", "reports no executor count applied"),
    # scaling.rescale restart: today's graceful restart
    (dict(in_place=False), "restart", "rescale from 2 to 4 executors"),
    # asked: waiting for the driver to report it, then recorded once
    (dict(asked=4, asked_at=T0, now=T0 + timedelta(seconds=10)), "wait", "asked 10s ago; it reports 2"),
    (dict(asked=4, asked_at=T0, reported=4, last=IN_FLIGHT, now=T0 + timedelta(seconds=5)), "applied",
     "2 → 4 executors in place (the driver applied it within 5s)"),
    (dict(asked=4, asked_at=T0, reported=4, last={**IN_FLIGHT, "appliedTime": "2026-01-01T00:00:05Z"}), "none", ""),
    # not applied within the timeout by a Ready driver: restarted with the count
    (dict(asked=4, asked_at=T0, now=T0 + MINUTE), "fallback", "not applied it in place within 60s (it reports 2)"),
    (dict(asked=4, asked_at=T0, answers=False, reported=None, now=T0 + MINUTE), "fallback", "it does not answer"),
    # asked before its first answer, then it answers without the count: too old, restarted at once
    (dict(asked=4, asked_at=T0, reported=None, now=T0 + timedelta(seconds=5)), "fallback", "older than rescale"),
    # a driver not Ready (starting, or its queries unhealthy) is waited for: it applies the count when it runs
    (dict(asked=4, asked_at=T0, ready=False, now=T0 + 2 * MINUTE), "wait", "asked 120s ago"),
    # asked again before the first was applied: from what the driver reports
    (dict(wanted=3, asked=4, asked_at=T0, now=T0 + timedelta(seconds=5)), "ask", "2 → 3 executors in place"),
])
def test_how_a_new_count_reaches_the_driver(given, action, says):
    decision = decide(inputs(**given))
    assert decision.action == action
    assert says in decision.message


def test_waiting_looks_again_at_the_deadline():
    assert decide(inputs(asked=4, asked_at=T0, now=T0 + timedelta(seconds=45))).requeue == timedelta(seconds=15)
    assert decide(inputs()).requeue == MINUTE


def scaled(**world_changes):
    """The app after `kubectl scale --replicas=4`, its driver started with 2."""
    return world({"executors": 4}, applied_overrides={"executors": 2}, **world_changes)


def test_kubectl_scale_asks_the_running_driver_and_records_it():
    p = plan(scaled(), SETTINGS, Memory(), T0)
    assert p.driver is None and not p.status_first, "no restart"
    assert p.driver_patch["metadata"] == {
        "name": "orders-driver", "namespace": "shop", "uid": "pod-uid",
        "annotations": {names.ANN_EXECUTORS: "4", names.ANN_EXECUTORS_ASKED_AT: "2026-01-01T00:00:00Z"}}
    # the ConfigMap, the record of what the driver runs, says 4 too (a later restart starts with them)
    assert [o["kind"] for o in p.patch] == ["ConfigMap"]
    assert "spark.executor.instances=4" in p.patch[0]["data"]["spark.properties"]
    assert cond(p.status, "Progressing") == ("True", "Rescaling")
    assert [(e.type, e.reason, e.message) for e in p.events] == [
        ("Normal", "Rescaling", "2 → 4 executors in place: asked the running driver")]
    assert p.status["scaling"]["lastRescale"]["method"] == "InPlace"
    assert p.status["executors"] == 2 and p.status["desiredExecutors"] == 4
    assert p.requeue == MINUTE


def asked(status: dict, **progress) -> dict:
    """The world once the pod carries 4 (asked at T0) and the ConfigMap was rewritten."""
    obs = world({"executors": 4}, status=status, executors=4)
    return replace(obs, driver=replace(obs.driver, executors_asked_at=T0),
                   progress=Progress(**progress) if progress else Progress())


def test_the_driver_applying_the_count_is_told_once_and_status_follows_it():
    first = plan(scaled(), SETTINGS, Memory(), T0)
    p = plan(asked(first.status, executors_target=4, executors=4, read_at=T0), SETTINGS, Memory(),
             T0 + timedelta(seconds=3))
    assert p.driver is None and p.driver_patch is None and p.patch == ()
    assert [(e.reason, e.message) for e in p.events] == [
        ("Rescaled", "2 → 4 executors in place (the driver applied it within 3s)")]
    assert p.status["scaling"]["lastRescale"]["appliedTime"] == "2026-01-01T00:00:03Z"
    assert p.status["executors"] == 4 and p.status["message"] == "driver running with 4 executors"
    assert cond(p.status, "Progressing") == ("False", "Stable")
    again = plan(asked(p.status, executors_target=4, read_at=T0), SETTINGS, Memory(), T0 + timedelta(seconds=20))
    assert again.events == () and again.status["scaling"] == p.status["scaling"]


def test_a_count_asked_but_not_reported_applied_is_not_shown_as_running():
    first = plan(scaled(), SETTINGS, Memory(), T0)
    silent = plan(asked(first.status), SETTINGS, Memory(), T0 + timedelta(seconds=10))  # no metrics read yet
    assert silent.status["executors"] == 2 and silent.status["desiredExecutors"] == 4
    old = plan(asked(silent.status, executors_target=2, read_at=T0), SETTINGS, Memory(), T0 + timedelta(seconds=20))
    assert old.status["executors"] == 2
    applied = plan(asked(old.status, executors_target=4, read_at=T0), SETTINGS, Memory(), T0 + timedelta(seconds=25))
    assert applied.status["executors"] == 4


def test_a_driver_that_does_not_apply_it_is_restarted_with_the_count_and_that_is_recorded():
    first = plan(scaled(), SETTINGS, Memory(), T0)
    waiting = plan(asked(first.status, executors_target=2, read_at=T0), SETTINGS, Memory(), T0 + timedelta(seconds=30))
    assert waiting.driver is None and waiting.events == () and waiting.requeue == timedelta(seconds=30)
    assert cond(waiting.status, "Progressing") == ("True", "Rescaling")
    p = plan(asked(waiting.status, executors_target=2, read_at=T0), SETTINGS, Memory(), T0 + MINUTE)
    assert p.driver == "delete" and p.status_first and not p.restarted
    assert p.status["lastRestart"] == {"time": "2026-01-01T00:01:00Z", "reason": "RescaleFallback"}
    assert p.status["scaling"]["lastRescale"]["method"] == "Fallback"
    assert [(e.type, e.reason) for e in p.events] == [("Warning", "RescaleFallback"), ("Normal", "Restarting")]
    # the next driver starts with the count
    gone = plan(world({"executors": 4}, pod="absent", status={**p.status, "driverPod": None}), SETTINGS, Memory(),
                T0 + MINUTE + timedelta(seconds=5))
    assert gone.driver == "create" and gone.driver_pod["metadata"]["annotations"][names.ANN_EXECUTORS] == "4"
    assert gone.status["scaling"]["lastRescale"]["method"] == "Fallback"


def test_a_runtime_older_than_rescale_in_place_is_restarted_at_once():
    obs = replace(scaled(), progress=Progress(executors=2, read_at=T0))  # answers, reports no count applied
    p = plan(obs, SETTINGS, Memory(), T0)
    assert p.driver == "delete" and p.driver_patch is None
    assert p.status["lastRestart"]["reason"] == "RescaleFallback"
    assert "a runtime older than rescale in place" in p.status["scaling"]["lastRescale"]["message"]


def test_executor_cores_still_need_a_restart_and_say_so():
    p = plan(world({"executor": {"cores": 4}, "upgrade": {"snapshot": False}}, applied_overrides={}), SETTINGS, Memory(), T0)
    assert p.driver == "delete" and p.driver_patch is None
    assert p.status["lastRestart"]["reason"] == "SpecChange"
    assert "spec.executor" in p.status["message"] and "restart" in p.status["message"]


def test_a_pending_driver_is_asked_too_and_never_falls_back_before_it_is_ready():
    first = plan(scaled(pod="pending"), SETTINGS, Memory(), T0)
    assert first.driver is None and first.driver_patch is not None
    obs = asked(first.status)
    obs = replace(obs, driver=replace(obs.driver, pod=PodObservation("running", ready=False)))
    later = plan(obs, SETTINGS, Memory(), T0 + 3 * MINUTE)
    assert later.driver is None and cond(later.status, "Progressing") == ("True", "Rescaling")
    assert isinstance(later.status["scaling"]["lastRescale"], dict)
