"""Pure parts of the runtime: settings, plans, windows, Postgres statements, metrics, accumulate folding."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from streamapp_api import load
from streamapp_runtime import plan, settings
from streamapp_runtime.metrics import Metrics, offsets_behind, progress_line

pytestmark = pytest.mark.unit
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example(name: str):
    return load(yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text()))


def test_shuffle_partitions_are_kept_once_recorded():
    counts = {"a": 3, "b": 8}
    assert settings.choose_shuffle_partitions(None, None, None, counts) == (8, "partition count of topic 'b'")
    assert settings.choose_shuffle_partitions(None, 4, "16", counts)[0] == 4
    assert settings.choose_shuffle_partitions(None, None, "16", counts)[0] == 16
    assert settings.choose_shuffle_partitions(5, 4, "16", {"a": 100})[0] == 5
    with pytest.raises(settings.SettingsError, match="spark.sql.shuffle.partitions"):
        settings.choose_shuffle_partitions(None, None, "many", counts)


def test_properties_and_environment():
    text = "# operator\nspark.master=k8s://https://kubernetes.default.svc\nspark.executor.instances = 3\n\n"
    assert settings.parse_properties(text) == {"spark.master": "k8s://https://kubernetes.default.svc",
                                               "spark.executor.instances": "3"}
    with pytest.raises(settings.SettingsError, match="spark.properties:2"):
        settings.parse_properties("a=1\n=oops\n")
    env = {"STREAMAPP_KAFKA_SASL_JAAS_CONFIG": "x", "STREAMAPP_POSTGRES_PG_MAIN": "postgresql://h/db",
           "STREAMAPP_CHECKPOINT_DIR": "/ck/gen-0", "STREAMAPP_METRICS_PORT": "9191", "STREAMAPP_POD_IP": "10.0.0.7"}
    s = settings.from_environment(checkpoint=None, app_name="a", kafka=None, available_now=False, console=False,
                                  spark_conf={}, postgres={}, environ=env)
    assert (s.checkpoint_root, s.metrics_port, s.kafka_env_options) == ("/ck/gen-0", 9191, {"sasl.jaas.config": "x"})
    assert settings.postgres_uri(s, "pg-main", "spec.sinks[0].postgres") == "postgresql://h/db"
    with pytest.raises(settings.SettingsError, match=r"spec.sinks\[1\].postgres.secretRef.*STREAMAPP_POSTGRES_OTHER"):
        settings.postgres_uri(s, "other", "spec.sinks[1].postgres")
    merged = settings.merge_conf({"spark.master": "k8s://x"}, settings.spark_defaults("a", "rocksdb", env))
    assert merged["spark.master"] == "k8s://x" and merged["spark.driver.host"] == "10.0.0.7"
    assert merged["spark.sql.streaming.stateStore.providerClass"] == settings.ROCKSDB_PROVIDER
    with pytest.raises(settings.SettingsError, match="STREAMAPP_METRICS_PORT"):
        settings.metrics_port({"STREAMAPP_METRICS_PORT": "http"})


def test_environment_references_in_spark_properties_are_expanded():
    given = {"spark.master": "k8s://https://${env:KUBERNETES_SERVICE_HOST}:${env:KUBERNETES_SERVICE_PORT}", "a": "b"}
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert settings.expand_env(given, env) == {"spark.master": "k8s://https://10.0.0.1:443", "a": "b"}
    with pytest.raises(settings.SettingsError, match=r"spark.master refers to \$\{env:KUBERNETES_SERVICE_HOST\}"):
        settings.expand_env(given, {})


def test_query_plans_of_the_examples():
    clicks = example("click-sessions")
    plans = plan.query_plans(clicks, "/ck")
    assert [(p.name, p.kind, p.output_mode) for p in plans] == [
        ("sessions-session-summaries", "kafka", "append"), ("sessions-session_stats", "postgres", "append"),
        ("dlq-clicks", "dlq", "append")]
    assert plans[0].checkpoint == "/ck/sessions-session-summaries"
    assert plan.dlq_topic(clicks) == "click-sessions.dlq"
    stocks = example("stock-stats")
    assert plan.emit_mode(stocks, "daily-live") == "updates" and plan.emit_mode(stocks, "daily-final") == "final"
    assert plan.emit_mode(example("word-count"), "word-counts") == "updates"
    facebook = example("not-looking-at-facebook")
    assert plan.lineage(facebook, "notification-counts") == plan.Lineage(("ticks",), ("presence",), ("notifications", "notification-counts"))
    assert [p.kind for p in plan.query_plans(facebook, "/ck")] == ["kafka", "kafka"]  # string sources: no DLQ
    assert plan.kafka_options(clicks, "h:1", {"security.protocol": "SSL"}) == {
        "kafka.bootstrap.servers": "h:1", "kafka.security.protocol": "SSL"}
    assert plan.topic_sources(example("search-clicks")) == {"searches": "searches", "search-clicks": "clicks"}


def test_window_arguments():
    from streamapp_api import Window
    from streamapp_runtime.windows import window_args

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
    from streamapp_runtime.steps.accumulate import Running, fold, parse_columns, result

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


def test_stream_join_column_names():
    from streamapp_runtime.steps.joins import renamed_columns

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
    from streamapp_runtime.http_server import serve

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
    assert json.dumps(metrics.totals["q"]) == json.dumps({"input": 120, "output": 12, "late": 3, "dead": 0, "batches": 1})
