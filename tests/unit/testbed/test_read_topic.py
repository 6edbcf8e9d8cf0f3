"""The one topic reader's stop rules and errors, on a consumer that hands out a script of messages
on a fake clock (no broker)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from streamapp_testbed import kafka_admin

pytestmark = pytest.mark.unit


class Msg:
    def __init__(self, value=b"v", error=None):
        self._value, self._error = value, error

    def value(self):
        return self._value

    def error(self):
        return self._error


class Clock:
    now = 0.0

    def monotonic(self):
        return self.now

    def monotonic_ns(self):
        return int(self.now * 1e9)


@pytest.fixture
def script(monkeypatch):
    """batches[i]: what the i-th consume() returns; each consume() takes 0.5 s of the fake clock."""
    clock, batches, seen = Clock(), [], {}

    class FakeConsumer:
        def __init__(self, config):
            seen["config"] = config

        def subscribe(self, topics):
            seen["topics"] = topics

        def consume(self, _n, timeout):
            clock.now += timeout
            return batches.pop(0) if batches else []

        def close(self):
            seen["closed"] = True

    monkeypatch.setattr(kafka_admin, "Consumer", FakeConsumer)
    monkeypatch.setattr(kafka_admin, "time", clock)
    return batches, seen


def test_until_stops_at_exactly_that_many_counted_messages(script):
    batches, seen = script
    batches += [[Msg(b"a"), Msg(b"skip"), Msg(b"b")], [Msg(b"c"), Msg(b"d")]]
    got = kafka_admin.read_topic("b:9092", "t", until=3, idle=None, counts=lambda m: m.value() != b"skip")
    assert [m.value() for m in got] == [b"a", b"skip", b"b", b"c"]
    assert seen["closed"] and seen["topics"] == ["t"]


def test_idle_counts_from_the_first_message_or_from_the_start(script):
    batches, _ = script
    batches += [[], [], [], [], [Msg()]]  # the first message after 2.5 s
    assert len(kafka_admin.read_topic("b", "t", idle=1, timeout=30)) == 1
    batches += [[], [], [], [], [Msg()]]
    assert kafka_admin.read_topic("b", "t", idle=1, timeout=30, after=0) == []


def test_at_least_after_then_quiet(script):
    batches, _ = script
    batches += [[Msg()], [], [], [], [Msg()], [], [], []]
    assert len(kafka_admin.read_topic("b", "t", idle=1, timeout=30, after=2)) == 2


def test_a_timeout_ends_a_read_that_waits_for_more(script):
    batches, _ = script
    batches += [[Msg()]]
    assert len(kafka_admin.read_topic("b", "t", until=5, idle=None, timeout=3)) == 1


def test_consumer_settings_are_added(script):
    _, seen = script
    kafka_admin.read_topic("b", "t", timeout=1, config={"isolation.level": "read_committed"})
    assert seen["config"]["isolation.level"] == "read_committed"
    assert seen["config"]["auto.offset.reset"] == "earliest"


def test_a_kafka_error_raises_and_a_retriable_one_or_a_missing_topic_is_waited_out(script):
    batches, seen = script
    batches += [[Msg(error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))],
                [Msg(error=KafkaError(KafkaError._TRANSPORT, retriable=True))], [Msg()]]
    assert len(kafka_admin.read_topic("b", "t", until=1)) == 1
    batches += [[Msg(error=KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))]]
    seen.pop("closed")
    with pytest.raises(KafkaException):
        kafka_admin.read_topic("b", "t", until=1)
    assert seen["closed"]
