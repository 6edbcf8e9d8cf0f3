"""The status as the operator writes it: built as the API's status model, patched key by key."""

from __future__ import annotations

from datetime import datetime, timezone

import pydantic
import pytest

from streamapp_operator.decide.status import OWNED, Cond, fold_status, status_patch

pytestmark = pytest.mark.unit
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _fold(**fields):
    return fold_status({}, phase="Running", message="ok", conditions=[Cond("Ready", True, "DriverReady")], now=T0,
                       generation=3, **fields)


def test_fields_by_python_name_are_written_camel_case_and_none_is_left_out():
    status = _fold(desired_executors=4, driver_pod="app-driver", lag=None,
                   last_restart={"time": "2026-01-01T00:00:00Z", "reason": "DriverFailed", "exitCode": 1})
    assert status == {
        "observedGeneration": 3, "phase": "Running", "message": "ok", "desiredExecutors": 4, "driverPod": "app-driver",
        "lastRestart": {"time": "2026-01-01T00:00:00Z", "reason": "DriverFailed", "exitCode": 1},
        "conditions": [{"type": "Ready", "status": "True", "reason": "DriverReady",
                        "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 3}],
    }


@pytest.mark.parametrize("fields", [
    {"desired_executor": 4},  # no such field
    {"executors": -1},  # out of the model's bounds
    {"scaling": {"mode": "cpu"}},  # not a mode
])
def test_what_the_status_model_refuses_fails_before_the_api_server(fields):
    with pytest.raises(pydantic.ValidationError):
        _fold(**fields)


@pytest.mark.parametrize(("old", "new", "patch"), [
    ({"phase": "Running", "lag": 3}, {"phase": "Running", "lag": 3}, {}),  # nothing changed: nothing written
    ({"phase": "Running", "lag": 3}, {"phase": "Running"}, {"lag": None}),  # an owned key no longer set goes
    ({"phase": "Running", "someoneElse": 1}, {"phase": "Running"}, {}),  # a key the operator does not own stays
    ({"lastRestart": {"time": "t", "reason": "DriverFailed", "exitCode": 1}},
     {"lastRestart": {"time": "u", "reason": "Rescale"}},
     {"lastRestart": {"time": "u", "reason": "Rescale", "exitCode": None}}),  # inside an object too
])
def test_the_patch_carries_only_what_changed(old, new, patch):
    assert status_patch(old, new) == patch


def test_the_operator_owns_every_field_of_the_status_model():
    assert {"observedGeneration", "desiredExecutors", "lastRestart", "driverPod", "scaling", "conditions"} <= set(OWNED)
