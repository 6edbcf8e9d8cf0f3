"""Partition counts from the real broker, with bounded waits when it is unreachable."""

from __future__ import annotations

import time

import pytest

from streamapp_api import load
from streamapp_testbed.kafka_admin import create_topic
from streamapp_testbed.process import free_port
from streamapp_operator.observe.kafka import observe

from operator_bed import simple_app, unique

pytestmark = pytest.mark.integration


def _app(bootstrap: str, topics: list[str], table: str | None = None):
    doc = simple_app("app", "ns", bootstrap, topics[0])
    doc["spec"]["sources"][0].pop("topic")
    doc["spec"]["sources"][0]["topics"] = topics
    if table:
        doc["spec"]["tables"] = [{"name": "profiles", "topic": table, "format": "string"}]
    return load(doc)


def test_partitions_are_summed_over_source_topics_and_the_largest_input_remembered(kafka):
    a, b, t = unique("a"), unique("b"), unique("table")
    create_topic(kafka.bootstrap, a, partitions=3)
    create_topic(kafka.bootstrap, b, partitions=2)
    create_topic(kafka.bootstrap, t, partitions=8)
    seen = observe(_app(kafka.bootstrap, [a, b], table=t))
    assert (seen.partitions, seen.largest_topic, seen.error, seen.missing_topics) == (5, 8, None, ())


def test_missing_topics_are_named(kafka):
    a, missing = unique("a"), unique("missing")
    create_topic(kafka.bootstrap, a, partitions=2)
    seen = observe(_app(kafka.bootstrap, [a, missing]))
    assert seen.partitions == 2 and seen.missing_topics == (missing,)


def test_unreachable_broker_is_an_error_within_the_timeout():
    started = time.monotonic()
    seen = observe(_app(f"127.0.0.1:{free_port()}", ["x"]), timeout=2)
    assert seen.partitions is None and "unreachable" in seen.error
    assert time.monotonic() - started < 10


def test_missing_credentials_secret_is_an_error_without_contacting_kafka(kafka):
    seen = observe(_app(kafka.bootstrap, ["x"]), secret_missing=True)
    assert seen.error and "not found" in seen.error
