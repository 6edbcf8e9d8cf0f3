"""Dead letters written by the driver from the sink query's counts (run.dead_letters), on the real
broker: taking over from the dead-letter query an earlier version ran, each bad record once."""

from __future__ import annotations

import pytest

from streamapp_testkit.runtime import app, consume, produce, run_available_now
from streamapp_testbed.kafka_admin import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]
SCHEMA = {"id": "string", "n": "long"}


def records(first: int, count: int, bad_every: int = 5) -> list[tuple[str, object]]:
    return [(f"b{i}", f"{{broken {i}") if i % bad_every == 0 else (f"g{i}", {"id": f"g{i}", "n": i})
            for i in range(first, first + count)]


def test_taking_over_from_a_dead_letter_query_writes_each_bad_record_once(kafka, spark, names, tmp_path):
    """Run 1: no sink reads `clicks`, so a dead-letter query of its own reads it (as every JSON source
    had before the sinks counted bad records). Run 2, on the same checkpoint root: a sink reads it now
    and its writer starts where that query's last committed batch ended, not at the source's start."""
    clicks, other, out, dlq = names("clicks"), names("other"), names("out"), names("dlq")
    for topic in (clicks, other, out, dlq):
        create_topic(kafka.bootstrap, topic, partitions=2)
    sources = [{"name": "clicks", "topic": clicks, "schema": SCHEMA}, {"name": "other", "topic": other, "schema": SCHEMA}]
    first, second = records(0, 50), records(50, 50)
    produce(kafka.bootstrap, clicks, first)
    produce(kafka.bootstrap, other, [("o", {"id": "o", "n": 1})])
    name, sinks = names("app"), [{"from": "other", "kafka": {"topic": out}}]
    before = app(name, {"sources": sources, "sinks": sinks, "deadLetter": {"topic": dlq}})
    assert "dlq-clicks" in run_available_now(spark, before, kafka, tmp_path)
    assert sorted(r["key"] for r in consume(kafka.bootstrap, dlq, to_end=True)) == sorted(k for k, _ in first if k.startswith("b"))

    produce(kafka.bootstrap, clicks, second)
    after = app(name, {"sources": sources, "sinks": [*sinks, {"from": "clicks", "kafka": {"topic": out}}],
                       "deadLetter": {"topic": dlq}})
    progress = run_available_now(spark, after, kafka, tmp_path)
    assert "dlq-clicks" not in progress  # the new sink's query counts clicks' bad records
    letters = consume(kafka.bootstrap, dlq, to_end=True)
    bad = sorted(k for k, _ in first + second if k.startswith("b"))
    assert sorted(r["key"] for r in letters) == bad, "each bad record once"
