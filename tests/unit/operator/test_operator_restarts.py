"""restart_decision and backoff, as tables of cases."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from streamapp_api.spec import RestartPolicy
from streamapp_operator.decide.restarts import (FAILURE_CAUSES, PodObservation, RestartHistory, backoff,
                                                restart_decision)

pytestmark = pytest.mark.unit
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
S = timedelta(seconds=1)
POLICY = RestartPolicy.model_validate({"backoff": "10s", "maxBackoff": "1m", "maxRestarts": 3})
FOREVER = RestartPolicy.model_validate({"backoff": "10s", "maxBackoff": "5m"})


@pytest.mark.parametrize("restarts, policy, expected", [
    (0, POLICY, 0), (1, POLICY, 10), (2, POLICY, 20), (3, POLICY, 40), (4, POLICY, 60), (50, POLICY, 60),
    (5, FOREVER, 160), (6, FOREVER, 300),
])
def test_backoff_doubles_and_is_capped(restarts, policy, expected):
    assert backoff(restarts, policy) == expected * S


RUNNING = PodObservation("running", running_since=T0)
FAILED = PodObservation("failed", exit_code=137, reason="Error")
REFUSED = PodObservation("failed", exit_code=2, reason="Error",
                         message="Refused: spec.streams[0].steps[0].filter: function reflect() is refused on this "
                                 "cluster (Spark's parser reads a call the admission check did not see)")
PIPELINE_ERROR = PodObservation("failed", exit_code=1, reason="Error", message="PipelineError: Refused: no")
ABSENT = PodObservation("absent")
EXPECTED = RestartHistory(driver_expected=True)


@pytest.mark.parametrize("pod, history, policy, now, action, delay", [
    # a healthy driver is left alone
    (RUNNING, EXPECTED, POLICY, T0, "keep", None),
    (PodObservation("pending"), EXPECTED, POLICY, T0, "keep", None),
    # ... and forgets its restarts once it has run long enough
    (RUNNING, RestartHistory(2, T0, True), POLICY, T0 + timedelta(minutes=11), "reset_count", None),
    (RUNNING, RestartHistory(2, T0, True), POLICY, T0 + timedelta(minutes=5), "keep", None),
    # fencing: never act while the old pod still exists
    (PodObservation("terminating"), EXPECTED, POLICY, T0, "wait", None),
    # a failure is counted once, with the first backoff
    (FAILED, EXPECTED, POLICY, T0, "record_failure", 10 * S),
    (FAILED, RestartHistory(2, T0, True), POLICY, T0, "record_failure", 40 * S),
    (PodObservation("succeeded", exit_code=0), EXPECTED, POLICY, T0, "record_failure", 10 * S),
    # a deleted or lost driver is a failure too
    (ABSENT, EXPECTED, POLICY, T0, "record_failure", 10 * S),
    # already counted (status says no driver expected): the dead pod is kept for inspection during
    # the backoff, then cleared; never a second count
    (FAILED, RestartHistory(1, T0, False), POLICY, T0 + 3 * S, "wait", 7 * S),
    (FAILED, RestartHistory(1, T0, False), POLICY, T0 + 10 * S, "clear", None),
    (FAILED, RestartHistory(1, None, False), POLICY, T0, "clear", None),
    # waiting out the backoff, then create
    (ABSENT, RestartHistory(1, T0, False), POLICY, T0 + 4 * S, "wait", 6 * S),
    (ABSENT, RestartHistory(2, T0, False), POLICY, T0 + 19 * S, "wait", 1 * S),
    (ABSENT, RestartHistory(1, T0, False), POLICY, T0 + 10 * S, "create", None),
    (ABSENT, RestartHistory(), POLICY, T0, "create", None),  # first start
    # past maxRestarts: give up and keep the dead pod for inspection
    (FAILED, RestartHistory(3, T0, True), POLICY, T0, "give_up", None),
    (ABSENT, RestartHistory(3, T0, True), POLICY, T0, "give_up", None),
    (FAILED, RestartHistory(3, T0, False, gave_up=True), POLICY, T0, "give_up", None),
    (ABSENT, RestartHistory(3, T0, False, gave_up=True), POLICY, T0 + timedelta(hours=1), "give_up", None),
    # maxRestarts 0: never give up
    (FAILED, RestartHistory(500, T0, True), FOREVER, T0, "record_failure", 300 * S),
    # the driver refused the app (a refused SQL function in its plans): the same spec is refused again,
    # so no restart at all, whatever maxRestarts says ...
    (REFUSED, EXPECTED, FOREVER, T0, "give_up", None),
    (REFUSED, RestartHistory(2, T0, True), POLICY, T0, "give_up", None),
    # ... until the spec changes (the give-up no longer holds, status expects no driver): cleared, restarted
    (REFUSED, RestartHistory(0, None, False), FOREVER, T0, "clear", None),
    # another failure's words are counted as before
    (PIPELINE_ERROR, EXPECTED, FOREVER, T0, "record_failure", 10 * S),
])
def test_restart_decision(pod, history, policy, now, action, delay):
    decision = restart_decision(pod, history, policy, now)
    assert decision.action == action
    if delay is not None:
        assert decision.delay == delay


def test_failure_reason_names_the_exit_code():
    decision = restart_decision(FAILED, EXPECTED, POLICY, T0)
    assert decision.exit_code == 137
    assert "exit code 137" in decision.reason


@pytest.mark.parametrize("pod, history, action, cause, exit_code", [
    (FAILED, EXPECTED, "record_failure", "DriverFailed", 137),
    (PodObservation("succeeded", exit_code=0), EXPECTED, "record_failure", "DriverFailed", 0),
    (PodObservation("failed", reason="NodeLost"), EXPECTED, "record_failure", "NodeLost", None),
    (ABSENT, EXPECTED, "record_failure", "DriverDeleted", None),
    (FAILED, RestartHistory(3, T0, True), "give_up", "DriverFailed", 137),
    (ABSENT, RestartHistory(3, T0, True), "give_up", "DriverDeleted", None),
    # nothing restarted: no cause for status.lastRestart
    (RUNNING, EXPECTED, "keep", None, None),
    (FAILED, RestartHistory(1, T0, False), "wait", None, 137),
    (FAILED, RestartHistory(1, None, False), "clear", None, 137),
    (ABSENT, RestartHistory(), "create", None, None),
])
def test_restart_decision_names_the_cause_for_last_restart(pod, history, action, cause, exit_code):
    decision = restart_decision(pod, history, POLICY, T0)
    assert (decision.action, decision.cause, decision.exit_code) == (action, cause, exit_code)
    assert cause is None or cause in FAILURE_CAUSES


@pytest.mark.parametrize("pod, history", [
    (FAILED, RestartHistory(3, T0, True)),  # giving up now
    (FAILED, RestartHistory(3, T0, False, gave_up=True)),  # and every look after: same reason
    (ABSENT, RestartHistory(3, T0, False, gave_up=True)),
])
def test_giving_up_always_says_why(pod, history):
    assert "gave up after 3 restarts" in restart_decision(pod, history, POLICY, T0).reason
