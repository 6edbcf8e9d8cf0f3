"""Spark behaviours the runtime leans on, asserted on the Spark the project pins: run this file first
after a Spark upgrade. Each test names the runtime code that depends on it. (Shuffle partitions pinned
by a checkpoint's offset log: tests/runtime/test_shuffle_partitions.py; named sources and the offset
log format a checkpoint keeps: tests/runtime/test_named_sources.py.)"""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamapp_runtime import spark_compat

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _files(folder, rows) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"part-{len(list(folder.iterdir()))}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _ids_of_batches(spark, source, checkpoint) -> list[str]:
    """Run a file-source query with availableNow; the query id foreachBatch saw in each batch."""
    seen: list[str] = []
    df = spark.readStream.schema("n INT").json(str(source))
    query = (df.writeStream.foreachBatch(lambda batch, _id: seen.append(spark_compat.query_id(batch)))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    return seen


def test_foreach_batch_sees_a_query_id_that_its_checkpoint_keeps(spark, tmp_path):
    """sinks/postgres.py keys its ledger by it: one checkpoint, one id; a new checkpoint, a new id."""
    source = tmp_path / "in"
    _files(source, [{"n": 1}])
    first = _ids_of_batches(spark, source, tmp_path / "ck")
    _files(source, [{"n": 2}])
    again = _ids_of_batches(spark, source, tmp_path / "ck")
    fresh = _ids_of_batches(spark, source, tmp_path / "other")
    assert first and again and fresh and None not in first + again + fresh
    assert set(first) == set(again), "restarted on its checkpoint: the same id"
    assert set(fresh).isdisjoint(first), "a new checkpoint: another id"


def test_a_failed_query_carries_the_jvm_cause(spark, tmp_path):
    """runner.failure_text / recovery.decide read the causes to tell a lost broker from a bug."""
    source = tmp_path / "in"
    _files(source, [{"n": 1}])
    df = spark.readStream.schema("n INT").json(str(source)).select(F.expr("raise_error('boom from a test')"))
    query = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
    with pytest.raises(StreamingQueryException):
        query.awaitTermination(120)
    trace = spark_compat.jvm_stack_trace(query.exception())
    assert "boom from a test" in str(query.exception())
    # (StreamExecution is in ...streaming.runtime since Spark 4.1; it was in ...streaming in 4.0)
    assert "org.apache.spark.sql.execution.streaming.runtime.StreamExecution" in trace, "the JVM frames come with it"


def test_from_json_flags_a_record_of_the_wrong_shape_in_the_corrupt_column(spark):
    """sources.py sends records Spark flags this way to the dead-letter topic (with the reason)."""
    schema = T.StructType([T.StructField("n", T.IntegerType()), T.StructField("_corrupt", T.StringType())])
    rows = spark.createDataFrame([('{"n": 1}',), ('{"n": "many"}',), ("{not json",)], "value STRING")
    parsed = rows.select(F.from_json("value", schema, {"columnNameOfCorruptRecord": "_corrupt"}).alias("p"))
    got = [(r["p"]["n"], r["p"]["_corrupt"]) for r in parsed.collect()]
    assert got == [(1, None), (None, '{"n": "many"}'), (None, "{not json")]


def test_window_time_is_the_last_instant_of_the_window(spark):
    """steps/windows.py carries it as the event time of a windowed aggregate's rows (chained windows)."""
    df = spark.createDataFrame([(datetime(2026, 1, 1, 0, 0, 30),)], "ts TIMESTAMP")
    row = df.groupBy(F.window("ts", "1 minute").alias("w")).count().select(
        F.col("w.end").alias("end"), F.window_time("w").alias("t")).collect()[0]
    assert (row["end"] - row["t"]).total_seconds() == pytest.approx(1e-6)


def test_aggregate_buffers_are_read_from_the_analyzed_plan(spark):
    """state.py names the columns of `streamapp state` from them (Catalyst through py4j)."""
    df = spark.createDataFrame([("a", 1.0)], "k STRING, x DOUBLE").groupBy("k").agg(
        F.expr("count(*)").alias("n"), F.expr("sum(x)").alias("total"), F.expr("avg(x)").alias("mean"),
        F.expr("count_if(x > 0)").alias("positive"))
    found = {column: (fn, buffers) for column, fn, buffers in spark_compat.aggregate_buffers(df)}
    assert found["n"] == ("Count", ("count",))
    assert found["total"] == ("Sum", ("sum",))
    assert found["mean"][1] == ("sum", "count")
    assert found["positive"][1] == ("count",), "a replaced aggregate (count_if) keeps its replacement's buffer"


def test_the_driver_log_level_of_a_jvm_logger_can_be_set(spark):
    """session.quiet_kafka_clients quiets Kafka's NetworkClient while a broker is down."""
    spark_compat.set_jvm_log_level(spark, "org.apache.kafka.clients.NetworkClient", "ERROR")
    jvm = spark.sparkContext._jvm
    level = jvm.org.apache.logging.log4j.LogManager.getLogger("org.apache.kafka.clients.NetworkClient").getLevel()
    assert level.toString() == "ERROR"


def _checkpoint_manager(spark, location: str, name: str) -> str:
    """The class Spark's CheckpointFileManager.create gives for ``location`` under the session's settings."""
    jvm = spark.sparkContext._jvm
    factory = jvm
    for part in (name.rsplit(".", 1)[0] + ".CheckpointFileManager").split("."):
        factory = getattr(factory, part)
    hadoop_conf = spark._jsparkSession.sessionState().newHadoopConf()
    return factory.create(jvm.org.apache.hadoop.fs.Path(location), hadoop_conf).getClass().getName()


def _count_per_key(spark, source, checkpoint) -> dict[str, int]:
    """A stateful count per key over a file source (availableNow, complete mode): what foreachBatch saw last."""
    seen: dict[str, int] = {}
    df = spark.readStream.schema("k STRING").json(str(source)).groupBy("k").count()
    query = (df.writeStream.outputMode("complete").option("checkpointLocation", str(checkpoint))
             .foreachBatch(lambda batch, _id: seen.update({r["k"]: r["count"] for r in batch.collect()}))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    return seen


def test_a_volume_checkpoint_is_written_through_hadoops_file_system_api_and_restores_state(spark, tmp_path):
    """runner.apply_app_sql_conf: on a volume, Spark writes checkpoint files (offsets, commits, the
    state store's) through the FileSystem-based manager found by name on this Spark, with Hadoop's
    checksum files kept, and a restarted query continues from its state; on an object store Spark's
    default (FileContext) stays."""
    from streamapp_api import load
    from streamapp_runtime.run.runner import apply_app_sql_conf

    app = load({"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": "fs-manager"},
                "spec": {"kafka": {"bootstrapServers": "127.0.0.1:9"},
                         "sources": [{"name": "in", "topic": "in", "format": "string"}],
                         "sinks": [{"from": "in", "kafka": {"topic": "out"}}]}})
    name = spark_compat.file_system_checkpoint_manager(spark)
    try:
        apply_app_sql_conf(spark, app, "s3a://bucket/apps/fs-manager")
        assert _checkpoint_manager(spark, "s3a://bucket/x", name).endswith(".FileContextBasedCheckpointFileManager")
        apply_app_sql_conf(spark, app, str(tmp_path / "ck"))
        assert _checkpoint_manager(spark, str(tmp_path / "ck"), name) == name
        source, checkpoint = tmp_path / "in", tmp_path / "ck"
        _files(source, [{"k": "a"}, {"k": "b"}, {"k": "a"}])
        assert _count_per_key(spark, source, checkpoint) == {"a": 2, "b": 1}
        _files(source, [{"k": "a"}])
        assert _count_per_key(spark, source, checkpoint) == {"a": 3, "b": 1}, "restarted: the state restored"
        state_files = [p.name for p in (checkpoint / "state").rglob("*") if p.is_file()]
        assert any(f.endswith(".crc") for f in state_files), state_files
        assert (checkpoint / "commits" / ".1.crc").exists(), "Hadoop's checksum files are kept"
    finally:
        spark.conf.unset(spark_compat.CHECKPOINT_FILE_MANAGER)


def test_a_json_source_is_parsed_once_per_record_whatever_filters_follow(spark):
    """compile/sources._parse_json: a projection Spark sees as nondeterministic keeps later filters above
    it, so from_json runs once per record (without it Spark substitutes the call into each filter)."""
    from streamapp_api import load
    from streamapp_runtime.compile.sources import ERROR, parse

    source = load({"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": "parse-once"},
                   "spec": {"kafka": {"bootstrapServers": "127.0.0.1:9"},
                            "sources": [{"name": "clicks", "topic": "clicks", "format": "json", "eventTime": "ts",
                                         "schema": {"user": "string", "event": "string", "ts": "timestamp"}}],
                            "sinks": [{"from": "clicks", "kafka": {"topic": "out"}}]}}).spec.sources[0]
    raw = spark.createDataFrame(
        [(None, b'{"user": "u1", "event": "click", "ts": "2026-01-01T00:00:00Z"}', "clicks", 0, 0, datetime(2026, 1, 1)),
         (None, b'{"user": "u2", "event": "view", "ts": "2026-01-01T00:00:01Z"}', "clicks", 0, 1, datetime(2026, 1, 1)),
         (None, b"{not json", "clicks", 0, 2, datetime(2026, 1, 1))],
        "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP")
    good = parse(raw, source, {}).where(F.col(ERROR).isNull()).where(F.col("event") == "click").where(F.col("user") != "")
    plan = good._jdf.queryExecution().optimizedPlan().toString()
    assert plan.count("from_json") == 1, plan
    assert [r["user"] for r in good.collect()] == ["u1"]
    assert [r[ERROR] for r in parse(raw, source, {}).where(F.col(ERROR).isNotNull()).collect()] == ["malformed"]


def _partitioned_by_state(spark, source, checkpoint, stream) -> list[tuple[bool, int]]:
    """(spark_compat.partitioned_by_state, the frame's partitions) of each batch of ``stream(events)``
    to a key and a JSON value, as sinks/kafka.py writes it."""
    seen: list[tuple[bool, int]] = []

    def batch(df, _id) -> None:
        by_state = spark_compat.partitioned_by_state(df)
        seen.append((by_state, len(df.rdd.glom().collect())))  # every partition read: Spark checks its state commits

    events = spark.readStream.schema("user STRING, n INT").json(str(source))
    rows = stream(events).select(F.col("user").alias("key"), F.to_json(F.struct("*")).alias("value"))
    query = (rows.writeStream.outputMode("update").foreachBatch(batch)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    return seen


def test_a_batch_out_of_an_aggregation_keeps_its_state_partitions(spark, tmp_path):
    """sinks/replay.by_content_or_state: a frame that comes out of a stateful operator through
    projections is read from the operator's partitions (the shuffle partitions); a stateless one is not."""
    source = tmp_path / "in"
    _files(source, [{"user": f"u{i % 5}", "n": i} for i in range(20)])
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    counted = _partitioned_by_state(spark, source, tmp_path / "counted",
                                    lambda events: events.groupBy("user").agg(F.sum("n").alias("n")))
    deduplicated = _partitioned_by_state(spark, source, tmp_path / "deduplicated",
                                         lambda events: events.dropDuplicates(["user"]))
    stateless = _partitioned_by_state(spark, source, tmp_path / "stateless", lambda events: events.where("n > 3"))
    assert counted == deduplicated == [(True, partitions)]
    assert [by_state for by_state, _ in stateless] == [False]
