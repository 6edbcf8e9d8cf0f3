"""Small helpers over confluent_kafka for tests and the demo: topics, produce, consume."""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaException, Producer
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


def partition_count(bootstrap: str, name: str) -> int:
    topic = AdminClient({"bootstrap.servers": bootstrap}).list_topics(name, timeout=10).topics[name]
    if topic.error is not None:
        raise KafkaException(topic.error)
    return len(topic.partitions)


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


def consume_all(
    bootstrap: str, topic: str, expect: int | None = None, timeout: float = 30, idle: float = 3
) -> list[tuple[bytes | None, bytes | None]]:
    """Read a topic from the beginning.

    Stops when `expect` records arrived, or (without `expect`) when nothing new came for `idle`
    seconds after the first record; never later than `timeout`.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"testbed-reader-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    records: list[tuple[bytes | None, bytes | None]] = []
    deadline = time.monotonic() + timeout
    last_record = None
    try:
        while time.monotonic() < deadline and (expect is None or len(records) < expect):
            msg = consumer.poll(0.5)
            if msg is None:
                if expect is None and last_record is not None and time.monotonic() - last_record > idle:
                    break
                continue
            if msg.error():
                if msg.error().retriable() or "UNKNOWN_TOPIC" in msg.error().name():
                    continue
                raise KafkaException(msg.error())
            records.append((msg.key(), msg.value()))
            last_record = time.monotonic()
    finally:
        consumer.close()
    return records
