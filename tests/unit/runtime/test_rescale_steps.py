"""Rescale in place, the runtime's side, pure: what one look asks of Spark to reach the operator's count."""

from __future__ import annotations

import pytest

from streamapp_runtime.run.rescale import Step, step

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("target, requested, active, expected", [
    # steady: nothing to ask, nothing to let go
    (2, 2, [("1", True), ("2", False)], Step(None)),
    # up: a new total; the new executors come as pods start
    (4, 2, [("1", True), ("2", True)], Step(4)),
    # up while the last ones have not registered yet: asked already
    (4, 4, [("1", True), ("2", True)], Step(None)),
    # down: a new total, and the surplus decommissioned, idle ones first
    (1, 3, [("1", True), ("2", False), ("3", True)], Step(1, ("2", "3"))),
    # all busy: the newest go first
    (2, 3, [("1", True), ("2", True), ("3", True)], Step(2, ("3",))),
    # executor 10 is newer than 9 (numbers, not text)
    (1, 2, [("9", False), ("10", False)], Step(1, ("10",))),
    # those decommissioning already are not active: nothing more to let go
    (1, 1, [("1", True)], Step(None)),
    # a target below what registered but pending pods make up for: only the total changes
    (2, 4, [("1", False), ("2", False)], Step(2)),
    # the first look of a driver that knows no start count
    (3, None, [("1", False)], Step(3)),
])
def test_one_look_asks_for_the_total_and_lets_the_surplus_go(target, requested, active, expected):
    assert step(target, requested, active) == expected
