"""desired_executors and debounce, as tables of cases."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from streamapp_operator.decide.scaling_memory import PendingScale
from streamapp_operator.decide.scaling.partitions import debounce, desired_executors, tasks_to_cover
from streamapp_operator.decide.world import Kafka

from streamapp_testkit.operator_apps import example, spec

pytestmark = pytest.mark.unit
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
WINDOW = timedelta(seconds=60)


@pytest.mark.parametrize(
    "partitions, overrides, expected",
    [
        (1, {}, 1),  # ceil(1/2) = 1
        (3, {}, 2),  # ceil(3/2)
        (4, {}, 2),
        (5, {}, 3),
        (0, {}, 1),  # never below minExecutors (1)
        (12, {"executor": {"cores": 4}}, 3),
        (12, {"executor": {"cores": 1}}, 12),
        (100, {"scaling": {"maxExecutors": 5}}, 5),  # clamped to max
        (2, {"scaling": {"minExecutors": 3}}, 3),  # clamped to min
        (100, {"executors": 7}, 7),  # explicit count wins (kubectl scale)
        (None, {"executors": 7}, 7),  # and needs no partitions
        (None, {}, None),  # unknown partitions: unknown count
    ],
)
def test_desired_executors(partitions, overrides, expected):
    assert desired_executors(partitions, spec(**overrides)) == expected


@pytest.mark.parametrize("kafka, realtime, tasks, words", [
    (Kafka(partitions=4, by_topic=(("clickstream", 4),)), False, 4, "4 partitions"),
    # real-time: the feed and its dead-letter query each hold a slot per partition
    (Kafka(partitions=4, by_topic=(("clickstream", 4),)), True, 8, "8 task slots of real-time queries"),
    (Kafka(partitions=None, error="unreachable"), True, None, "None partitions"),
    (Kafka(partitions=0, missing_topics=("clickstream",)), True, None, "0 partitions"),
])
def test_executors_cover_partitions_or_the_slots_of_realtime_queries(kafka, realtime, tasks, words):
    app = example("click-feed")
    if not realtime:
        app = app.model_copy(update={"spec": app.spec.model_copy(update={"trigger": None})})
    found, said = tasks_to_cover(kafka, app)
    assert found == tasks and said.startswith(words)
    if tasks is not None:
        assert desired_executors(found, app.spec) == tasks // 2  # two cores per executor by default


@pytest.mark.parametrize(
    "current, desired, pending, now, explicit, executors, pending_after",
    [
        (None, 3, None, T0, False, 3, None),  # no driver yet: at once
        (2, 2, None, T0, False, 2, None),  # nothing to do
        (2, 2, PendingScale(3, T0), T0, False, 2, None),  # flapped back: pending dropped
        (2, 3, None, T0, False, 2, PendingScale(3, T0)),  # first sight: wait
        (2, 3, PendingScale(3, T0), T0 + timedelta(seconds=30), False, 2, PendingScale(3, T0)),
        (2, 3, PendingScale(3, T0), T0 + timedelta(seconds=60), False, 3, None),  # held long enough
        (2, 4, PendingScale(3, T0), T0 + timedelta(seconds=90), False, 2, PendingScale(4, T0 + timedelta(seconds=90))),
        (2, 5, None, T0, True, 5, None),  # explicit spec.executors: no debounce
        (2, None, None, T0, False, 2, None),  # unknown desired: keep what runs
    ],
)
def test_debounce(current, desired, pending, now, explicit, executors, pending_after):
    verdict = debounce(current, desired, pending, now, WINDOW, explicit)
    assert (verdict.executors, verdict.pending) == (executors, pending_after)


def test_debounce_says_when_to_look_again():
    verdict = debounce(2, 3, PendingScale(3, T0), T0 + timedelta(seconds=45), WINDOW, False)
    assert verdict.wait == timedelta(seconds=15)
