"""Shuffle partitions are decided once, by the runtime, at a checkpoint's first run, and the count
reported (to the operator, through the metrics endpoint) is the one Spark's state really uses: an app
started again on a kept checkpoint after its topic grew keeps the old count; a new checkpoint takes
the new one."""

from __future__ import annotations

import json

import pytest
from prometheus_client import generate_latest

from streamapp_testkit.runtime import app, produce, ts
from streamapp_api import contract
from streamapp_runtime.run import runner
from streamapp_runtime.run.settings import Settings
from streamapp_testbed.kafka_admin import add_partitions, create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _run(spark, the_app, kafka, checkpoint) -> tuple[float, set[int]]:
    """(the count the metrics endpoint reports, the counts Spark's state operators ran with)."""
    settings = Settings(checkpoint_root=str(checkpoint), kafka_override=kafka.bootstrap, available_now=True,
                        metrics_port=None)
    running = runner.start(spark, the_app, settings, quiet=True, wait_for_topics=False)
    queries = list(running.queries)
    assert runner.supervise(spark, running) == 0
    used = _state_partitions(queries)
    text = generate_latest(running.metrics.registry).decode()
    reported = next(float(line.split()[-1]) for line in text.splitlines()
                    if line.startswith(contract.METRIC_SHUFFLE_PARTITIONS + "{"))
    return reported, used


def _state_partitions(queries) -> set[int]:
    return {int(op["numShufflePartitions"]) for q in queries for p in q.recentProgress
            for op in json.loads(p.json).get("stateOperators") or []}


def test_a_kept_checkpoint_keeps_its_count_after_the_topic_grew_and_a_new_one_takes_the_new_count(
        kafka, spark, names, tmp_path):
    topic = names("clicks")
    create_topic(kafka.bootstrap, topic, partitions=2)
    the_app = app(names("app"), {
        "sources": [{"name": "clicks", "topic": topic, "schema": {"user": "string", "ts": "timestamp"},
                     "eventTime": "ts", "watermark": "1s"}],
        "streams": [{"name": "counts", "from": "clicks", "steps": [
            {"window": {"type": "tumbling", "size": "10s"}}, {"aggregate": {"groupBy": ["user"], "columns": {"n": "count(*)"}}}]}],
        "sinks": [{"from": "counts", "kafka": {"topic": names("out"), "key": "user"}}],
        "deadLetter": {"enabled": False},
    })
    produce(kafka.bootstrap, topic, [(f"u{i % 3}", {"user": f"u{i % 3}", "ts": ts(i)}) for i in range(20)])
    assert _run(spark, the_app, kafka, tmp_path / "kept") == (2, {2})

    add_partitions(kafka.bootstrap, topic, 5)
    produce(kafka.bootstrap, topic, [(f"u{i % 3}", {"user": f"u{i % 3}", "ts": ts(i)}) for i in range(20, 40)])
    assert _run(spark, the_app, kafka, tmp_path / "kept") == (2, {2}), "the checkpoint's count, not the topic's"
    assert _run(spark, the_app, kafka, tmp_path / "fresh") == (5, {5}), "a new checkpoint: the topic's count now"
