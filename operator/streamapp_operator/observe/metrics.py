"""The driver's progress from its metrics endpoint; unreachable means "no data", never an error.

Reconciles never wait on a driver: ``ProgressCache`` holds the last progress read from each app's
driver, and ``ProgressCache.scrape`` reads it again in the background (asyncio, a bounded number at a
time, each bounded by a timeout). A driver that never answers (a kwok pod, a hung JVM) costs one
socket for ``timeout`` seconds, not a reconcile thread. The reads share one aiohttp session (its
connections kept open where the driver allows it) for the cache's lifetime; ``close`` ends it.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from streamapp_api import contract

from .. import names
from ..decide.world import KeptSnapshot, Progress, SnapshotFailed, SnapshotTaken

# A whole read of a driver's /metrics. Reads run in the background (CONCURRENCY at once), so a slow
# driver costs a slot, not a reconcile; the timeout leaves room for a driver on loaded cores, which a
# second does not (it was read as having no data).
TIMEOUT = 3.0
CONCURRENCY = 32
MAX_BYTES = 4 << 20


def parse(text: str) -> Progress:
    lag_by_query: dict[str, int] = {}
    batch_by_query: dict[str, float] = {}
    shuffle_partitions: int | None = None
    executors: int | None = None
    executors_target: int | None = None
    counters = {f"{contract.METRIC_KAFKA_TRANSACTIONS}_total": {}, f"{contract.METRIC_KAFKA_TRANSACTIONS_ABORTED}_total": {},
                f"{contract.METRIC_PARTITIONS_SKIPPED}_total": {}, f"{contract.METRIC_BATCHES}_total": {}}
    per_query: dict[str, dict[str, float]] = {contract.METRIC_INPUT_RATE: {}, contract.METRIC_PROCESSED_RATE: {},
                                              contract.METRIC_BATCH_DURATION: {}}
    snapshot_samples = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            query = sample.labels.get("query", "")
            if sample.name in _SNAPSHOT_METRICS:
                snapshot_samples.append(sample)
            elif sample.name == contract.METRIC_SOURCE_LAG:
                lag_by_query[query] = lag_by_query.get(query, 0) + int(sample.value)
            elif sample.name == contract.METRIC_LAST_BATCH and sample.value > 0:
                batch_by_query[query] = max(batch_by_query.get(query, 0.0), sample.value)
            elif sample.name == contract.METRIC_SHUFFLE_PARTITIONS and sample.value > 0:
                shuffle_partitions = int(sample.value)
            elif sample.name in per_query:
                per_query[sample.name][query] = sample.value
            elif sample.name == contract.METRIC_EXECUTORS:
                executors = int(sample.value)
            elif sample.name == contract.METRIC_EXECUTORS_TARGET:
                executors_target = int(sample.value)
            elif sample.name in counters:
                counters[sample.name][query] = counters[sample.name].get(query, 0) + int(sample.value)

    def moment(seconds: float | None) -> datetime | None:
        return datetime.fromtimestamp(seconds, timezone.utc) if seconds else None

    return Progress(
        lag=sum(lag_by_query.values()) if lag_by_query else None,
        last_batch=moment(max(batch_by_query.values(), default=None)),
        sink_lag=tuple(sorted(lag_by_query.items())),
        sink_last_batch=tuple(sorted((q, moment(t)) for q, t in batch_by_query.items())),
        shuffle_partitions=shuffle_partitions,
        sink_transactions=tuple(sorted(counters[f"{contract.METRIC_KAFKA_TRANSACTIONS}_total"].items())),
        sink_aborted=tuple(sorted(counters[f"{contract.METRIC_KAFKA_TRANSACTIONS_ABORTED}_total"].items())),
        sink_skipped=tuple(sorted(counters[f"{contract.METRIC_PARTITIONS_SKIPPED}_total"].items())),
        input_rate=tuple(sorted(per_query[contract.METRIC_INPUT_RATE].items())),
        processed_rate=tuple(sorted(per_query[contract.METRIC_PROCESSED_RATE].items())),
        batch_seconds=tuple(sorted(per_query[contract.METRIC_BATCH_DURATION].items())),
        batches=tuple(sorted(counters[f"{contract.METRIC_BATCHES}_total"].items())),
        executors=executors,
        executors_target=executors_target,
        snapshot=_snapshot_taken(snapshot_samples),
        snapshot_failure=_snapshot_failed(snapshot_samples),
        snapshots_kept=_snapshots_kept(snapshot_samples),
    )


_SNAPSHOT_METRICS = (contract.METRIC_SNAPSHOT_TIME, contract.METRIC_SNAPSHOT_BYTES, contract.METRIC_SNAPSHOT_BATCH,
                     contract.METRIC_SNAPSHOT_FAILED, contract.METRIC_SNAPSHOTS_KEPT, contract.METRIC_SNAPSHOT_KEPT,
                     contract.METRIC_SNAPSHOT_KEPT_BYTES, contract.METRIC_SNAPSHOT_KEPT_BATCH)
KEPT_LIMIT = 1000  # snapshots read from one driver's metrics (status lists fewer)


def _moment(seconds: float) -> datetime | None:
    try:
        return datetime.fromtimestamp(seconds, timezone.utc) if seconds > 0 else None
    except (OverflowError, OSError, ValueError):
        return None


def _count(value: float) -> int | None:
    return int(value) if math.isfinite(value) and value >= 0 else None


def _newest(samples: list, name: str) -> tuple[datetime, Any] | None:
    """The sample of metric ``name`` with the latest time as its value, and that time."""
    timed = [(moment, s) for s in samples if s.name == name and (moment := _moment(s.value)) is not None]
    return max(timed, key=lambda pair: pair[0]) if timed else None


def _snapshot_taken(samples: list) -> SnapshotTaken | None:
    """The last snapshot the driver reports: the newest time, with that snapshot's size and batches."""
    found = _newest(samples, contract.METRIC_SNAPSHOT_TIME)
    if found is None:
        return None
    taken_at, newest = found
    name = newest.labels.get("snapshot", "")
    mine = [s for s in samples if s.labels.get("snapshot", "") == name]
    size = next((_count(s.value) for s in mine if s.name == contract.METRIC_SNAPSHOT_BYTES), None)
    batches = sorted((s.labels.get("query", ""), batch) for s in mine
                     if s.name == contract.METRIC_SNAPSHOT_BATCH and (batch := _count(s.value)) is not None)
    return SnapshotTaken(name, taken_at, newest.labels.get("location"), size, tuple(batches))


def _snapshots_kept(samples: list) -> tuple[KeptSnapshot, ...] | None:
    """The snapshots the driver reports kept; None when it has not listed them (or does not say)."""
    count = next((s.value for s in samples if s.name == contract.METRIC_SNAPSHOTS_KEPT), None)
    if count is None or not math.isfinite(count) or count < 0:
        return None
    by_name: dict[str, dict[str, Any]] = {}
    for s in samples:
        name = s.labels.get("snapshot", "")
        if s.name == contract.METRIC_SNAPSHOT_KEPT and name and len(by_name) < KEPT_LIMIT:
            by_name[name] = {"taken_at": _moment(s.value), "batches": []}
    for s in samples:
        found = by_name.get(s.labels.get("snapshot", ""))
        if found is None:
            continue
        if s.name == contract.METRIC_SNAPSHOT_KEPT_BYTES:
            found["size_bytes"] = _count(s.value)
        elif s.name == contract.METRIC_SNAPSHOT_KEPT_BATCH and (batch := _count(s.value)) is not None:
            found["batches"].append((s.labels.get("query", ""), batch))
    return tuple(KeptSnapshot(name, found["taken_at"], found.get("size_bytes"), tuple(sorted(found["batches"])))
                 for name, found in sorted(by_name.items()))


def _snapshot_failed(samples: list) -> SnapshotFailed | None:
    found = _newest(samples, contract.METRIC_SNAPSHOT_FAILED)
    if found is None:
        return None
    failed_at, newest = found
    return SnapshotFailed(newest.labels.get("snapshot", ""), failed_at, newest.labels.get("reason", ""))


def session(concurrency: int = CONCURRENCY) -> aiohttp.ClientSession:
    """A session for metric reads, on the running event loop. No proxy (``trust_env`` off): pod IPs
    never go through one."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency), trust_env=False)


async def read_text(http: aiohttp.ClientSession, pod_ip: str, port: int = names.METRICS_PORT,
                    timeout: float = TIMEOUT) -> str | None:
    """The body of ``http://pod_ip:port/metrics``, all of it within ``timeout``; None for anything but
    a 200 with a body of at most MAX_BYTES."""
    host = f"[{pod_ip}]" if ":" in pod_ip else pod_ip  # an IPv6 pod IP
    url = f"http://{host}:{port}{contract.METRICS_PATH}"
    try:
        async with http.get(url, headers={"Accept": "text/plain"}, allow_redirects=False,
                            timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            if response.status != 200:
                return None
            body = bytearray()
            async for chunk in response.content.iter_chunked(65536):
                body += chunk
                if len(body) > MAX_BYTES:
                    return None
            return body.decode("utf-8", "replace")
    except (OSError, asyncio.TimeoutError, aiohttp.ClientError, ValueError):
        return None


async def scrape(http: aiohttp.ClientSession, pod_ip: str, port: int = names.METRICS_PORT,
                 timeout: float = TIMEOUT) -> Progress:
    """One non-blocking read of the driver's metrics; unreadable is "no data"."""
    text = await read_text(http, pod_ip, port, timeout)
    if text is None:
        return Progress()
    try:
        return parse(text)
    except ValueError:
        return Progress()


def observe(pod_ip: str | None, timeout: float = TIMEOUT, port: int = names.METRICS_PORT) -> Progress:
    """One blocking read, from a thread with no event loop (for tools and tests; the operator uses
    ``ProgressCache``)."""
    if not pod_ip:
        return Progress()

    async def once() -> Progress:
        async with session(1) as http:
            text = await read_text(http, pod_ip, port, timeout)
        try:
            return Progress(unanswered=True) if text is None else replace(parse(text), read_at=datetime.now(timezone.utc))
        except ValueError:
            return Progress(unanswered=True)

    return asyncio.run(once())


class ProgressCache:
    """The last progress read from each app's driver, by (namespace, app), for the driver pod it came
    from (a new driver starts with no data). Read from reconcile threads, written on the event loop."""

    def __init__(self, timeout: float = TIMEOUT, concurrency: int = CONCURRENCY, port: int = names.METRICS_PORT):
        self.timeout, self.port, self.concurrency = timeout, port, concurrency
        self._latest: dict[tuple[str, str], tuple[str, Progress, float]] = {}  # key -> (pod uid, progress, read at)
        self._busy: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._slots: asyncio.Semaphore | None = None
        self._http: aiohttp.ClientSession | None = None  # made on the event loop at the first read

    def latest(self, key: tuple[str, str], uid: str | None) -> Progress:
        with self._lock:
            seen = self._latest.get(key)
        if not seen or seen[0] != uid:
            return Progress()  # not read yet: a driver just started, or a reading still to come
        if seen[1] == Progress():
            return Progress(unanswered=True)
        # when it was read, on the wall clock (stored on the monotonic one, which ignores clock steps)
        return replace(seen[1], read_at=datetime.now(timezone.utc) - timedelta(seconds=time.monotonic() - seen[2]))

    def due(self, key: tuple[str, str], uid: str | None, every: float) -> bool:
        """Whether the driver ``uid`` should be read again (none in flight, last read ``every`` s ago or more)."""
        with self._lock:
            seen = self._latest.get(key)
            fresh = seen is not None and seen[0] == uid and time.monotonic() - seen[2] < every
            return key not in self._busy and not fresh

    async def scrape(self, key: tuple[str, str], uid: str, pod_ip: str) -> bool:
        """Read the driver once more; True when what status would show from it changed."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.concurrency)
        if self._http is None:
            self._http = session(self.concurrency)
        with self._lock:
            if key in self._busy:
                return False
            self._busy.add(key)
        try:
            async with self._slots:
                progress = await scrape(self._http, pod_ip, self.port, self.timeout)
        finally:
            with self._lock:
                self._busy.discard(key)
        with self._lock:
            before = self._latest.get(key)
            self._latest[key] = (uid, progress, time.monotonic())
        return (before[1] if before and before[0] == uid else Progress()) != progress

    def forget(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._latest.pop(key, None)

    async def close(self) -> None:
        """End the session of the reads (the operator's cleanup)."""
        if self._http is not None:
            await self._http.close()
            self._http = None
