"""The app's lag is visible to the Kafka ecosystem: after a run, the consumer group named after the
app and the query holds the offsets the app processed, which are the topic's end offsets, as
kafka-consumer-groups, KEDA's Kafka scaler and lag exporters read them. A group that cannot be
written is counted, and the query goes on."""

from __future__ import annotations

import json

import time

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from prometheus_client import generate_latest

from streamapp_testkit.runtime import app, produce, run_available_now
from streamapp_api import contract
from streamapp_runtime.run.consumer_groups import GroupCommitter, admin_commit
from streamapp_runtime.run.kafka_wait import admin_client
from streamapp_runtime.run.metrics import Metrics
from streamapp_testbed.kafka_admin import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def committed(admin: AdminClient, group: str, topic: str, partitions: int) -> dict[int, int]:
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    result = admin.list_consumer_group_offsets([request])[group].result(timeout=10)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def end_offsets(admin: AdminClient, topic: str, partitions: int) -> dict[int, int]:
    futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)})
    return {tp.partition: f.result(timeout=10).offset for tp, f in futures.items()}


def test_after_a_run_the_group_holds_the_topics_end_offsets(kafka, spark, names, tmp_path):
    topic, out = names("clicks"), names("out")
    create_topic(kafka.bootstrap, topic, partitions=3)
    create_topic(kafka.bootstrap, out, partitions=1)
    the_app = app(names("app"), {
        "sources": [{"name": "clicks", "topic": topic, "schema": {"user": "string", "n": "int"}}],
        "sinks": [{"from": "clicks", "kafka": {"topic": out}}],
    })
    produce(kafka.bootstrap, topic, [(f"u{i}", {"user": f"u{i}", "n": i}) for i in range(50)])
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    ends = end_offsets(admin, topic, 3)
    assert sum(ends.values()) == 50

    run_available_now(spark, the_app, kafka, tmp_path / "ck")
    query = the_app.spec.sinks[0].query_name
    group = contract.consumer_group("default", the_app.metadata.name, query)
    assert group == f"streamapp.default.{the_app.metadata.name}.{query}"
    assert committed(admin, group, topic, 3) == ends

    # more input, a second run: the group follows (a commit the coordinator refused for a moment is tried again)
    produce(kafka.bootstrap, topic, [(f"v{i}", {"user": f"v{i}", "n": i}) for i in range(30)])
    run_available_now(spark, the_app, kafka, tmp_path / "ck")
    ends = end_offsets(admin, topic, 3)
    assert sum(ends.values()) == 80
    assert committed(admin, group, topic, 3) == ends
    # the dead-letter writer's cursor (clean data: it moved with the query, nothing was read back) is
    # a group named after it and the checkpoint of the query counting the bad records
    query_id = json.loads((tmp_path / "ck" / query / "metadata").read_text())["id"]
    assert committed(admin, f"streamapp.dlq-clicks.{query_id}", topic, 3) == ends


def test_a_group_that_cannot_be_written_is_counted_and_nothing_fails():
    metrics = Metrics("app", {}, {})
    unreachable = admin_client({"kafka.bootstrap.servers": "127.0.0.1:1"})  # nothing listens there
    committer = GroupCommitter(lambda q: f"streamapp.default.app.{q}", admin_commit(unreachable, timeout=2),
                               metrics.group_commit_failed)
    committer.batch_done("q", {"sources": [{"endOffset": {"t": {"0": 5}}}]})
    failures = f'{contract.METRIC_GROUP_COMMIT_FAILURES}_total{{app="app",query="q"}} '

    def counted() -> float:
        text = generate_latest(metrics.registry).decode()
        return next((float(line.split()[-1]) for line in text.splitlines() if line.startswith(failures)), 0.0)

    deadline = time.monotonic() + 20
    while counted() < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    committer.close(timeout=0)  # it would go on trying; the query never waited for it
    assert counted() >= 1, "the failure is counted"
