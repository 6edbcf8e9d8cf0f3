"""Partition counts of an app's input topics, read with the Kafka AdminClient (bounded by timeouts).

``PartitionCache`` is what the operator uses: one AdminClient per cluster (bootstrap servers and
client options), its topic metadata kept for ``max_age`` seconds (the resync interval), so a
thousand apps on one cluster cost one metadata request per interval rather than one client each. A
topic an app names that the cached metadata lacks is looked up again at once (it may just have been
created), at most once per ``min_age``.

The client takes the app's credentials as the runtime's clients do (``contract.admin_client_options``:
derived from either flavour of the Secret's keys, docs/kafka.md). A broker that refuses them (SASL
authentication, a TLS handshake refused over a certificate) is told apart from one out of reach by
librdkafka's log of the failure: ``KafkaAuthFailed``, naming the Secret.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from streamapp_api import StreamApp, contract
from streamapp_api.kafka_credentials import CredentialsError, refused_credentials, secret_options

from ..decide.world import Kafka

TIMEOUT = 5.0
IDLE = 600.0  # a cluster no app has asked about for this long loses its client


class AuthFailed(RuntimeError):
    """Kafka refused the client's credentials (or they cannot be put together); the message says how."""


class _ClientLog:
    """A client's librdkafka log (errors only, ``log_level`` 3): the last failure it told, kept to say
    why a request failed. Not printed: the reason reaches the app's status."""

    def __init__(self) -> None:
        self.refusal: str | None = None

    def log(self, level: int, fmt: str, *args: object) -> None:
        self.refusal = refused_credentials(fmt % args if args else fmt) or self.refusal


def client_conf(bootstrap: str, options: dict[str, str] | None, timeout: float) -> dict:
    conf = {"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000),
            "socket.connection.setup.timeout.ms": int(timeout * 1000), "log_level": 3}
    try:
        conf.update(contract.admin_client_options(options or {}))
    except CredentialsError as exc:
        raise AuthFailed(str(exc)) from None
    return conf


def _admin(conf: dict) -> tuple[AdminClient, _ClientLog]:
    log = _ClientLog()
    return AdminClient({**conf, "logger": log}), log


def _counts(admin: AdminClient, log: _ClientLog, timeout: float) -> dict[str, int]:
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException:
        admin.poll(0)  # the log lines come through the client's queue
        if log.refusal is not None:
            raise AuthFailed(log.refusal) from None
        raise
    finally:
        admin.poll(0)
    return {name: len(topic.partitions) for name, topic in metadata.topics.items() if topic.error is None}


def topic_partitions(bootstrap: str, options: dict[str, str] | None = None, timeout: float = TIMEOUT) -> dict[str, int]:
    """Every topic's partition count (metadata of all topics: never auto-creates one)."""
    return _counts(*_admin(client_conf(bootstrap, options, timeout)), timeout)


@dataclass
class _Cluster:
    admin: tuple[AdminClient, _ClientLog] | None = None
    counts: dict[str, int] | None = None
    error: RuntimeError | None = None
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
        """Partition counts (raises what the AdminClient raises, or AuthFailed, for ``observe`` to report)."""
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
                        cluster.admin = _admin(conf)
                    cluster.counts, cluster.error = _counts(*cluster.admin, self.timeout), None
                except AuthFailed as exc:
                    cluster.admin, cluster.counts, cluster.error = None, None, exc
                except (KafkaException, ValueError, RuntimeError) as exc:
                    cluster.admin, cluster.counts = None, None
                    cluster.error = RuntimeError(str(exc) or type(exc).__name__)
                cluster.read_at = time.monotonic()
            if cluster.error is not None:
                raise cluster.error
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
    secret: str | None = None  # spec.kafka.secretRef's name, for a message about its credentials

    @classmethod
    def of(cls, app: StreamApp, secret: dict[str, str] | None) -> "Probe":
        """``secret``: the Secret's keys as written (``SASL_PASSWORD`` or ``sasl.password``)."""
        spec = app.spec
        options = {**(spec.kafka.options or {}), **secret_options(secret or {})}
        ref = spec.kafka.secret_ref
        return cls(spec.kafka.bootstrap_servers, tuple(sorted(options.items())),
                   tuple(t for s in spec.sources for t in s.topic_list), tuple(t.topic for t in spec.tables),
                   ref.name if ref else None)

    def observe(self, timeout: float = TIMEOUT, cache: PartitionCache | None = None) -> Kafka:
        inputs = [*self.sources, *self.tables]
        try:
            if cache is None:
                counts = topic_partitions(self.bootstrap, dict(self.options), timeout)
            else:
                counts = cache.counts(self.bootstrap, dict(self.options), inputs)
        except AuthFailed as exc:
            given = f"the credentials of Secret {self.secret} (spec.kafka.secretRef)" if self.secret else \
                "the app without credentials (no spec.kafka.secretRef)"
            return Kafka(error=f"Kafka at {self.bootstrap} refused {given}: {exc}; see docs/kafka.md for the "
                               "Secret's keys", auth_failed=True)
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
