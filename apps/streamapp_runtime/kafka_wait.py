"""Before starting: wait for the broker and for the input topics, with a clear log line, never crash-loop."""

from __future__ import annotations

import logging
import re
import time

log = logging.getLogger("streamapp.runtime")


def admin_config(options: dict[str, str]) -> dict[str, str]:
    """Spark's ``kafka.``-prefixed options -> a confluent_kafka client configuration. Pure."""
    config = {k[len("kafka."):]: v for k, v in options.items() if k.startswith("kafka.")}
    config.setdefault("socket.timeout.ms", "10000")
    return config


def admin_client(options: dict[str, str]):
    """An AdminClient (librdkafka) from Spark's Kafka options, without the Java client's own settings.

    spec.kafka.options are the Java client's (what Spark's source and sink use); librdkafka refuses
    the ones it does not know (``default.api.timeout.ms``, say), so those are left out here.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    config = admin_config(options)
    while True:
        try:
            return AdminClient(config)
        except KafkaException as exc:
            unknown = re.search(r'No such configuration property: "([^"]+)"', str(exc))
            if unknown is None or unknown.group(1) not in config:
                raise
            log.debug("Kafka option %s is for the Java client only; not used while waiting for topics", unknown.group(1))
            del config[unknown.group(1)]


def partition_counts(options: dict[str, str], topics: list[str], wait: bool = True, poll: float = 5.0,
                     deadline: float | None = None, stop=lambda: False) -> dict[str, int]:
    """Partition count of every topic; waits (logging what it waits for) until all exist."""
    admin = admin_client(options)
    bootstrap = options.get("kafka.bootstrap.servers")
    last_message = None
    while True:
        try:
            metadata = admin.list_topics(timeout=10)
            found = {t: len(metadata.topics[t].partitions) for t in topics
                     if t in metadata.topics and metadata.topics[t].error is None and metadata.topics[t].partitions}
            missing = [t for t in topics if t not in found]
            message = None if not missing else f"waiting for topics {', '.join(missing)} (they do not exist yet on {bootstrap})"
        except Exception as exc:  # KafkaException: broker unreachable
            found, message = {}, f"waiting for Kafka at {bootstrap}: {exc}"
        if message is None:
            return found
        if not wait or stop() or (deadline is not None and time.monotonic() > deadline):
            raise TimeoutError(message)
        if message != last_message:
            log.warning("%s; retrying every %.0fs", message, poll)
            last_message = message
        time.sleep(poll)
