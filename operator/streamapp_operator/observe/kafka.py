"""Partition counts of an app's input topics, read with the Kafka AdminClient (bounded by timeouts).

``PartitionCache`` is what the operator uses: one AdminClient per cluster (bootstrap servers and
client options), its topic metadata kept for ``max_age`` seconds (the resync interval), so a
thousand apps on one cluster cost one metadata request per interval rather than one client each. A
topic an app names that the cached metadata lacks is looked up again at once (it may just have been
created), at most once per ``min_age``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from streamapp_api import StreamApp, contract

from ..decide.world import Kafka

TIMEOUT = 5.0
IDLE = 600.0  # a cluster no app has asked about for this long loses its client


def client_conf(bootstrap: str, options: dict[str, str] | None, timeout: float) -> dict:
    conf = {"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000),
            "socket.connection.setup.timeout.ms": int(timeout * 1000), "log_level": 3}
    conf.update(contract.admin_client_options(options or {}))
    return conf


def _counts(admin: AdminClient, timeout: float) -> dict[str, int]:
    metadata = admin.list_topics(timeout=timeout)
    return {name: len(topic.partitions) for name, topic in metadata.topics.items() if topic.error is None}


def topic_partitions(bootstrap: str, options: dict[str, str] | None = None, timeout: float = TIMEOUT) -> dict[str, int]:
    """Every topic's partition count (metadata of all topics: never auto-creates one)."""
    return _counts(AdminClient(client_conf(bootstrap, options, timeout)), timeout)


@dataclass
class _Cluster:
    admin: AdminClient | None = None
    counts: dict[str, int] | None = None
    error: str | None = None
    read_at: float = float("-inf")
    used_at: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


class PartitionCache:
    """Topic partition counts per Kafka cluster, shared by every reconcile thread."""

    def __init__(self, max_age: float = 30.0, min_age: float = 1.0, timeout: float = TIMEOUT):
        self.max_age, self.min_age, self.timeout = max_age, min_age, timeout
        self._clusters: dict[tuple, _Cluster] = {}
        self._lock = threading.Lock()

    def counts(self, bootstrap: str, options: dict[str, str], wanted: list[str]) -> dict[str, int]:
        """Partition counts (raises what the AdminClient raises, for ``observe`` to report)."""
        conf = client_conf(bootstrap, options, self.timeout)
        key = tuple(sorted(conf.items()))
        now = time.monotonic()
        with self._lock:
            cluster = self._clusters.setdefault(key, _Cluster())
            cluster.used_at = now
            for other, idle in list(self._clusters.items()):
                if now - idle.used_at > IDLE:
                    del self._clusters[other]
        # One metadata request per cluster at a time. While one is under way, the others answer from
        # the counts they have (at most max_age old) unless those lack a topic: then they wait for it.
        usable = cluster.counts is not None and all(t in cluster.counts for t in wanted)
        if not cluster.lock.acquire(blocking=not usable):
            return cluster.counts
        try:
            age = time.monotonic() - cluster.read_at
            stale = age >= self.max_age or (
                age >= self.min_age and (cluster.error is not None or any(t not in cluster.counts for t in wanted)))
            if stale:
                try:
                    if cluster.admin is None:
                        cluster.admin = AdminClient(conf)
                    cluster.counts, cluster.error = _counts(cluster.admin, self.timeout), None
                except (KafkaException, ValueError, RuntimeError) as exc:
                    cluster.admin, cluster.counts, cluster.error = None, None, str(exc) or type(exc).__name__
                cluster.read_at = time.monotonic()
            if cluster.error is not None:
                raise RuntimeError(cluster.error)
            return cluster.counts
        finally:
            cluster.lock.release()


@dataclass(frozen=True)
class Probe:
    """What reading an app's partition counts takes: its cluster, client options and input topics."""

    bootstrap: str
    options: tuple[tuple[str, str], ...]
    sources: tuple[str, ...]
    tables: tuple[str, ...]

    @classmethod
    def of(cls, app: StreamApp, secret: dict[str, str] | None) -> "Probe":
        spec = app.spec
        options = {**(spec.kafka.options or {}), **(secret or {})}
        return cls(spec.kafka.bootstrap_servers, tuple(sorted(options.items())),
                   tuple(t for s in spec.sources for t in s.topic_list), tuple(t.topic for t in spec.tables))

    def observe(self, timeout: float = TIMEOUT, cache: PartitionCache | None = None) -> Kafka:
        inputs = [*self.sources, *self.tables]
        try:
            if cache is None:
                counts = topic_partitions(self.bootstrap, dict(self.options), timeout)
            else:
                counts = cache.counts(self.bootstrap, dict(self.options), inputs)
        except (KafkaException, ValueError, RuntimeError) as exc:
            return Kafka(error=f"Kafka at {self.bootstrap} unreachable: {exc}")
        return Kafka(
            partitions=sum(counts.get(t, 0) for t in dict.fromkeys(self.sources)),
            by_topic=tuple((t, counts[t]) for t in dict.fromkeys(self.sources) if t in counts),
            missing_topics=tuple(sorted({t for t in inputs if t not in counts})),
        )


def observe(app: StreamApp, secret: dict[str, str] | None = None, secret_missing: bool = False,
            timeout: float = TIMEOUT, cache: PartitionCache | None = None) -> Kafka:
    """Partition counts; ``secret`` holds client options read from spec.kafka.secretRef. Without
    ``cache``, a fresh client reads the metadata now."""
    if secret_missing:
        ref = app.spec.kafka.secret_ref
        return Kafka(error=f"Secret {ref.name if ref else '?'} (spec.kafka.secretRef) not found: create it with "
                           "the Kafka client options as keys (e.g. sasl.password); the driver waits for it")
    return Probe.of(app, secret).observe(timeout, cache)
