"""Partition counts from the real broker, with bounded waits when it is unreachable."""

from __future__ import annotations

import time

import pytest

from streamapp_api import load
from streamapp_testbed.kafka_admin import create_topic
from streamapp_testbed.process import free_port
from streamapp_operator.observe.kafka import observe

from streamapp_testkit.operator_bed import simple_app, unique

pytestmark = pytest.mark.integration


def _app(bootstrap: str, topics: list[str], table: str | None = None):
    doc = simple_app("app", "ns", bootstrap, topics[0])
    doc["spec"]["sources"][0].pop("topic")
    doc["spec"]["sources"][0]["topics"] = topics
    if table:
        doc["spec"]["tables"] = [{"name": "profiles", "topic": table, "format": "string"}]
    return load(doc)


def test_partitions_are_summed_over_source_topics(kafka):
    a, b, t = unique("a"), unique("b"), unique("table")
    create_topic(kafka.bootstrap, a, partitions=3)
    create_topic(kafka.bootstrap, b, partitions=2)
    create_topic(kafka.bootstrap, t, partitions=8)
    seen = observe(_app(kafka.bootstrap, [a, b], table=t))
    assert (seen.partitions, seen.error, seen.missing_topics) == (5, None, ())


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


def test_one_cache_per_cluster_reads_new_topics_at_once_and_new_partitions_after_max_age(kafka):
    from streamapp_operator.observe.kafka import PartitionCache
    from streamapp_testbed.kafka_admin import add_partitions

    a, later = unique("a"), unique("later")
    create_topic(kafka.bootstrap, a, partitions=2)
    cache = PartitionCache(max_age=3, min_age=0.5)
    assert observe(_app(kafka.bootstrap, [a]), cache=cache).partitions == 2
    create_topic(kafka.bootstrap, later, partitions=4)
    time.sleep(0.6)
    assert observe(_app(kafka.bootstrap, [later]), cache=cache).partitions == 4  # missing: read again at once
    add_partitions(kafka.bootstrap, a, 5)
    assert observe(_app(kafka.bootstrap, [a]), cache=cache).partitions == 2  # still fresh: the cached count
    time.sleep(3)
    assert observe(_app(kafka.bootstrap, [a]), cache=cache).partitions == 5


def test_an_unreachable_broker_is_an_error_the_cache_keeps_for_min_age():
    from streamapp_operator.observe.kafka import PartitionCache

    cache = PartitionCache(max_age=60, min_age=0.2, timeout=1)
    app = _app(f"127.0.0.1:{free_port()}", ["x"])
    started = time.monotonic()
    first, second = observe(app, cache=cache), observe(app, cache=cache)
    assert first.error and "unreachable" in first.error and second.error == first.error
    assert time.monotonic() - started < 5  # the second answer came from the cache
