"""The app's lag, visible to the Kafka ecosystem: after each batch, the offsets it processed are
committed to a consumer group named after the app and the query (contract.consumer_group).

Spark reads Kafka with its own offsets in the checkpoint and never commits to a group, so
kafka-consumer-groups, KEDA's Kafka scaler and lag exporters see nothing. The group is written only
for them: the checkpoint stays the one record of what was processed. The commits run on a thread of
their own, one per batch at most (a query's newest offsets replace the ones not yet committed), and a
failure to commit (a broker away, an ACL that forbids the group) is counted in a metric and logged,
never fails the query.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable

log = logging.getLogger("streamapp.runtime")
COMMIT_TIMEOUT = 10.0
RETRY, RETRY_MAX = 0.5, 30.0  # seconds before a failed commit is tried again, doubling

Offsets = dict[tuple[str, int], int]  # (topic, partition) -> the next offset to read


def offsets_of(value) -> Offsets:
    """The offsets of one of Spark's Kafka offset JSONs (``{"topic": {"0": 42}}``, as text or parsed):
    progress's start and end offsets, the checkpoint's offset files. Anything else reads as none. Pure."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    if not isinstance(value, dict):
        return {}
    try:
        return {(topic, int(partition)): int(offset) for topic, partitions in value.items()
                if isinstance(partitions, dict) for partition, offset in partitions.items()}
    except (ValueError, TypeError):
        return {}


def batch_end_offsets(progress: dict) -> Offsets:
    """The offsets a batch read up to (exclusive), over its Kafka sources: what a consumer that had
    processed the batch would commit. Pure."""
    offsets: Offsets = {}
    for source in progress.get("sources") or []:
        offsets.update((tp, o) for tp, o in offsets_of(source.get("endOffset")).items() if o >= 0)
    return offsets


class GroupCommitter:
    """Commits each query's processed offsets to its consumer group, on a thread of its own.

    ``commit(group, offsets)`` does one commit and raises on failure; ``failed(query)`` counts one.
    """

    def __init__(self, group_of: Callable[[str], str], commit: Callable[[str, Offsets], None],
                 failed: Callable[[str], None]):
        self.group_of, self._commit, self._failed = group_of, commit, failed
        self._pending: dict[str, Offsets] = {}
        self._busy = False
        self._closed = False
        self._told: set[str] = set()  # queries whose failure was logged as a warning already
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True, name="consumer-group-commits")
        self._thread.start()

    def batch_done(self, query: str, progress: dict) -> None:
        offsets = batch_end_offsets(progress)
        if not offsets:
            return
        with self._cond:
            self._pending[query] = {**self._pending.get(query, {}), **offsets}
            self._cond.notify()

    def flush(self, timeout: float = COMMIT_TIMEOUT) -> bool:
        """Wait until every offset handed over so far is committed (or failed); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)

    def close(self, timeout: float = COMMIT_TIMEOUT) -> None:
        """Commit what is pending (for ``timeout`` at most), then stop."""
        self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _run(self) -> None:
        failures = 0
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._closed)
                if self._closed:
                    return
                work, self._pending, self._busy = self._pending, {}, True
            failed = {}
            try:
                for query, offsets in work.items():
                    if not self._commit_one(query, offsets):
                        failed[query] = offsets
            finally:
                with self._cond:
                    for query, offsets in failed.items():  # tried again, unless newer offsets came meanwhile
                        self._pending[query] = {**offsets, **self._pending.get(query, {})}
                    self._busy = False
                    self._cond.notify_all()
            # a coordinator that moves or is still loading answers for a moment with an error: try again soon
            failures = failures + 1 if failed else 0
            if failed:
                with self._cond:
                    self._cond.wait_for(lambda: self._closed, min(RETRY * 2 ** (failures - 1), RETRY_MAX))

    def _commit_one(self, query: str, offsets: Offsets) -> bool:
        group = self.group_of(query)
        try:
            self._commit(group, offsets)
            self._told.discard(query)
            return True
        except Exception as exc:  # noqa: BLE001 - the group is for onlookers: the query goes on
            self._failed(query)
            level = logging.DEBUG if query in self._told else logging.WARNING
            log.log(level, "query %s: could not commit its offsets to consumer group %s (counted in "
                    "streamapp_consumer_group_commit_failures_total; trying again, the query goes on): %s",
                    query, group, exc)
            self._told.add(query)
            return False


def admin_commit(admin, timeout: float = COMMIT_TIMEOUT) -> Callable[[str, Offsets], None]:
    """One commit through a confluent_kafka AdminClient (the group has no members: nothing else
    consumes with it, so its offsets can be set directly)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    def commit(group: str, offsets: Offsets) -> None:
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])
        result = admin.alter_consumer_group_offsets([request], request_timeout=timeout)[group].result(timeout=timeout)
        errors = [f"{tp.topic}[{tp.partition}]: {tp.error}" for tp in result.topic_partitions if tp.error]
        if errors:
            raise RuntimeError("; ".join(errors))

    return commit
