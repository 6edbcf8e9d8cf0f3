"""Before starting: wait for the broker and for the input topics, with a clear log line, never crash-loop."""

from __future__ import annotations

import logging
import threading
import time

from streamapp_api.kafka_credentials import refused_credentials

from streamapp_runtime.connections import admin_config, librdkafka_client

log = logging.getLogger("streamapp.runtime")
# librdkafka's own log and error callbacks report each failed connection (several a second while a
# broker is down); the wait below says once what it waits for instead.
_client_log = logging.getLogger("streamapp.runtime.librdkafka")
_client_log.propagate = False
_client_log.addHandler(logging.NullHandler())


class StopRequested(Exception):
    """SIGTERM or Ctrl-C arrived while the app waited for Kafka: nothing ran, nothing to stop."""


class _Refusals:
    """The wait's client's librdkafka log (not printed either): the last line saying that the broker
    refused the credentials, so that the wait says so rather than "transport failure"."""

    def __init__(self) -> None:
        self.last: str | None = None

    def log(self, level: int, fmt: str, *args: object) -> None:
        self.last = refused_credentials(fmt % args if args else fmt) or self.last


def admin_client(options: dict[str, str], client_log=None):
    """An AdminClient (librdkafka) from Spark's Kafka options, without the Java client's own settings.

    spec.kafka.options are the Java client's (what Spark's source and sink use); librdkafka refuses
    the ones it does not know (``default.api.timeout.ms``, say), so those are left out here.
    """
    from confluent_kafka.admin import AdminClient

    logger = client_log or _client_log
    return librdkafka_client(lambda config: AdminClient({**config, "logger": logger, "error_cb": lambda error: None}),
                             admin_config(options))


def partition_counts(options: dict[str, str], topics: list[str], wait: bool = True, poll: float = 5.0,
                     deadline: float | None = None, stop: threading.Event | None = None) -> dict[str, int]:
    """Partition count of every topic; waits (logging what it waits for) until all exist, or raises
    StopRequested when `stop` is set meanwhile."""
    stop = stop or threading.Event()
    refusals = _Refusals()
    admin = admin_client(options, refusals)
    bootstrap = options.get("kafka.bootstrap.servers")
    last_message = None
    while True:
        try:
            metadata = admin.list_topics(timeout=10)
            found = {t: len(metadata.topics[t].partitions) for t in topics
                     if t in metadata.topics and metadata.topics[t].error is None and metadata.topics[t].partitions}
            missing = [t for t in topics if t not in found]
            message = None if not missing else f"waiting for topics {', '.join(missing)} (they do not exist yet on {bootstrap})"
        except Exception as exc:  # KafkaException: broker unreachable, or the credentials refused
            admin.poll(0)  # the log lines come through the client's queue
            found, message = {}, f"waiting for Kafka at {bootstrap}: {exc}"
            if refusals.last is not None:
                message = (f"Kafka at {bootstrap} refused the credentials (the Secret spec.kafka.secretRef names; "
                           f"docs/kafka.md): {refusals.last}; waiting")
        if message is None:
            return found
        if stop.is_set():
            raise StopRequested(message)
        if not wait or (deadline is not None and time.monotonic() > deadline):
            raise TimeoutError(message)
        if message != last_message:
            log.warning("%s; retrying every %.0fs", message, poll)
            last_message = message
        stop.wait(poll)
