"""Kafka side of the data-plane bench: topics stamped by the broker, a fast producer, and a reader
that follows an engine's output topic (each row's broker time and what it counts)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from confluent_kafka import Consumer, TopicPartition
from pydantic_core import from_json  # faster than json.loads on these small records

from streamapp_testbed import kafka_admin

# The broker stamps each record when it appends it: input and output times come from one clock.
LOG_APPEND = {"message.timestamp.type": "LogAppendTime"}
FAST_PRODUCER = {"linger.ms": 20, "batch.size": 512 * 1024, "queue.buffering.max.kbytes": 256 * 1024}
# Reading a latency run's input back (millions of records) with librdkafka's default fetch sizes took
# several times as long as with these.
FAST_READER = {"fetch.max.bytes": 100 * 1024 * 1024, "max.partition.fetch.bytes": 16 * 1024 * 1024,
               "queued.min.messages": 1_000_000}


def create(bootstrap: str, name: str, partitions: int) -> str:
    kafka_admin.create_topic(bootstrap, name, partitions=partitions, config=LOG_APPEND)
    return name


def produce(bootstrap: str, topic: str, records: Iterable[tuple[str, str]]) -> int:
    """As fast as the client goes; returns the count once every record is acknowledged."""
    return kafka_admin.produce(bootstrap, topic, records, producer_config=FAST_PRODUCER)


def window_ms(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


@dataclass
class Row:
    at_ms: int  # broker append time
    key: tuple[str, str, int]  # session, uuid, window start
    count: int  # clicks + page views in the window so far


@dataclass
class OutputReader:
    """Reads an output topic from the beginning in a thread; `progress` is the number of events the
    rows account for (for each session window, its latest count)."""

    bootstrap: str
    topic: str
    rows: list[Row] = field(default_factory=list)
    latest: dict[tuple[str, str, int], int] = field(default_factory=dict)
    progress: int = 0
    last_row_at: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> "OutputReader":
        self._thread = threading.Thread(target=self._run, name=f"reader-{self.topic}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"bench-{time.monotonic_ns()}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                for msg in consumer.consume(2000, 0.2):
                    if msg.error():
                        continue
                    self._add(msg.timestamp()[1], from_json(msg.value()))
        finally:
            consumer.close()

    def _add(self, at_ms: int, row: dict) -> None:
        key = (row["session_id"], row["uuid"], window_ms(row["window_start"]))
        count = int(row["clicks"]) + int(row["page_views"])
        self.rows.append(Row(at_ms, key, count))
        before = self.latest.get(key, 0)
        if count > before:
            self.latest[key] = count
            self.progress += count - before
        self.last_row_at = time.monotonic()

    def wait_for(self, expected: int, timeout: float, idle: float = 60.0, alive=lambda: True,
                 enough=lambda: False) -> bool:
        """Until `expected` events are accounted for; False on timeout, idleness, a dead engine, or as
        soon as `enough()` says so."""
        began = time.monotonic()
        while self.progress < expected:
            now = time.monotonic()
            if now - began > timeout or not alive() or enough():
                return False
            if self.last_row_at and now - self.last_row_at > idle:
                return False
            time.sleep(0.5)
        return True

    def output_ms(self) -> tuple[int, int]:
        """Broker times of the first and the latest row read (0, 0 before any)."""
        rows = self.rows
        return (rows[0].at_ms, rows[-1].at_ms) if rows else (0, 0)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


def read_input(bootstrap: str, topic: str, from_ms: int = 0, timeout: float = 300) -> list[tuple[int, dict]]:
    """(broker append time, event) of every input record appended at `from_ms` or later, up to the end
    of each partition when called, partition by partition in offset order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-in-{time.monotonic_ns()}",
                         "enable.auto.commit": False, **FAST_READER})
    partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1] for p in partitions}
    starts = {p: 0 for p in partitions}
    if from_ms:  # the first offset appended at from_ms or later (-1: none, the partition is read to its end)
        for tp in consumer.offsets_for_times([TopicPartition(topic, p, from_ms) for p in partitions], timeout=10):
            starts[tp.partition] = tp.offset if tp.offset >= 0 else ends[tp.partition]
    todo = {p for p in partitions if starts[p] < ends[p]}
    consumer.assign([TopicPartition(topic, p, starts[p]) for p in sorted(todo)])
    by_partition: dict[int, list[tuple[int, int, dict]]] = {p: [] for p in partitions}
    deadline = time.monotonic() + timeout
    try:
        while todo and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                if msg.error():
                    continue
                p = msg.partition()
                if msg.offset() < ends[p]:
                    by_partition[p].append((msg.offset(), msg.timestamp()[1], from_json(msg.value())))
                if msg.offset() >= ends[p] - 1:
                    todo.discard(p)
    finally:
        consumer.close()
    if todo:
        raise TimeoutError(f"{topic}: partitions {sorted(todo)} not read to their end in {timeout:g} s")
    out = []
    for partition in partitions:
        out.extend((at, event) for _, at, event in sorted(by_partition[partition], key=lambda r: r[0]))
    return out
