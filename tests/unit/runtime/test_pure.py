"""Pure parts of the runtime: settings, plans, windows, Postgres statements, metrics, accumulate folding."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from streamapp_api import contract, load, resolve
from streamapp_runtime import connections, plan
from streamapp_runtime.run import settings
from streamapp_runtime.run.metrics import Metrics, offsets_behind, progress_line

pytestmark = pytest.mark.unit
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def example(name: str):
    return load(yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text()))


def test_shuffle_partitions_are_kept_once_recorded():
    counts = {"a": 3, "b": 8}
    assert settings.choose_shuffle_partitions(None, None, None, counts) == (8, "partition count of topic 'b'")
    assert settings.choose_shuffle_partitions(None, 4, "16", counts)[0] == 4
    assert settings.choose_shuffle_partitions(None, None, "16", counts)[0] == 16
    assert settings.choose_shuffle_partitions(5, 4, "16", {"a": 100})[0] == 5
    # scaling.mode load: room to grow into, unless the topics already give more
    assert settings.choose_shuffle_partitions(None, None, None, counts, grow_into=20)[0] == 20
    assert settings.choose_shuffle_partitions(None, None, None, counts, grow_into=4)[0] == 8
    assert settings.choose_shuffle_partitions(None, 4, None, counts, grow_into=20)[0] == 4
    with pytest.raises(settings.SettingsError, match="spark.sql.shuffle.partitions"):
        settings.choose_shuffle_partitions(None, None, "many", counts)


ROW_BASED, PANDAS = contract.STATE_FUNCTIONS


@pytest.mark.parametrize("recorded, conf, store, chosen", [
    ({}, None, "rocksdb", (ROW_BASED, "a new checkpoint")),
    ({}, PANDAS, "rocksdb", (PANDAS, "spark.streamapp.stateFunction")),
    ({}, None, "hdfs", (PANDAS, "spec.state.store hdfs: transformWithState needs rocksdb")),
    # recorded: kept, whatever the setting says now
    ({"shufflePartitions": 4, "stateFunction": PANDAS}, ROW_BASED, "rocksdb", (PANDAS, "recorded in the checkpoint at its first run")),
    ({"shufflePartitions": 4, "stateFunction": ROW_BASED}, PANDAS, "rocksdb", (ROW_BASED, "recorded in the checkpoint at its first run")),
    # written before the runtime recorded one: the pandas API's state
    ({"shufflePartitions": 4, "app": "a"}, ROW_BASED, "rocksdb",
     (PANDAS, "the checkpoint was written before the runtime recorded its state function")),
])
def test_the_state_function_is_chosen_once_per_checkpoint(recorded, conf, store, chosen):
    assert settings.choose_state_function(recorded, conf, store) == chosen


def test_a_state_function_that_cannot_be_used_is_named():
    with pytest.raises(settings.SettingsError, match=r"spark.streamapp.stateFunction='mapGroupsWithState': expected one of"):
        settings.choose_state_function({}, "mapGroupsWithState", "rocksdb")
    with pytest.raises(settings.SettingsError, match="needs spec.state.store rocksdb, not hdfs"):
        settings.choose_state_function({}, ROW_BASED, "hdfs")


def test_properties_and_environment():
    text = "# operator\nspark.master=k8s://https://kubernetes.default.svc\nspark.executor.instances = 3\n\n"
    assert contract.parse_properties(text) == {"spark.master": "k8s://https://kubernetes.default.svc",
                                               "spark.executor.instances": "3"}
    with pytest.raises(contract.PropertiesError, match="spark.properties:2"):
        contract.parse_properties("a=1\n=oops\n")
    env = {"STREAMAPP_KAFKA_SASL_JAAS_CONFIG": "x", "STREAMAPP_POSTGRES_PG_MAIN": "postgresql://h/db",
           "STREAMAPP_CHECKPOINT_DIR": "/ck/gen-0", "STREAMAPP_METRICS_PORT": "9191", "STREAMAPP_POD_IP": "10.0.0.7"}
    s = settings.from_environment(checkpoint=None, app_name="a", kafka=None, available_now=False, console=False,
                                  spark_conf={}, postgres={}, environ=env)
    assert (s.checkpoint_root, s.metrics_port, s.kafka_env_options) == ("/ck/gen-0", 9191, {"sasl.jaas.config": "x"})
    assert connections.postgres_uri(s.postgres_uris, "pg-main", "spec.sinks[0].postgres") == "postgresql://h/db"
    with pytest.raises(connections.MissingConnection, match=r"spec.sinks\[1\].postgres.secretRef.*STREAMAPP_POSTGRES_OTHER"):
        connections.postgres_uri(s.postgres_uris, "other", "spec.sinks[1].postgres")
    merged = settings.merge_conf({"spark.master": "k8s://x"}, settings.spark_defaults("a", "rocksdb", env))
    assert merged["spark.master"] == "k8s://x" and merged["spark.driver.host"] == "10.0.0.7"
    assert merged["spark.sql.streaming.stateStore.providerClass"] == contract.STATE_STORE_PROVIDERS["rocksdb"]
    with pytest.raises(settings.SettingsError, match="STREAMAPP_METRICS_PORT"):
        settings.metrics_port({"STREAMAPP_METRICS_PORT": "http"})


def test_environment_references_in_spark_properties_are_expanded():
    given = {"spark.master": "k8s://https://${env:KUBERNETES_SERVICE_HOST}:${env:KUBERNETES_SERVICE_PORT}", "a": "b"}
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert settings.expand_env(given, env) == {"spark.master": "k8s://https://10.0.0.1:443", "a": "b"}
    with pytest.raises(settings.SettingsError, match=r"spark.master refers to \$\{env:KUBERNETES_SERVICE_HOST\}"):
        settings.expand_env(given, {})


@pytest.mark.parametrize("value", ["${env:AWS_SECRET_ACCESS_KEY}", "x${system:user.home}", "${HOME}"])
def test_only_the_operators_keys_refer_to_the_environment(value):
    with pytest.raises(settings.SettingsError, match=r"spark.sql.session.timeZone holds '\$\{'"):
        settings.expand_env({"spark.sql.session.timeZone": value}, {"AWS_SECRET_ACCESS_KEY": "s", "HOME": "/"})


def test_query_plans_of_the_examples():
    clicks = example("click-sessions")
    plans = plan.query_plans(clicks, "/ck")
    assert [(p.name, p.kind, p.output_mode, p.counts_bad) for p in plans] == [
        ("sessions-session-summaries", "kafka", "append", ("clicks",)),  # the first sink reading clicks counts its bad records
        ("sessions-session_stats", "postgres", "append", ())]
    assert plans[0].checkpoint == "/ck/sessions-session-summaries"
    assert clicks.dead_letter_topic == "click-sessions.dlq"
    stocks = example("stock-stats")
    assert {p.reads: p.output_mode for p in plan.query_plans(stocks, "/ck") if p.kind != "dlq"} == {"daily-live": "update", "daily-final": "append"}
    assert [p.output_mode for p in plan.query_plans(example("word-count"), "/ck")] == ["update"]
    facebook = example("not-looking-at-facebook")
    lineage = resolve(facebook).lineage("notification-counts")
    assert (lineage.sources, lineage.tables, lineage.streams) == (("ticks",), ("presence",), ("notifications", "notification-counts"))
    assert [p.kind for p in plan.query_plans(facebook, "/ck")] == ["kafka", "kafka"]  # string sources: no DLQ
    assert plan.kafka_options(clicks, "h:1", {"security.protocol": "SSL"}) == {
        "kafka.bootstrap.servers": "h:1", "kafka.security.protocol": "SSL"}
    assert plan.topic_sources(example("search-clicks")) == {"searches": "searches", "search-clicks": "clicks"}


@pytest.mark.parametrize("name, options, wait", [
    ("click-sessions", {}, "50"),  # micro-batches: a short wait for the consumer's last prefetch
    ("click-sessions", {"kafka.fetch.max.wait.ms": "200"}, "200"),  # the app's own wait wins
    ("click-feed", {}, None),  # real-time mode polls without a break: Kafka's default
])
def test_micro_batch_readers_wait_briefly_for_a_fetch(name, options, wait):
    given = {"kafka.bootstrap.servers": "h:1", **options}
    readers = plan.reader_options(example(name), given)
    assert readers.get("kafka.fetch.max.wait.ms") == wait
    assert {k: v for k, v in readers.items() if k != "kafka.fetch.max.wait.ms"} == {"kafka.bootstrap.servers": "h:1"}


@pytest.mark.parametrize("schema, layout", [
    ({"uuid": "string", "time_spent": "long", "ts": "timestamp"}, "uuid:s,time_spent:l,ts:t"),
    ({"n": "BIGINT", "i": " Integer ", "x": "double", "ok": "boolean", "c": "int"}, "n:l,i:i,x:d,ok:b,c:i"),
    ({"a": "string", "price": "decimal(10,2)"}, None),  # a type the fast path does not read: from_json alone
    ({"tags": "array<string>"}, None),
    ({"day": "date"}, None),
    ({"at": "timestamp_ntz"}, None),
    ({}, None),
])
def test_the_json_fast_path_reads_flat_schemas_only(schema, layout):
    from streamapp_runtime.compile.sources import flat_json_layout

    assert flat_json_layout(schema) == layout


def test_realtime_queries_run_with_the_realtime_trigger_in_update_mode():
    feed = example("click-feed")
    plans = plan.query_plans(feed, "/ck")
    assert [(p.name, p.kind, p.output_mode, p.trigger) for p in plans] == [
        ("feed-click-feed", "kafka", "update", plan.Trigger("realtime", "300 seconds")),
        ("dlq-clicks", "dlq", "update", plan.Trigger("realtime", "300 seconds"))]  # no slot left for a micro-batch
    # --available-now catches up in micro-batches and stops
    assert {(p.output_mode, p.trigger.kind) for p in plan.query_plans(feed, "/ck", available_now=True)} == {
        ("append", "available-now")}


@pytest.mark.parametrize("master, instances, cores, task_cpus, slots", [
    ("local[2]", None, "1", "1", 2), ("local[12]", None, "1", "1", 12), ("local[*]", None, "1", "1", 8),
    ("local[4,3]", None, "1", "1", 4), ("local", None, "1", "1", 1),
    ("k8s://https://10.0.0.1:443", "3", "2", "1", 6), ("k8s://https://10.0.0.1:443", "3", "4", "2", 6),
    ("k8s://https://10.0.0.1:443", None, "2", "1", 0),
])
def test_task_slots_of_a_driver(master, instances, cores, task_cpus, slots):
    from streamapp_runtime.run.runner import task_slots

    assert task_slots(master, instances, cores, task_cpus, cpu_count=8) == slots


RAN_3 = {"batchId": 3, "numInputRows": 249, "durationMs": {"addBatch": 9, "walCommit": 1}}
IDLE_4 = {"batchId": 4, "numInputRows": 0, "durationMs": {"latestOffset": 11, "triggerExecution": 14}}


@pytest.mark.parametrize("progresses, batch", [
    ([RAN_3], 3),
    ([RAN_3, {"batchId": 4, "numInputRows": 0, "durationMs": {"addBatch": 2, "walCommit": 1}}], 4),  # a no-data batch ran
    ([RAN_3, IDLE_4], 3),  # idle after it: the next id is no batch
    ([{"batchId": 0, "numInputRows": 0, "durationMs": {"latestOffset": 5}}], -1),  # idle before any batch
    ([IDLE_4], -1),  # a restored or restarted query, idle: batch 3 was an earlier driver's, never this listener's
    ([{"batchId": 7, "numInputRows": 12, "durationMs": {}}], 7),
    ([], -1),
])
def test_the_last_batch_a_query_ran_is_not_the_id_of_its_idle_trigger(progresses, batch):
    """A stopping driver waits for its listener to see this batch: an idle query reports the next id."""
    from streamapp_runtime.run.runner import last_batch_run

    assert last_batch_run(progresses) == batch


def test_window_arguments():
    from streamapp_api import Window
    from streamapp_runtime.compile.steps.window_column import window_args

    assert window_args(Window(type="tumbling", size="1m")) == ("window", ("60 seconds",))
    assert window_args(Window(type="hopping", size="10m", advance="1m")) == ("window", ("600 seconds", "60 seconds"))
    assert window_args(Window(type="session", gap="500ms")) == ("session_window", ("500 milliseconds",))


def test_postgres_statements():
    from streamapp_runtime.sinks.postgres import Target, create_statements, last_per_key, upsert_statement

    ddl = create_statements("analytics.stats", [("k", "text"), ("w", "timestamptz"), ("n", "bigint")], ["k", "w"])
    assert ddl[0] == 'CREATE SCHEMA IF NOT EXISTS "analytics"'
    assert ddl[1] == ('CREATE TABLE IF NOT EXISTS "analytics"."stats" ("k" text NOT NULL, "w" timestamptz NOT NULL, '
                      '"n" bigint, PRIMARY KEY ("k", "w"))')
    target = Target("uri", "stats", ("k", "w", "n"), ("text", "timestamptz", "bigint"), ("k", "w"), "q")
    assert upsert_statement(target) == ('INSERT INTO "stats" ("k", "w", "n") VALUES (%s::text, %s::timestamptz, '
                                        '%s::bigint) ON CONFLICT ("k", "w") DO UPDATE SET "n" = EXCLUDED."n"')
    assert last_per_key([("a", 1, 1), ("b", 1, 2), ("a", 1, 3)], [0, 1]) == [("a", 1, 3), ("b", 1, 2)]


def test_accumulate_folding():
    from streamapp_runtime.compile.steps.accumulate import Running, fold, parse_columns, result

    assert parse_columns({"t": "sum(points)", "n": "COUNT(x)"}, "p") == [Running("t", "sum", "points"), Running("n", "count", "x")]
    with pytest.raises(ValueError, match=r"p.accumulate.columns.t: 'median\(x\)'"):
        parse_columns({"t": "median(x)"}, "p")
    running = {}
    for fn in ("sum", "count", "min", "max", "avg", "first", "last"):
        value = None
        for x in (4, None, 2, 9):
            value = fold(fn, value, x)
        running[fn] = result(fn, value)
    assert running == {"sum": 15, "count": 3, "min": 2, "max": 9, "avg": 5.0, "first": 4, "last": 9}


def test_accumulate_carries_running_values_through_a_keys_rows():
    from streamapp_runtime.compile.steps.accumulate import Running, RunningValues

    running = RunningValues((Running("total", "sum", "x"), Running("n", "count", "x"), Running("mean", "avg", "x")))
    # a row: its payload, then each running value's argument (count's: 1 where the argument is not null)
    saved, out = running(None, [("p1", 4, 1, 4), ("p2", None, None, None), ("p3", 2, 1, 2)])
    assert out == [("p1", 4, 1, 4.0), ("p2", 4, 1, 4.0), ("p3", 6, 2, 3.0)]
    saved, out = running(saved, [("p4", 3, 1, 3)])  # the next batch goes on from the saved values
    assert out == [("p4", 9, 3, 3.0)]
    assert running(None, [])[1] == []


def test_a_table_join_meets_each_stream_row_with_the_value_before_it():
    from streamapp_runtime.compile.steps.table_join import STREAM_SIDE, TABLE_SIDE, LatestTableValue

    latest = LatestTableValue()
    rows = [(STREAM_SIDE, "s1", False), (TABLE_SIDE, "gold", False), (STREAM_SIDE, "s2", False),
            (TABLE_SIDE, None, True), (STREAM_SIDE, "s3", False)]
    assert latest("silver", rows) == (None, [("s1", "silver"), ("s2", "gold"), ("s3", None)])  # None: forget the key
    assert latest(None, [(TABLE_SIDE, "new", False)]) == ("new", [])
    assert latest("gold", [(STREAM_SIDE, "s4", False)]) == ("gold", [("s4", "gold")])


def test_stream_join_column_names():
    from streamapp_runtime.compile.steps.joins import renamed_columns

    assert renamed_columns(["search_id", "ts", "_key"], ["search_id", "url", "ts", "_offset"], ["search_id"], "clicks") == {
        "url": "url", "ts": "clicks_ts"}


PROGRESS = {
    "name": "q", "batchId": 7, "numInputRows": 120, "inputRowsPerSecond": 60.0, "processedRowsPerSecond": 240.0,
    "batchDuration": 500, "timestamp": "2026-01-01T00:00:10.000Z",
    "eventTime": {"watermark": "2026-01-01T00:00:00.000Z"},
    "stateOperators": [{"numRowsTotal": 10, "memoryUsedBytes": 2048, "numRowsDroppedByWatermark": 3}],
    "sources": [{"description": "KafkaV2[Subscribe[clickstream]]", "endOffset": {"clickstream": {"0": 50, "1": 70}},
                 "latestOffset": {"clickstream": {"0": 80, "1": 70}}}],
    "sink": {"numOutputRows": 12},
}


def test_metrics_from_progress_and_the_http_endpoint():
    from streamapp_runtime.run.http_server import serve

    assert offsets_behind('{"t": {"0": 5}}', '{"t": {"0": 9, "1": 3}}') == {("t", 0): 4, ("t", 1): 3}
    metrics = Metrics("click-sessions", {"clickstream": "clicks"}, {"dlq-clicks": "clicks"})
    metrics.started("q")
    metrics.observe(PROGRESS)
    metrics.observe({**PROGRESS, "name": "dlq-clicks", "sink": {"numOutputRows": 2}, "stateOperators": []})
    assert "late dropped 3" in progress_line(PROGRESS, 30) and "lag 30" in progress_line(PROGRESS, 30)
    server = serve(metrics, 0, lambda: metrics.healthy(["q"], 60), host="127.0.0.1")
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        text = urllib.request.urlopen(f"{base}/metrics").read().decode()
        samples = {(x.name, tuple(sorted(x.labels.items()))): x.value
                   for family in text_string_to_metric_families(text) for x in family.samples}
        q = (("app", "click-sessions"), ("query", "q"))
        lag = lambda p: tuple(sorted(q + (("source", "clicks"), ("topic", "clickstream"), ("partition", p))))
        want = {
            ("streamapp_source_lag_records", lag("0")): 30, ("streamapp_source_lag_records", lag("1")): 0,
            ("streamapp_last_batch_timestamp_seconds", q): 1767225610, ("streamapp_late_rows_dropped_total", q): 3,
            ("streamapp_state_rows", q): 10, ("streamapp_state_bytes", q): 2048, ("streamapp_batch_duration_seconds", q): 0.5,
            ("streamapp_input_rows_per_second", q): 60, ("streamapp_processed_rows_per_second", q): 240,
            ("streamapp_watermark_timestamp_seconds", q): 1767225600, ("streamapp_input_rows_total", q): 120,
            ("streamapp_dead_letter_records_total", (("app", "click-sessions"), ("source", "clicks"))): 2,
        }
        assert {k: samples.get(k) for k in want} == want
        assert urllib.request.urlopen(f"{base}/healthz").status == 200
        metrics.terminated("q")
        with pytest.raises(urllib.error.HTTPError) as failed:
            urllib.request.urlopen(f"{base}/healthz")
        assert failed.value.code == 503 and b"not active" in failed.value.read()
    finally:
        server.shutdown()
    assert json.dumps(metrics.totals["q"]) == json.dumps({"input": 120, "output": 12, "late": 3, "dead": 0, "batches": 1,
                                                          "skipped": 0, "transactions": 0, "aborted": 0})


def test_a_postgres_sinks_rows_and_skipped_partitions_reach_metrics_and_the_progress_line():
    from streamapp_runtime.sinks.postgres import Written, batch_summary

    rows, skipped, line = batch_summary("q", 7, [Written(0, 5), Written(1, 4, skipped=True), Written(3, 2, skipped=True)])
    assert (rows, skipped) == (5, [1, 3])
    assert line == ("query q batch 7: 2 partition(s) (1, 3) already written by this checkpoint (a batch replayed "
                    "after a restart): not written again")
    assert batch_summary("q", 8, [Written(0, 5)]) == (5, [], None)
    metrics = Metrics("app", {}, {})
    metrics.written("q", 7, rows, len(skipped))
    progress = {"name": "q", "batchId": 7, "numInputRows": 9, "sink": {"numOutputRows": -1}}
    metrics.observe(progress)
    assert "out 5 rows (2 partition(s) skipped as already written)" in progress_line(progress, 0, metrics.sink_batches["q"])
    assert "out -" in progress_line({**progress, "batchId": 8}, 0, metrics.sink_batches["q"])  # the sink wrote nothing yet
    labels = {"app": "app", "query": "q"}
    assert metrics.registry.get_sample_value("streamapp_sink_partitions_skipped_total", labels) == 2
    assert metrics.registry.get_sample_value("streamapp_output_rows_total", labels) == 5
    assert metrics.totals["q"]["output"] == 5 and metrics.totals["q"]["skipped"] == 2


def test_exactly_once_kafka_writers_markers_summaries_and_metrics():
    from streamapp_runtime.sinks.kafka_transactions import (Written, aborted_writers, batch_summary, committed_through,
                                                            read_marker_again, writer_id)

    # One writer per query, checkpoint and partition: a new checkpoint (a state reset) never reuses one.
    assert writer_id("counts", "0c5e", 3) == "streamapp.counts.0c5e.3"
    assert writer_id("counts", "0c5e", 3) != writer_id("counts", "77aa", 3)
    # The marker is the offset batch + 1: none committed (Kafka's -1001), batch 0, batch 41.
    assert [committed_through(o) for o in (-1001, 1, 42)] == [-1, 0, 41]
    # A coordinator that moves or loads is asked again while the client timeout lasts; other errors fail the writer.
    assert [read_marker_again(name, left) for name, left in (
        ("NOT_COORDINATOR", 10), ("COORDINATOR_LOAD_IN_PROGRESS", 10), ("COORDINATOR_NOT_AVAILABLE", 10),
        ("NOT_COORDINATOR", 0), ("GROUP_AUTHORIZATION_FAILED", 10), ("_TIMED_OUT", 10))] == [
        True, True, True, False, False, False]
    rows, committed, skipped, line = batch_summary("q", 7, [Written(0, 5), Written(1, 4, skipped=True), Written(2, 3)])
    assert (rows, committed, skipped) == (8, 2, [1])
    assert line == ("query q batch 7: 1 partition(s) (1) already committed to Kafka by this checkpoint (a batch "
                    "replayed after a restart): not written again")
    assert batch_summary("q", 8, [Written(0, 5)]) == (5, 1, [], None)
    error = RuntimeError("Job aborted ... TransactionAborted: query q batch 3 partition 1: transaction streamapp.q.c.1 "
                         "aborted: fenced\n ... caused by: ... transaction streamapp.q.c.1 aborted: fenced ... "
                         "transaction streamapp.q.c.4 aborted: timed out")
    assert aborted_writers(error) == 2 and aborted_writers(RuntimeError("executor lost")) == 0

    metrics = Metrics("app", {}, {"dlq-clicks": "clicks"})
    metrics.transactions("q", committed, 0)
    metrics.transactions("q", 0, 2)
    metrics.written("dlq-clicks", 0, 3, 0)  # a dead-letter query written by foreachBatch still counts its records
    labels = {"app": "app", "query": "q"}
    assert metrics.registry.get_sample_value("streamapp_kafka_transactions_total", labels) == 2
    assert metrics.registry.get_sample_value("streamapp_kafka_transactions_aborted_total", labels) == 2
    assert metrics.registry.get_sample_value("streamapp_dead_letter_records_total", {"app": "app", "source": "clicks"}) == 3


SPARK_UNKNOWN = ("[UNRESOLVED_ROUTINE] Cannot resolve routine `cnt` on search path [`system`.`builtin`, "
                 "`system`.`session`, `spark_catalog`.`default`]. SQLSTATE: 42883")


def test_an_unknown_function_is_named_with_its_column_and_the_closest_spark_functions():
    from streamapp_api.steps import Aggregate
    from streamapp_runtime.compile.steps import refusal

    agg = Aggregate.model_validate({"groupBy": ["user"], "columns": {"n": "cnt(*)", "total": "sum(amount)"}})
    functions = ["count", "count_if", "sum", "cot", "concat"]
    assert refusal(SPARK_UNKNOWN, "spec.streams[0].steps[2]", "aggregate", agg, functions) == (
        "spec.streams[0].steps[2].aggregate.columns.n: cnt() is not a Spark SQL function; did you mean count(), cot() or concat()?")
    assert refusal(SPARK_UNKNOWN, "spec.streams[0].steps[0]", "filter", "cnt(x) > 1", []) == (
        "spec.streams[0].steps[0].filter: cnt() is not a Spark SQL function")
    other = "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name `amout` cannot be resolved."
    assert refusal(other, "spec.streams[0].steps[0]", "filter", "amout > 1", []) == f"spec.streams[0].steps[0].filter: Spark refused it: {other}"


def test_a_batch_whose_sources_do_not_know_the_newest_offsets_has_no_lag_rather_than_zero():
    from streamapp_runtime.run.metrics import batch_lag

    known = {"sources": [{"endOffset": {"t": {"0": 5}}, "latestOffset": {"t": {"0": 9}}},
                         {"endOffset": {"u": {"0": 1}}, "latestOffset": {"u": {"0": 3}}}]}
    assert batch_lag(known) == 6
    replayed = {"sources": [{"endOffset": {"t": {"0": 5}}, "latestOffset": None}]}
    assert batch_lag(replayed) is None
    assert "lag" not in progress_line({"name": "q", "batchId": 3, **replayed}, batch_lag(replayed))
    assert batch_lag({"sources": []}) == 0


def test_checkpoint_files_take_paths_and_file_uris_and_name_what_they_cannot_read(tmp_path):
    from streamapp_runtime.checkpoint import files as checkpoint_files

    root = str(tmp_path / "gen-0")
    checkpoint_files.write_text(checkpoint_files.join(root, "streamapp.json"), "{}\n")
    assert checkpoint_files.read_text(f"file://{root}/streamapp.json") == "{}\n"
    assert checkpoint_files.names(root) == ["streamapp.json"] and checkpoint_files.names(root + "/none") == []
    assert checkpoint_files.read_text(root + "/missing.json") is None
    # Another scheme is not read with the os module (names/read_text/write_text go through Spark's
    # Hadoop FileSystem for it, tested on the test bed's S3 server: test_restart).
    with pytest.raises(checkpoint_files.UnsupportedLocation, match=r"'s3a://bucket/app/gen-0/commits' is not a local"):
        checkpoint_files.local_path("s3a://bucket/app/gen-0/commits")


@pytest.mark.parametrize("trigger, available_now, floor, expected", [
    (None, False, 0, plan.Trigger("asap")),
    ("5s", False, 0, plan.Trigger("interval", "5 seconds")),
    ("5s", False, plan.DLQ_MIN_INTERVAL_S, plan.Trigger("interval", "10 seconds")),  # the dead-letter query's floor
    ("1m", False, plan.DLQ_MIN_INTERVAL_S, plan.Trigger("interval", "60 seconds")),
    ("1m", True, plan.DLQ_MIN_INTERVAL_S, plan.Trigger("available-now")),
])
def test_each_query_plan_carries_its_trigger(trigger, available_now, floor, expected):
    clicks = example("click-sessions")
    app = clicks.model_copy(update={"spec": clicks.spec.model_copy(update={"trigger": trigger})})
    assert plan.trigger(app, available_now, floor) == expected


def test_sources_are_named_as_spark_takes_them_once_per_read_in_a_query():
    from streamapp_runtime.compile.compiler import Compiler
    from streamapp_runtime.compile.sources import spark_source_name

    assert spark_source_name("click-events") == "click_events"
    assert spark_source_name("orders_v2") == "orders_v2"
    compiler = Compiler(None, example("search-clicks"), {})  # naming needs no session
    assert [compiler.source_name(n) for n in ("clicks", "searches", "clicks", "clicks")] == \
        ["clicks", "searches", "clicks_2", "clicks_3"]
    compiler.new_query()  # as query_frame does for each query
    assert compiler.source_name("clicks") == "clicks"


def test_a_drivers_first_batch_is_told_with_its_longest_phases():
    from streamapp_runtime.run.listener import first_batch_words

    progress = {"batchId": 7, "durationMs": {"triggerExecution": 37210, "addBatch": 30120, "queryPlanning": 2310,
                                             "getBatch": 5, "latestOffset": 812, "walCommit": 120, "commitOffsets": 60}}
    assert first_batch_words(progress) == ("batch 7 in 37.2s (addBatch 30.1s, queryPlanning 2.3s, latestOffset 0.8s, "
                                           "walCommit 0.1s)")
    assert first_batch_words({"batchId": 0}) == "batch 0 in 0.0s ()"
