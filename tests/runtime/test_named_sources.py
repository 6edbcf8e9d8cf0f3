"""Named sources (Spark 4.2 source evolution) with the runtime's own Kafka reader and compiler.

A checkpoint made with offset log format 2 keys each source's offsets by its name: a windowed count
keeps its state when a source is added to its query and again when one is removed, and a window that
spans both changes reaches the sink once, with every record read while its source was in the query. A
checkpoint made with format 1 (every checkpoint the runtime makes) stays format 1 under the format-2
setting, keeps working with named sources, and refuses an added source. A format-2 checkpoint whose
last batch was not committed cannot be restarted on Spark 4.2.0, which is why the runtime leaves
source evolution off (the day this test fails, Spark has fixed it).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F

from streamapp_testkit.runtime import app, consume, produce, run_available_now, ts
from streamapp_runtime.compile.sources import read_kafka
from streamapp_runtime.spark_compat import OFFSET_LOG_FORMAT as FORMAT
from streamapp_runtime.spark_compat import SOURCE_EVOLUTION
from streamapp_testbed.kafka_admin import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]
# ms, the start of a minute a day ago: the window every record but the flushes falls in (a fixed time in
# the future gave no window at all; the broker bounds how far ahead a record's time may be, and its
# retention deletes old records)
T0 = (int(time.time() * 1000) // 60_000 - 24 * 60) * 60_000


@pytest.fixture
def named_sources(spark):
    """The session with source evolution on and offset log format 2 for one test, then as it was."""
    spark.conf.set(SOURCE_EVOLUTION, "true")
    spark.conf.set(FORMAT, "2")
    try:
        yield spark
    finally:
        spark.conf.unset(SOURCE_EVOLUTION)
        spark.conf.unset(FORMAT)


def _windowed_counts(spark, bootstrap: str, topics: dict[str, str], checkpoint: Path) -> list[tuple]:
    """Count records per key and 1-minute window of Kafka time over the named sources, with
    availableNow; the (window start ms, key, count) rows the sink got."""
    frames = [read_kafka(spark, [topic], {"kafka.bootstrap.servers": bootstrap}, "earliest", name=name)
              for name, topic in topics.items()]
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other)
    counts = (df.select(F.col("key").cast("string").alias("key"), "timestamp")
              .withWatermark("timestamp", "10 seconds")
              .groupBy(F.window("timestamp", "1 minute").alias("w"), "key").count()
              .select((F.col("w.start").cast("long") * 1000).alias("start"), "key", "count"))
    got: list[tuple] = []

    def collect(batch, _id):
        got.extend((r["start"], r["key"], r["count"]) for r in batch.collect())

    query = (counts.writeStream.outputMode("append").foreachBatch(collect)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination(300)
    return got


def _put(bootstrap: str, topic: str, key: str, seconds: list[int]) -> None:
    produce(bootstrap, topic, [(key, "x")] * len(seconds), [T0 + s * 1000 for s in seconds])


def _last_offsets(checkpoint: Path) -> list[str]:
    batches = sorted((checkpoint / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    return batches[-1].read_text().splitlines()


def test_a_source_added_and_removed_keeps_the_state_of_a_format_2_checkpoint(kafka, named_sources, names, tmp_path):
    spark = named_sources
    a, b, bs, ck = names("a"), names("b"), kafka.bootstrap, tmp_path / "checkpoint"
    for topic in (a, b):
        create_topic(bs, topic)
    _put(bs, a, "k", [1, 2, 3])
    _put(bs, b, "k", [4])  # read once b joins: b starts at its earliest offset
    emitted = _windowed_counts(spark, bs, {"clicks": a}, ck)
    _put(bs, a, "k", [20, 21])
    _put(bs, b, "k", [30])
    emitted += _windowed_counts(spark, bs, {"clicks": a, "more_clicks": b}, ck)  # a source added
    assert _last_offsets(ck)[0] == "v2" and {line.split(":")[0] for line in _last_offsets(ck)[2:]} == {"clicks", "more_clicks"}
    _put(bs, a, "k", [40])
    _put(bs, b, "k", [45])  # b was removed: never read
    _put(bs, a, "flush", [300])  # moves the watermark past the first window
    emitted += _windowed_counts(spark, bs, {"clicks": a}, ck)  # a source removed
    _put(bs, a, "flush", [600])  # the watermark a batch uses is the one the batch before it left
    emitted += _windowed_counts(spark, bs, {"clicks": a}, ck)
    assert [row for row in emitted if row[1] == "k"] == [(T0, "k", 8)], \
        "the window spanning both changes, once, with a's 6 records and b's 2 read while b was in the query"


def test_a_format_1_checkpoint_stays_format_1_and_refuses_an_added_source(kafka, named_sources, names, tmp_path):
    spark = named_sources
    a, b, bs, ck = names("a"), names("b"), kafka.bootstrap, tmp_path / "checkpoint"
    for topic in (a, b):
        create_topic(bs, topic)
    _put(bs, a, "k", [1, 2])
    spark.conf.set(FORMAT, "1")  # a checkpoint as the runtime makes it
    try:
        emitted = _windowed_counts(spark, bs, {"clicks": a}, ck)
    finally:
        spark.conf.set(FORMAT, "2")
    _put(bs, a, "k", [3])
    _put(bs, a, "flush", [300])
    emitted += _windowed_counts(spark, bs, {"clicks": a}, ck)  # resumed under the format-2 setting
    assert _last_offsets(ck)[0] == "v1", "the offset log keeps the format the checkpoint was made with"
    _put(bs, a, "flush", [600])
    emitted += _windowed_counts(spark, bs, {"clicks": a}, ck)
    assert [row for row in emitted if row[1] == "k"] == [(T0, "k", 3)], "state kept across the restarts"
    with pytest.raises(StreamingQueryException, match=r"There are \[1\] sources in the checkpoint offsets and now "
                                                      r"there are \[2\] sources"):
        _windowed_counts(spark, bs, {"clicks": a, "more_clicks": b}, ck)


def test_a_query_reading_one_source_twice_names_each_read(kafka, named_sources, names, tmp_path):
    """Spark refuses two sources of one name in a query: a stream joined with another stream of the
    same source reads it twice, as 'views' and 'views_2' (compile/compiler.py)."""
    topic, out = names("views"), names("pairs")
    create_topic(kafka.bootstrap, topic)
    produce(kafka.bootstrap, topic, [(f"u{i}", {"user": f"u{i % 2}", "page": f"p{i}", "ts": ts(i)}) for i in range(4)])
    the_app = app(names("app"), {
        "sources": [{"name": "views", "topic": topic, "schema": {"user": "string", "page": "string", "ts": "timestamp"},
                     "eventTime": "ts", "watermark": "5s"}],
        "streams": [{"name": "first-views", "from": "views", "steps": [{"select": ["user", "page AS first", "ts"]}]},
                    {"name": "pairs", "from": "views",
                     "steps": [{"join": {"stream": "first-views", "using": ["user"], "within": "10s"}},
                               {"filter": "first < page"}]}],
        "sinks": [{"from": "pairs", "kafka": {"topic": out}}],
    })
    run_available_now(named_sources, the_app, kafka, tmp_path / "checkpoint")
    pairs = {(r["value"]["user"], r["value"]["first"], r["value"]["page"]) for r in consume(kafka.bootstrap, out, expect=2)}
    assert pairs == {("u0", "p0", "p2"), ("u1", "p1", "p3")}
    offsets = _last_offsets(tmp_path / "checkpoint" / f"pairs-{out}")
    assert offsets[0] == "v2" and sorted(line.split(":")[0] for line in offsets[2:]) == ["views", "views_2"]


def test_a_format_2_checkpoint_is_not_restarted_after_a_crash_mid_batch(kafka, named_sources, names, tmp_path):
    """Spark 4.2.0: a batch in the offset log without its commit (the driver died while the batch ran)
    fails the restart with None.get (OfflineStateRepartitionUtils.isRepartitionBatch); with format 1
    the batch runs again, as the runtime's exactly-once sinks expect. So the runtime stays on format 1."""
    spark, a, bs = named_sources, names("a"), kafka.bootstrap
    create_topic(bs, a)
    for format_version in ("1", "2"):
        ck = tmp_path / f"format-{format_version}"
        spark.conf.set(FORMAT, format_version)
        _put(bs, a, "k", [1])
        _windowed_counts(spark, bs, {"clicks": a}, ck)
        last = max(int(p.name) for p in (ck / "commits").glob("[0-9]*"))
        for path in (ck / "commits" / str(last), ck / "commits" / f".{last}.crc"):
            path.unlink(missing_ok=True)  # the batch is in the offset log, its commit is not
        if format_version == "1":
            _windowed_counts(spark, bs, {"clicks": a}, ck)  # the batch runs again
            assert (ck / "commits" / str(last)).exists()
        else:
            with pytest.raises(StreamingQueryException, match="None.get"):
                _windowed_counts(spark, bs, {"clicks": a}, ck)
