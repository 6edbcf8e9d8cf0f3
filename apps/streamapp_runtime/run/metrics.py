"""Prometheus metrics from query progress. ``Metrics.observe(progress)`` takes the progress as a dict
(``json.loads(progress.json)``), so it is testable without Spark; ``listener.py`` feeds it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge

from streamapp_api import contract

A, Q = "app", "query"


def parse_time(text: str | None) -> float | None:
    """'2024-01-01T00:00:10.000Z' -> epoch seconds. Pure."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def offsets_behind(end: str | dict | None, latest: str | dict | None) -> dict[tuple[str, int], int]:
    """Per (topic, partition): latest offset minus the offset the batch read up to. Pure."""
    def load(value):
        if value is None:
            return {}
        return json.loads(value) if isinstance(value, str) else value

    end_map, latest_map = load(end), load(latest)
    lag = {}
    for topic, partitions in latest_map.items():
        for partition, offset in partitions.items():
            read = end_map.get(topic, {}).get(partition)
            lag[(topic, int(partition))] = max(0, int(offset) - int(read if read is not None else 0))
    return lag


def batch_lag(p: dict) -> int | None:
    """Records behind the newest offsets over every source of a batch's progress; None when a source
    does not know its newest offsets (the first batch after a restart replays a planned batch without
    asking Kafka), rather than a false 0. Pure."""
    sources = p.get("sources") or []
    if any(s.get("latestOffset") is None for s in sources):
        return None
    return sum(sum(offsets_behind(s.get("endOffset"), s.get("latestOffset")).values()) for s in sources)


class Metrics:
    def __init__(self, app: str, topic_sources: dict[str, str], dlq_queries: dict[str, str]):
        self.app = app
        self.topic_sources = topic_sources
        self.dlq_queries = dlq_queries  # query name -> source name
        self.registry = r = CollectorRegistry()
        self.input_rate = Gauge(contract.METRIC_INPUT_RATE, "Rows read per second in the last batch", [A, Q], registry=r)
        self.processed_rate = Gauge(contract.METRIC_PROCESSED_RATE, "Rows processed per second in the last batch",
                                    [A, Q], registry=r)
        self.input_rows = Counter("streamapp_input_rows", "Rows read", [A, Q], registry=r)
        self.output_rows = Counter("streamapp_output_rows", "Rows written by the sink", [A, Q], registry=r)
        self.batch_duration = Gauge(contract.METRIC_BATCH_DURATION, "Duration of the last batch", [A, Q], registry=r)
        self.batches = Counter(contract.METRIC_BATCHES, "Batches since the driver started", [A, Q], registry=r)
        self.executors = Gauge(contract.METRIC_EXECUTORS, "Executors registered with the driver (read when scraped)",
                               [A], registry=r)
        self.executors_target = Gauge(contract.METRIC_EXECUTORS_TARGET,
                                      "Executors the driver has asked Spark for: its start count, then each count "
                                      "the operator set for a rescale in place", [A], registry=r)
        self.group_commit_failures = Counter(
            contract.METRIC_GROUP_COMMIT_FAILURES,
            "Failures to commit a batch's offsets to the query's consumer group (the query goes on)", [A, Q], registry=r)
        self.batch_id = Gauge("streamapp_batch_id", "Id of the last committed batch", [A, Q], registry=r)
        self.lag = Gauge(contract.METRIC_SOURCE_LAG, "Offsets behind the latest offset, per source partition",
                         [A, Q, "source", "topic", "partition"], registry=r)
        self.state_rows = Gauge("streamapp_state_rows", "Rows in the state stores", [A, Q], registry=r)
        self.state_bytes = Gauge("streamapp_state_bytes", "Memory used by the state stores", [A, Q], registry=r)
        self.watermark = Gauge("streamapp_watermark_timestamp_seconds", "Event-time watermark", [A, Q], registry=r)
        self.late = Counter("streamapp_late_rows_dropped", "Rows dropped as later than the watermark", [A, Q], registry=r)
        self.dead = Counter("streamapp_dead_letter_records", "Records sent to the dead-letter topic", [A, "source"], registry=r)
        self.dead_letter_failures = Counter(
            "streamapp_dead_letter_failures", "Read-backs of a source's bad records that failed (tried again)",
            [A, "source"], registry=r)
        self.last_batch = Gauge(contract.METRIC_LAST_BATCH, "When the last batch committed", [A, Q], registry=r)
        self.active = Gauge("streamapp_query_active", "1 while the query runs", [A, Q], registry=r)
        self.restarts = Counter("streamapp_query_restarts", "Restarts of a query after it lost Kafka", [A, Q], registry=r)
        self.skipped = Counter(contract.METRIC_PARTITIONS_SKIPPED,
                               "Batch partitions a sink did not write because this checkpoint wrote them before (replays)",
                               [A, Q], registry=r)
        self.committed_transactions = Counter(
            contract.METRIC_KAFKA_TRANSACTIONS, "Kafka transactions an exactly-once sink committed, one per batch partition",
            [A, Q], registry=r)
        self.aborted_transactions = Counter(
            contract.METRIC_KAFKA_TRANSACTIONS_ABORTED,
            "Kafka transactions an exactly-once sink aborted after an error (the batch is written again)", [A, Q], registry=r)
        self.shuffle_partitions = Gauge(contract.METRIC_SHUFFLE_PARTITIONS,
                                        "Shuffle (and state) partitions of the app's checkpoint, fixed at its first run",
                                        [A], registry=r)
        self.snapshot_time = Gauge(contract.METRIC_SNAPSHOT_TIME, "When the last snapshot completed, and where it is",
                                   [A, "snapshot", "location"], registry=r)
        self.snapshot_bytes = Gauge(contract.METRIC_SNAPSHOT_BYTES, "Size of the last snapshot", [A, "snapshot"], registry=r)
        self.snapshot_batch = Gauge(contract.METRIC_SNAPSHOT_BATCH,
                                    "The committed batch each query holds in the last snapshot (-1: none yet)",
                                    [A, "snapshot", Q], registry=r)
        self.snapshot_failed = Gauge(contract.METRIC_SNAPSHOT_FAILED, "When the last snapshot that failed was tried, "
                                     "and why", [A, "snapshot", "reason"], registry=r)
        self._failed_snapshot: tuple[str, str] | None = None  # its (snapshot, reason) labels
        self.kept_count = Gauge(contract.METRIC_SNAPSHOTS_KEPT, "How many snapshots are kept (-1: not listed yet)",
                                [A], registry=r)
        self.kept_count.labels(self.app).set(-1)
        self.kept_time = Gauge(contract.METRIC_SNAPSHOT_KEPT, "When each snapshot kept completed (0: not recorded)",
                               [A, "snapshot"], registry=r)
        self.kept_bytes = Gauge(contract.METRIC_SNAPSHOT_KEPT_BYTES, "Size of each snapshot kept (-1: not recorded)",
                                [A, "snapshot"], registry=r)
        self.kept_batch = Gauge(contract.METRIC_SNAPSHOT_KEPT_BATCH,
                                "The committed batch each query holds in each snapshot kept (-1: none)",
                                [A, "snapshot", Q], registry=r)
        self._lock = threading.Lock()
        self._user_code_counted: dict[str, int] = {}  # step or udf path -> its dead letters counted so far
        self.last_seen: dict[str, float] = {}  # query -> monotonic time of its last sign of life
        self.totals: dict[str, dict[str, int]] = {}  # query -> running totals, for tests and the demo
        # query -> (batch id, rows, partitions skipped) of the last batch a foreachBatch sink wrote;
        # Spark's progress has no output count for those sinks
        self.sink_batches: dict[str, tuple[int, int, int]] = {}

    def started(self, query: str) -> None:
        with self._lock:
            self.active.labels(self.app, query).set(1)
            self.last_seen[query] = time.monotonic()

    def terminated(self, query: str) -> None:
        with self._lock:
            self.active.labels(self.app, query).set(0)
            self.last_seen.pop(query, None)

    def count_executors(self, count) -> None:
        """``count()``: the executors registered with the driver, asked only when the metrics are read."""
        self.executors.labels(self.app).set_function(count)

    def group_commit_failed(self, query: str) -> None:
        with self._lock:
            self.group_commit_failures.labels(self.app, query).inc()

    def restarted(self, query: str) -> None:
        with self._lock:
            self.restarts.labels(self.app, query).inc()

    def written(self, query: str, batch_id: int, rows: int, skipped: int) -> None:
        """What a foreachBatch sink wrote in one batch (Spark reports no output rows for it)."""
        with self._lock:
            totals = self._totals(query)
            self.output_rows.labels(self.app, query).inc(rows)
            totals["output"] += rows
            if skipped:
                self.skipped.labels(self.app, query).inc(skipped)
                totals["skipped"] += skipped
            if query in self.dlq_queries and rows:
                self.dead.labels(self.app, self.dlq_queries[query]).inc(rows)
                totals["dead"] += rows
            self.sink_batches[query] = (batch_id, rows, skipped)

    def snapshot_taken(self, name: str, location: str, taken_at: float, size: int, batches: dict[str, int | None]) -> None:
        """The last snapshot: only its series, so that the operator reads one; a failure of that name is gone."""
        with self._lock:
            for gauge in (self.snapshot_time, self.snapshot_bytes, self.snapshot_batch):
                gauge.clear()
            self.snapshot_time.labels(self.app, name, location).set(taken_at)
            self.snapshot_bytes.labels(self.app, name).set(size)
            for query, batch in batches.items():
                self.snapshot_batch.labels(self.app, name, query).set(-1 if batch is None else batch)
            if self._failed_snapshot is not None and self._failed_snapshot[0] == name:
                self.snapshot_failed.clear()
                self._failed_snapshot = None

    def snapshots_kept(self, kept: Mapping[str, tuple[float | None, int | None, Mapping[str, int | None]]]) -> None:
        """Every snapshot kept, by name: (when it completed, its bytes, each query's batch); only those."""
        with self._lock:
            for gauge in (self.kept_time, self.kept_bytes, self.kept_batch):
                gauge.clear()
            self.kept_count.labels(self.app).set(len(kept))
            for name, (taken_at, size, batches) in kept.items():
                self.kept_time.labels(self.app, name).set(taken_at or 0)
                self.kept_bytes.labels(self.app, name).set(-1 if size is None else size)
                for query, batch in batches.items():
                    self.kept_batch.labels(self.app, name, query).set(-1 if batch is None else batch)

    def snapshot_failed_at(self, name: str, reason: str, at: float) -> None:
        """The last snapshot that failed (one series), ``reason`` its error's first line."""
        with self._lock:
            self.snapshot_failed.clear()
            self.snapshot_failed.labels(self.app, name, reason).set(at)
            self._failed_snapshot = (name, reason)

    def dead_letter_sources(self, sources: list[str]) -> None:
        """Their dead-letter counts read 0 until a bad record comes (a series from the start)."""
        for source in sources:
            self.dead.labels(self.app, source)
            self.dead_letter_failures.labels(self.app, source)

    def dead_lettered(self, source: str, rows: int) -> None:
        """Bad records of ``source`` the dead-letter writer (run.dead_letters) wrote."""
        with self._lock:
            self.dead.labels(self.app, source).inc(rows)

    def dead_lettered_by_user_code(self, totals: dict[str, int]) -> None:
        """Records user code sent to the dead-letter topic in this driver so far, per python step or udf
        (its path in the spec, the series' source): the counter goes up by what is new."""
        with self._lock:
            for where, total in totals.items():
                new = total - self._user_code_counted.get(where, 0)
                if new > 0:
                    self.dead.labels(self.app, where).inc(new)
                    self._user_code_counted[where] = total

    def dead_letter_failed(self, source: str) -> None:
        with self._lock:
            self.dead_letter_failures.labels(self.app, source).inc()

    def transactions(self, query: str, committed: int, aborted: int) -> None:
        """What an exactly-once Kafka sink's writers did in one batch."""
        with self._lock:
            totals = self._totals(query)
            if committed:
                self.committed_transactions.labels(self.app, query).inc(committed)
                totals["transactions"] += committed
            if aborted:
                self.aborted_transactions.labels(self.app, query).inc(aborted)
                totals["aborted"] += aborted

    def _totals(self, query: str) -> dict[str, int]:
        return self.totals.setdefault(query, {"input": 0, "output": 0, "late": 0, "dead": 0, "batches": 0, "skipped": 0,
                                              "transactions": 0, "aborted": 0})

    def idle(self, query: str) -> None:
        with self._lock:
            self.last_seen[query] = time.monotonic()

    def observe(self, p: dict) -> None:
        query = p.get("name") or p.get("id")
        labels = (self.app, query)
        with self._lock:
            self.last_seen[query] = time.monotonic()
            totals = self._totals(query)
            rows = int(p.get("numInputRows") or 0)
            self.input_rows.labels(*labels).inc(rows)
            self.input_rate.labels(*labels).set(float(p.get("inputRowsPerSecond") or 0))
            self.processed_rate.labels(*labels).set(float(p.get("processedRowsPerSecond") or 0))
            self.batch_duration.labels(*labels).set((p.get("batchDuration") or 0) / 1000)
            self.batch_id.labels(*labels).set(p.get("batchId", -1))
            self.batches.labels(*labels).inc()
            self.last_batch.labels(*labels).set(parse_time(p.get("timestamp")) or time.time())
            out = int((p.get("sink") or {}).get("numOutputRows", -1))
            if out > 0:
                self.output_rows.labels(*labels).inc(out)
                totals["output"] += out
            if query in self.dlq_queries and out > 0:
                self.dead.labels(self.app, self.dlq_queries[query]).inc(out)
                totals["dead"] += out
            for source in p.get("sources") or []:
                for (topic, partition), behind in offsets_behind(source.get("endOffset"), source.get("latestOffset")).items():
                    name = self.topic_sources.get(topic, topic)
                    self.lag.labels(self.app, query, name, topic, str(partition)).set(behind)
            operators = p.get("stateOperators") or []
            self.state_rows.labels(*labels).set(sum(int(o.get("numRowsTotal") or 0) for o in operators))
            self.state_bytes.labels(*labels).set(sum(int(o.get("memoryUsedBytes") or 0) for o in operators))
            late = sum(int(o.get("numRowsDroppedByWatermark") or 0) for o in operators)
            if late:
                self.late.labels(*labels).inc(late)
            watermark = parse_time((p.get("eventTime") or {}).get("watermark"))
            if watermark is not None:
                self.watermark.labels(*labels).set(watermark)
            totals["input"] += rows
            totals["late"] += late
            totals["batches"] += 1

    def healthy(self, queries: list[str], stale_after: float) -> tuple[bool, str]:
        """True while every query is active and showed life within ``stale_after`` seconds."""
        now = time.monotonic()
        with self._lock:
            if not queries:
                return False, "no query is running"
            for query in queries:
                seen = self.last_seen.get(query)
                if seen is None:
                    return False, f"query {query} is not active"
                if now - seen > stale_after:
                    return False, f"query {query} made no progress for {now - seen:.0f}s"
        return True, "ok"


def progress_line(p: dict, lag: int | None, sink_batch: tuple[int, int, int] | None = None) -> str:
    """One line per batch: rows in, rows out, lag, duration, watermark. ``sink_batch`` is what a
    foreachBatch sink reported, (batch id, rows, partitions skipped). Pure."""
    out = (p.get("sink") or {}).get("numOutputRows", -1)
    parts = [f"[{p.get('name')}] batch {p.get('batchId')}: in {p.get('numInputRows', 0)} rows "
             f"({float(p.get('processedRowsPerSecond') or 0):.0f}/s)"]
    if sink_batch is not None and sink_batch[0] == p.get("batchId"):
        _, rows, skipped = sink_batch
        parts.append(f"out {rows} rows" + (f" ({skipped} partition(s) skipped as already written)" if skipped else ""))
    else:
        parts.append(f"out {out} rows" if out is not None and int(out) >= 0 else "out -")
    if lag is not None:
        parts.append(f"lag {lag}")
    parts.append(f"{(p.get('batchDuration') or 0) / 1000:.1f}s")
    watermark = (p.get("eventTime") or {}).get("watermark")
    if watermark and not watermark.startswith("1970"):
        parts.append(f"watermark {watermark}")
    late = sum(int(o.get("numRowsDroppedByWatermark") or 0) for o in p.get("stateOperators") or [])
    if late:
        parts.append(f"late dropped {late}")
    return ", ".join(parts)
