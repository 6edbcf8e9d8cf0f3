"""The dead-letter topic as run.dead_letters writes it: from the driver, with its cursor.

Dead letters are few, so the driver produces them itself. The cursor (how far a source's bad records
are written) is the committed offsets of a consumer group named like the writer; with
``exactly-once`` the writer is a transactional producer with that ``transactional.id``, and the
records and the cursor commit in one transaction (Kafka's consume-transform-produce pattern), so a
crash leaves both or neither. Opening it fences an older producer with the id (a zombie driver on the
same checkpoint) and aborts its open transaction before the cursor is read.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from streamapp_api import contract

from streamapp_runtime.connections import librdkafka_client
from streamapp_runtime.sinks.kafka_transactions import CLIENT_TIMEOUT_S, TRANSACTION_TIMEOUT_MS, committed, produce_all

log = logging.getLogger("streamapp.runtime")
Offsets = dict[tuple[str, int], int]


def writer_name(source: str, owner_query_id: str) -> str:
    """The cursor group (and, with exactly-once, the transactional id) of a source's dead letters:
    the source and the id of the query that counts its bad records (its checkpoint's). Pure."""
    return f"streamapp.{contract.dlq_query(source)}.{owner_query_id}"


class DeadLetterSink:
    def __init__(self, config: dict[str, str], topic: str, name: str, exactly_once: bool):
        self.config, self.topic, self.name, self.exactly_once = config, topic, name, exactly_once
        self.producer = self.consumer = None

    def _open(self):
        from confluent_kafka import Consumer, Producer

        if self.producer is None:
            settings = {**self.config, "linger.ms": "20"}
            if self.exactly_once:
                settings.update({"transactional.id": self.name, "transaction.timeout.ms": str(TRANSACTION_TIMEOUT_MS)})
            else:
                settings["enable.idempotence"] = "true"
            self.consumer = librdkafka_client(Consumer, {
                **self.config, "group.id": self.name, "enable.auto.commit": "false", "isolation.level": "read_committed"})
            self.producer = librdkafka_client(Producer, settings)
            if self.exactly_once:
                self.producer.init_transactions(CLIENT_TIMEOUT_S)
        return self.producer

    def cursor(self, partitions: list[tuple[str, int]]) -> Offsets:
        """The offsets committed for ``partitions`` (those never committed are left out)."""
        from confluent_kafka import TopicPartition

        self._open()
        found = committed(self.consumer, [TopicPartition(t, p) for t, p in partitions])
        return {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}

    def write(self, records: Iterable[tuple], cursor: Offsets) -> int:
        """Produce (key, value, headers) records and commit the cursor after them; how many."""
        producer = self._open()
        failed: list[str] = []

        def delivered(err, msg) -> None:
            if err is not None:
                failed.append(str(err))

        if self.exactly_once:
            producer.begin_transaction()
            try:
                count = produce_all(producer, self.topic, records)
                producer.send_offsets_to_transaction(self._partitions(cursor), self.consumer.consumer_group_metadata(),
                                                     CLIENT_TIMEOUT_S)
                producer.commit_transaction(CLIENT_TIMEOUT_S)
            except Exception:
                self._abort()
                raise
            return count
        count = produce_all(_Reporting(producer, delivered), self.topic, records)
        if producer.flush(CLIENT_TIMEOUT_S) or failed:
            raise RuntimeError(f"{len(failed) or 'some'} dead letter(s) not acknowledged by Kafka: {failed[:3]}")
        self.commit(cursor)
        return count

    def commit(self, cursor: Offsets) -> None:
        """The cursor alone (it moved over clean batches: nothing to write)."""
        self._open()
        self.consumer.commit(offsets=self._partitions(cursor), asynchronous=False)

    @staticmethod
    def _partitions(cursor: Offsets) -> list:
        from confluent_kafka import TopicPartition

        return [TopicPartition(t, p, o) for (t, p), o in sorted(cursor.items()) if o >= 0]

    def _abort(self) -> None:
        try:
            self.producer.abort_transaction(CLIENT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - fenced or broken: reset() starts a new producer
            log.debug("abort of %s: %s", self.name, exc)

    def reset(self) -> None:
        """After a failure: the next use starts new clients (a transactional producer in an error
        state takes nothing more)."""
        self.close()

    def close(self) -> None:
        if self.producer is not None:
            self.producer.flush(5)
        if self.consumer is not None:
            self.consumer.close()
        self.producer = self.consumer = None


class _Reporting:
    """A producer whose every produce() reports delivery to ``on_delivery``."""

    def __init__(self, producer, on_delivery):
        self.producer, self.on_delivery = producer, on_delivery

    def produce(self, topic, **kwargs):
        return self.producer.produce(topic, on_delivery=self.on_delivery, **kwargs)

    def poll(self, timeout):
        return self.producer.poll(timeout)
