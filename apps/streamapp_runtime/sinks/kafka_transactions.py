"""Kafka sink, ``delivery: exactly-once``: each partition of a micro-batch in one Kafka transaction.

Spark's own Kafka sink is at-least-once: a batch replayed after a crash is written again. Here the
batch goes through ``foreachBatch`` and every non-empty partition of it (a *writer*) is produced by a
transactional producer whose ``transactional.id`` is fixed for that writer across restarts:
``streamapp.<query>.<checkpoint id>.<partition>``. In the same transaction the writer commits a
*marker*, the offset ``batch id + 1`` of a consumer group named like the transactional id, on
partition 0 of the output topic (through ``send_offsets_to_transaction``; nobody consumes with that
group). So the rows and the marker become visible together or not at all.

When a Python worker first writes a partition, it initialises the writer's producer, which fences an
older producer with the same id (a zombie driver on the same checkpoint, an earlier attempt of the same
task, another Python worker that wrote the partition before) and completes or aborts its open
transaction; only then does it read the marker. A marker at or past this batch means the batch was
committed before (a replay after a crash between Kafka's commit and Spark's): nothing is written and
the writer is counted as skipped. Otherwise the rows are written from scratch; anything an earlier
attempt left was aborted and is invisible to ``isolation.level=read_committed`` readers.

The worker keeps the writer for its next batches (``OpenWriters``; Spark reuses its Python workers),
knowing the last batch it committed, so a batch costs one transaction rather than a new producer, an
``init_transactions`` and a marker read. That knowledge stays true: any other producer that wrote
with the id since had to initialise it first, which fenced the kept one. The marker is the first
thing a kept writer's transaction sends, so a fenced writer finds out before producing a row; it
then gives way to a new producer, initialised (fencing in turn) with the marker read again. A writer
that has never committed sends its marker last, at commit: its topic may not exist before its rows.

This relies on a replayed batch giving each writer the same rows: the batch's rows are the same, and
``replay.by_content_or_state`` keeps the partitions of a stateful operator or puts the rows in
partitions by a hash of the key and value.

Limits, said in docs/runtime.md: markers are committed offsets and expire with the broker's
``offsets.retention.minutes`` (7 days by default) once a writer stops committing; the checkpoint id is
part of the transactional id, so a state reset's new checkpoint starts new writers (its rows are
appended, as with at-least-once).
"""

from __future__ import annotations

import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from streamapp_runtime import spark_compat
from streamapp_runtime.connections import librdkafka_client
from streamapp_runtime.sinks import replay

log = logging.getLogger("streamapp.runtime")
TRANSACTION_TIMEOUT_MS = 60_000  # an open transaction of a dead writer is aborted by the broker after this
CLIENT_TIMEOUT_S = 30.0
# What a group coordinator that moves or is still loading answers for a moment (a broker just
# started, a leader changed). librdkafka's committed() gives NOT_COORDINATOR back instead of asking
# again, and Kafka 4's group coordinator answers so right after a start: the marker read asks again.
COORDINATOR_MOVING = frozenset({"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE"})
MARKER_RETRY_S = 0.2


@dataclass(frozen=True)
class Target:
    config: dict[str, str]  # librdkafka settings: how to reach and authenticate to the cluster
    topic: str
    query: str


@dataclass(frozen=True)
class Written:
    """What one writer (a partition of a batch) did: rows committed, or skipped as committed before."""

    partition: int
    rows: int
    skipped: bool = False


class TransactionAborted(RuntimeError):
    """A writer's transaction failed and was aborted: none of its rows is visible."""


def writer_id(query: str, checkpoint_id: str, partition: int) -> str:
    """The transactional id (and marker group) of one writer: stable for the checkpoint's life. Pure."""
    return f"streamapp.{query}.{checkpoint_id}.{partition}"


def committed_through(marker_offset: int) -> int:
    """The last batch id a writer committed, from its marker offset (-1: none; Kafka's 'no offset'
    is negative). Pure."""
    return marker_offset - 1 if marker_offset >= 0 else -1


def read_marker_again(error_name: str, seconds_left: float) -> bool:
    """Whether a failed read of a writer's marker is tried again: a moving coordinator's answer,
    within the client timeout. Pure."""
    return error_name in COORDINATOR_MOVING and seconds_left > MARKER_RETRY_S


def batch_summary(query: str, batch_id: int, written: list[Written]) -> tuple[int, int, list[int], str | None]:
    """(rows committed, transactions committed, partitions skipped, the line to log when any was
    skipped). Pure."""
    rows = sum(w.rows for w in written if not w.skipped)
    committed = sum(1 for w in written if not w.skipped)
    skipped = sorted(w.partition for w in written if w.skipped)
    if not skipped:
        return rows, committed, skipped, None
    return rows, committed, skipped, (
        f"query {query} batch {batch_id}: {len(skipped)} partition(s) ({', '.join(map(str, skipped))}) "
        "already committed to Kafka by this checkpoint (a batch replayed after a restart): not written again")


class PartitionWriter:
    """One writer's producer and marker reader, open across batches; each batch one transaction, in
    steps (a test can interleave two writers to play a zombie)."""

    def __init__(self, target: Target, checkpoint_id: str, partition: int):
        from confluent_kafka import Consumer, Producer

        self.target, self.partition = target, partition
        self.id = writer_id(target.query, checkpoint_id, partition)
        self.producer = librdkafka_client(Producer, {
            **target.config, "transactional.id": self.id, "linger.ms": "20", "transaction.timeout.ms": str(TRANSACTION_TIMEOUT_MS)})
        self.markers = librdkafka_client(Consumer, {
            **target.config, "group.id": self.id, "enable.auto.commit": "false", "isolation.level": "read_committed"})
        self.batch_id: int | None = None  # the batch of the open transaction
        self.committed = -1  # the last batch this writer's id committed, as of open() and this producer's commits
        self.marker_sent = False  # whether the open transaction holds its marker yet

    def open(self) -> None:
        """Fence older producers with this id (a zombie driver on the same checkpoint, an earlier
        attempt of the task, another Python worker that held the id) and complete or abort their open
        transaction; then read the marker."""
        from confluent_kafka import TopicPartition

        self.producer.init_transactions(CLIENT_TIMEOUT_S)
        [marker] = committed(self.markers, [TopicPartition(self.target.topic, 0)])
        self.committed = committed_through(marker.offset)

    def begin(self, batch_id: int) -> bool:
        """Begin the batch's transaction; False when the batch was committed before (nothing to write).

        A writer whose id committed a batch before sends the marker first: on a producer kept from an
        earlier batch it is the first request to the broker, so a producer fenced meanwhile fails here,
        before any row. A writer with no marker yet sends it at commit instead: its topic may not exist
        until its first rows make the broker create it (a marker sent first would fail with
        UNKNOWN_TOPIC_OR_PART); its producer was initialised for this batch, and a fence since then
        fails its commit, which aborts the batch, as without kept writers."""
        if batch_id <= self.committed:
            return False
        self.producer.begin_transaction()
        self.batch_id, self.marker_sent = batch_id, False
        if self.committed >= 0:
            self._send_marker()
        return True

    def _send_marker(self) -> None:
        from confluent_kafka import TopicPartition

        marker = TopicPartition(self.target.topic, 0, self.batch_id + 1)
        self.producer.send_offsets_to_transaction([marker], self.markers.consumer_group_metadata(), CLIENT_TIMEOUT_S)
        self.marker_sent = True

    def produce(self, records: Iterable[tuple]) -> None:
        produce_all(self.producer, self.target.topic, records)

    def commit(self) -> None:
        """Commit the rows and the marker together."""
        if not self.marker_sent:
            self._send_marker()
        self.producer.commit_transaction(CLIENT_TIMEOUT_S)
        self.committed, self.batch_id = self.batch_id, None

    def abort(self) -> None:
        if self.batch_id is not None:
            self.batch_id = None
            try:
                self.producer.abort_transaction(CLIENT_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - fenced: the newer writer aborted it already
                log.debug("abort of %s: %s", self.id, exc)

    def close(self) -> None:
        """The marker reader; the producer holds nothing once its transaction ended and goes with the
        object (a fenced producer raises on anything it is asked)."""
        self.markers.close()


class OpenWriters:
    """The writers a Python worker keeps between batches (Spark reuses its Python workers), so that a
    writer's id is initialised and its marker read once per worker rather than once per batch. At
    most ``limit``, the least recently used closed first."""

    def __init__(self, limit: int):
        self.limit = limit
        self.writers: OrderedDict[tuple, PartitionWriter] = OrderedDict()

    @staticmethod
    def _key(target: Target, checkpoint_id: str, partition: int) -> tuple:
        return tuple(sorted(target.config.items())), target.topic, target.query, checkpoint_id, partition

    def begin(self, target: Target, checkpoint_id: str, partition: int, batch_id: int) -> tuple[PartitionWriter, bool]:
        """The partition's writer, taken out until ``keep``, and whether it began the batch's
        transaction (False: the batch was committed before). A kept writer that cannot begin (fenced by
        a worker that took the id since, a broken connection) is closed and a new one opened instead."""
        kept = self.writers.pop(self._key(target, checkpoint_id, partition), None)
        if kept is not None:
            try:
                return kept, kept.begin(batch_id)
            except Exception as exc:  # noqa: BLE001 - a new producer tells what is wrong, if anything
                log.debug("writer %s kept from an earlier batch did not begin: %s", kept.id, exc)
                kept.abort()
                kept.close()
        writer = PartitionWriter(target, checkpoint_id, partition)
        try:
            writer.open()
            return writer, writer.begin(batch_id)
        except Exception:
            writer.abort()
            writer.close()
            raise

    def close(self) -> None:
        while self.writers:
            self.writers.popitem()[1].close()

    def keep(self, writer: PartitionWriter, checkpoint_id: str) -> None:
        """A writer whose batch ended well, for the next batch (one that failed is closed instead: a
        transactional producer in an error state takes nothing more)."""
        self.writers[self._key(writer.target, checkpoint_id, writer.partition)] = writer
        while len(self.writers) > self.limit:
            self.writers.popitem(last=False)[1].close()


# Each an idle librdkafka producer and consumer (their threads, a connection to each broker they used).
OPEN_WRITERS_PER_WORKER = 16
_open_writers = OpenWriters(OPEN_WRITERS_PER_WORKER)


def committed(consumer, partitions: list) -> list:
    """A group's committed offsets (``consumer.committed``), asking again while its coordinator moves."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while True:
        try:
            return consumer.committed(partitions, timeout=max(deadline - time.monotonic(), MARKER_RETRY_S))
        except KafkaException as exc:
            if not read_marker_again(exc.args[0].name(), deadline - time.monotonic()):
                raise
            time.sleep(MARKER_RETRY_S)


def produce_all(producer, topic: str, records: Iterable[tuple]) -> int:
    """Hand (key, value[, headers]) tuples, as str/bytes/None, to a confluent_kafka producer; how many."""
    count = 0
    for record in records:
        key, value, *rest = record
        key, value = _bytes(key), _bytes(value)
        headers = [(name, _bytes(data)) for name, data in rest[0]] if rest and rest[0] else None
        while True:
            try:
                producer.produce(topic, value=value, key=key, headers=headers)
                break
            except BufferError:  # the local queue is full: let deliveries drain
                producer.poll(0.1)
        producer.poll(0)
        count += 1
    return count


def _bytes(data):
    """Spark gives binary columns as bytearray; the producer takes str or bytes."""
    return bytes(data) if isinstance(data, bytearray) else data


def aborted_writers(error: BaseException) -> int:
    """How many writers' transactions a failed batch aborted, from the error Spark raised (the
    executors' TransactionAborted messages travel in it). Pure."""
    return len(set(re.findall(r"transaction (streamapp\.\S+) aborted", str(error))))


def write_partition(target: Target, checkpoint_id: str, batch_id: int, partition: int, rows,
                    writers: OpenWriters | None = None) -> list[Written]:
    """Runs on an executor: the partition's rows in one transaction, or nothing when committed before;
    ``writers`` those of this Python worker (a test plays two workers)."""
    writers = _open_writers if writers is None else writers
    records = [tuple(row) for row in rows]
    if not records:
        return []
    writer = None
    try:
        writer, begun = writers.begin(target, checkpoint_id, partition, batch_id)
        if begun:
            writer.produce(records)
            writer.commit()
    except Exception as exc:
        if writer is not None:
            writer.abort()
            writer.close()
        raise TransactionAborted(f"query {target.query} batch {batch_id} partition {partition}: "
                                 f"transaction {writer_id(target.query, checkpoint_id, partition)} aborted: {exc}") from exc
    writers.keep(writer, checkpoint_id)
    return [Written(partition, len(records), skipped=not begun)]


def batch_writer(target: Target, on_written: Callable[[str, int, int, int], None] = lambda *_: None,
                 on_transactions: Callable[[str, int, int], None] = lambda *_: None):
    """foreachBatch function over a frame of (key, value[, headers]); ``on_written(query, batch id,
    rows, partitions skipped)``, ``on_transactions(query, committed, aborted)``."""
    def write(df, batch_id: int) -> None:
        checkpoint_id = spark_compat.query_id(df)
        if not checkpoint_id:  # without it a new checkpoint's writers would be an old one's
            raise RuntimeError(f"query {target.query}: Spark did not give the query id to foreachBatch")
        try:
            written = replay.by_content_or_state(df, ["key", "value"]).rdd.mapPartitionsWithIndex(
                lambda partition, rows: write_partition(target, checkpoint_id, batch_id, partition, rows)).collect()
        except Exception as exc:
            on_transactions(target.query, 0, aborted_writers(exc))  # the batch fails; a restart writes it again
            raise
        rows, committed, skipped, line = batch_summary(target.query, batch_id, written)
        if line:
            log.warning(line)
        on_transactions(target.query, committed, 0)
        on_written(target.query, batch_id, rows, len(skipped))

    return write
