"""Partition counts of an app's input topics, read with the Kafka AdminClient (bounded by timeouts)."""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from streamapp_api import StreamApp

from ..decide.world import Kafka

TIMEOUT = 5.0


def topic_partitions(bootstrap: str, options: dict[str, str] | None = None, timeout: float = TIMEOUT) -> dict[str, int]:
    """Every topic's partition count (metadata of all topics: never auto-creates one)."""
    conf = {"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000),
            "socket.connection.setup.timeout.ms": int(timeout * 1000), "log_level": 3}
    conf.update({k: v for k, v in (options or {}).items() if k.startswith(("security.", "sasl.", "ssl."))})
    metadata = AdminClient(conf).list_topics(timeout=timeout)
    return {name: len(topic.partitions) for name, topic in metadata.topics.items() if topic.error is None}


def observe(app: StreamApp, secret: dict[str, str] | None = None, secret_missing: bool = False,
            timeout: float = TIMEOUT) -> Kafka:
    """Partition counts; ``secret`` holds client options read from spec.kafka.secretRef."""
    spec = app.spec
    sources = [t for s in spec.sources for t in s.topic_list]
    inputs = sources + [t.topic for t in spec.tables]
    if secret_missing:
        name = spec.kafka.secret_ref.name if spec.kafka.secret_ref else "?"
        return Kafka(error=f"Secret {name} (spec.kafka.secretRef) not found")
    try:
        options = {**(spec.kafka.options or {}), **(secret or {})}
        counts = topic_partitions(spec.kafka.bootstrap_servers, options, timeout)
    except (KafkaException, ValueError, RuntimeError) as exc:
        return Kafka(error=f"Kafka at {spec.kafka.bootstrap_servers} unreachable: {exc}")
    missing = tuple(sorted({t for t in inputs if t not in counts}))
    return Kafka(
        partitions=sum(counts.get(t, 0) for t in dict.fromkeys(sources)),
        largest_topic=max((counts.get(t, 0) for t in inputs), default=0) or None,
        missing_topics=missing,
    )
