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


def test_to_end_stops_once_every_partition_is_read_up_to_its_end_at_the_start(monkeypatch):
    """Partition 0 holds offsets 0-2, partition 1 offsets 0-1 and then a transaction marker (end 3),
    partition 2 nothing; a record produced after the read began is not waited for."""
    from types import SimpleNamespace

    from confluent_kafka import TopicPartition

    clock = Clock()
    log = {0: [b"a", b"b", b"c"], 1: [b"d", b"e"], 2: []}
    ends = {0: (0, 3), 1: (0, 3), 2: (5, 5)}
    batches = [[(0, 0), (1, 0)], [(0, 1), (1, 1)], [(0, 2)], [(0, 3)]]  # (partition, offset); (0, 3) came later

    class FakeConsumer:
        def __init__(self, config):
            self.position_of = {}

        def subscribe(self, topics):
            pass

        def list_topics(self, topic, timeout):
            return SimpleNamespace(topics={topic: SimpleNamespace(partitions={0: None, 1: None, 2: None})})

        def get_watermark_offsets(self, tp, timeout):
            return ends[tp.partition]

        def consume(self, _n, timeout):
            clock.now += timeout
            out = []
            for partition, offset in batches.pop(0) if batches else []:
                # past the last record of partition 1 comes its transaction marker: the position skips it
                self.position_of[partition] = offset + 1 + (partition == 1 and offset == 1)
                out.append(Msg(log[partition][offset] if offset < len(log[partition]) else b"late"))
            return out

        def position(self, partitions):
            return [TopicPartition(tp.topic, tp.partition, self.position_of.get(tp.partition, -1001)) for tp in partitions]

        def close(self):
            pass

    monkeypatch.setattr(kafka_admin, "Consumer", FakeConsumer)
    monkeypatch.setattr(kafka_admin, "time", clock)
    got = kafka_admin.read_topic("b", "t", idle=None, timeout=30, to_end=True)
    assert [m.value() for m in got] == [b"a", b"d", b"b", b"e", b"c"]
    assert clock.now == 1.5  # three reads, no waiting for more
