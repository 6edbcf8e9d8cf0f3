"""Small helpers over confluent_kafka for tests and the demo: topics, produce, consume."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})])
    futures[name].result(timeout=30)
    # Metadata propagates asynchronously; wait until the broker lists every partition.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        topic = admin.list_topics(name, timeout=5).topics.get(name)
        if topic and topic.error is None and len(topic.partitions) == partitions:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {name} not visible with {partitions} partitions")


def add_partitions(bootstrap: str, name: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(name, total)])[name].result(timeout=30)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | str | None, bytes | str | None]],
    producer_config: dict | None = None,
) -> int:
    """Produce (key, value) pairs and wait until every one is acknowledged; returns the count.

    `producer_config` adds or overrides librdkafka settings (the benchmarks batch harder)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True, **(producer_config or {})})
    errors: list[str] = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(str(err))

    count = 0
    for key, value in records:
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        count += 1
        if count % 10_000 == 0:
            producer.poll(0)  # serve delivery reports as we go, not all at the end
    producer.flush(120)
    if errors:
        raise KafkaException(f"{len(errors)} records not delivered to {topic}: {errors[0]}")
    return count


def read_topic(
    bootstrap: str,
    topic: str,
    until: int | None = None,
    idle: float | None = 3.0,
    timeout: float = 30.0,
    after: int = 1,
    counts: Callable[[Message], bool] = lambda _msg: True,
    config: dict[str, str] | None = None,
    to_end: bool = False,
) -> list[Message]:
    """Every message of `topic` from its start, in the order they came.

    Stops at the first of: `until` messages that `counts` accepts; nothing new for `idle` seconds
    once `after` of those came (after=0: counted from the start, so an empty topic ends the read;
    idle=None: never); with `to_end`, every partition read up to the end it had when the read began
    (all a writer that has finished wrote; under read_committed a transaction still open there holds
    the read until it ends); `timeout` seconds. A Kafka error other than a retriable one or a topic
    not created yet raises KafkaException. `counts` sees each message once, in order. `config` adds
    consumer settings (isolation.level, ...).
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"testbed-reader-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **(config or {}),
        }
    )
    consumer.subscribe([topic])
    messages: list[Message] = []
    counted = 0
    started = time.monotonic()
    deadline, last = started + timeout, started
    try:
        ends = _end_offsets(consumer, topic) if to_end else {}
        while time.monotonic() < deadline and (until is None or counted < until):
            if to_end and _read_to(consumer, topic, ends):
                break
            for msg in consumer.consume(5000, 0.5):
                if msg.error():
                    if msg.error().retriable() or "UNKNOWN_TOPIC" in msg.error().name():
                        continue
                    raise KafkaException(msg.error())
                messages.append(msg)
                counted += bool(counts(msg))
                last = time.monotonic()
                if until is not None and counted >= until:
                    break
            if idle is not None and counted >= after and time.monotonic() - last > idle:
                break
    finally:
        consumer.close()
    return messages


def _end_offsets(consumer: Consumer, topic: str) -> dict[int, int]:
    """partition -> its end offset now, for the partitions that hold anything."""
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in partitions}
    return {p: high for p, (low, high) in ends.items() if high > low}


def _read_to(consumer: Consumer, topic: str, ends: dict[int, int]) -> bool:
    """Whether the consumer's position in each partition reached its end in `ends`."""
    positions = consumer.position([TopicPartition(topic, p) for p in ends])
    return all(tp.offset >= ends[tp.partition] for tp in positions)


def consume_all(
    bootstrap: str, topic: str, expect: int | None = None, timeout: float = 30, idle: float = 3
) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record of a topic from its start: until `expect` records came, or
    (without `expect`) nothing new came for `idle` seconds after the first; never later than `timeout`."""
    messages = read_topic(bootstrap, topic, until=expect, idle=idle if expect is None else None, timeout=timeout)
    return [(msg.key(), msg.value()) for msg in messages]
