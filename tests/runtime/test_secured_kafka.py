"""An app on the test bed broker's secured listeners (SASL_SSL with SCRAM-SHA-512; SSL with a client
certificate), its credentials given once, in the neutral keys, as the driver pod gets them from the
Secret (``STREAMAPP_KAFKA_*``): Spark's Java client reads and writes with them, and the runtime's own
librdkafka clients (the topic wait, the exactly-once writer, the dead letters, the consumer group)
derive theirs from the same set. A windowed aggregation's rows arrive, a malformed record reaches the
dead-letter topic, and the group holds the offsets the app processed."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from streamapp_api import contract
from streamapp_runtime import plan
from streamapp_runtime.run import runner
from streamapp_runtime.run.kafka_wait import partition_counts
from streamapp_runtime.run.settings import Settings
from streamapp_testbed.kafka_admin import create_topic, read_topic
from streamapp_testkit.runtime import app, produce, ts

pytestmark = [pytest.mark.integration, pytest.mark.slow]
PARTITIONS = 2


def _environment(credentials: dict[str, str]) -> dict[str, str]:
    """The driver's environment from a Secret with these keys (envFrom, prefix STREAMAPP_KAFKA_)."""
    return {contract.ENV_KAFKA_PREFIX + key.upper().replace(".", "_"): value for key, value in credentials.items()}


@pytest.mark.parametrize("listener", ["sasl", "mtls"])
def test_windows_and_dead_letters_exactly_once_over_the_secured_listener(kafka, spark, names, tmp_path, listener):
    clicks, windows, dead = names("clicks"), names("windows"), names("dlq")
    for topic in (clicks, windows, dead):
        create_topic(kafka.bootstrap, topic, partitions=PARTITIONS)
    # Two users, a click each every 10 s for two minutes, a malformed record, and a click ten minutes on
    # that moves the watermark (30 s) past the first two minutes' windows.
    records = [(f"u{i % 2}", {"user": f"u{i % 2}", "ts": ts(i * 5)}) for i in range(24)]
    records += [("bad", "{not json"), ("u0", {"user": "u0", "ts": ts(600)})]
    produce(kafka.bootstrap, clicks, records)
    the_app = app(names("app"), {
        "kafka": {"bootstrapServers": "kafka.example:9093", "secretRef": {"name": "kafka-credentials"}},
        "sources": [{"name": "clicks", "topic": clicks, "schema": {"user": "string", "ts": "timestamp"},
                     "eventTime": "ts", "watermark": "30s", "startingOffsets": "earliest"}],
        "streams": [{"name": "per-minute", "from": "clicks", "steps": [
            {"window": {"type": "tumbling", "size": "1m"}},
            {"aggregate": {"groupBy": ["user"], "columns": {"clicks": "count(*)"}}}], "emit": "final"}],
        "sinks": [{"from": "per-minute", "kafka": {"topic": windows, "key": "user", "delivery": "exactly-once"}}],
        "deadLetter": {"topic": dead, "delivery": "exactly-once"},
    })
    environment = contract.kafka_env_options(_environment(kafka.credentials(listener)))
    settings = Settings(checkpoint_root=str(tmp_path / "checkpoint"), kafka_override=kafka.listener(listener),
                        available_now=True, metrics_port=None, kafka_env_options=environment)

    running = runner.start(spark, the_app, settings, quiet=True)  # waits for the topics: librdkafka, secured
    assert runner.supervise(spark, running) == 0, [str(q.exception()) for q in running.queries if q.exception()]

    rows = [json.loads(m.value()) for m in read_topic(kafka.bootstrap, windows, after=4, timeout=60,
                                                      config={"isolation.level": "read_committed"})]
    assert sorted((r["user"], r["window_start"][11:16], r["clicks"]) for r in rows) == [
        ("u0", "00:00", 6), ("u0", "00:01", 6), ("u1", "00:00", 6), ("u1", "00:01", 6)]
    letters = list(read_topic(kafka.bootstrap, dead, after=1, timeout=60, config={"isolation.level": "read_committed"}))
    assert [(m.key(), m.value()) for m in letters] == [(b"bad", b"{not json")]
    group = contract.consumer_group("default", the_app.metadata.name, the_app.spec.sinks[0].query_name)
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(clicks, p) for p in range(PARTITIONS)])
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    offsets = admin.list_consumer_group_offsets([request])[group].result(timeout=10).topic_partitions
    assert sum(tp.offset for tp in offsets) == len(records), offsets


def test_the_topic_wait_says_the_credentials_were_refused(kafka):
    the_app = app("wrong-password", {"kafka": {"bootstrapServers": kafka.sasl_bootstrap,
                                               "secretRef": {"name": "kafka-credentials"}},
                                     "sources": [{"name": "s", "topic": "any", "format": "string"}],
                                     "sinks": [{"from": "s", "kafka": {"topic": "out"}}]})
    wrong = {**kafka.credentials("sasl"), "sasl.password": "not-the-password"}
    options = plan.kafka_options(the_app, None, contract.kafka_env_options(_environment(wrong)))
    with pytest.raises(TimeoutError, match=r"refused the credentials .*SASL authentication error"):
        partition_counts(options, ["any"], wait=False)
