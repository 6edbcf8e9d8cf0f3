"""decide.driver: every action restart_decision can pick has its outcome (the rest is test_operator_plan.py)."""

from __future__ import annotations

from typing import get_args

import pytest

from streamapp_operator.decide import driver
from streamapp_operator.decide.restarts import Action

pytestmark = pytest.mark.unit


def test_every_restart_action_has_an_outcome():
    assert set(driver.OUTCOME_OF_ACTION) == set(get_args(Action))
