"""Sinks: one writer per kind of query (``WRITERS``), each in two halves. ``frame`` builds the
DataFrame the query writes (pure analysis: what ``streamapp run --dry-run`` checks); ``writer`` turns
it into a DataStreamWriter, with the sink's side effects (a Postgres table created). The runner adds
what every query has (name, output mode, checkpoint, trigger) and starts it.

A new sink: a module here with its frame and writer, and a row in WRITERS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter

from streamapp_api import StreamApp
from streamapp_api.schema_registry import Registry
from streamapp_api.sinks import Sink

from streamapp_runtime.compile.compiler import Compiler
from streamapp_runtime.compile.dlq import dead_letters
from streamapp_runtime.compile.frame import INTERNAL_PREFIX
from streamapp_runtime.connections import admin_config, postgres_uri
from streamapp_runtime.plan import REGISTRY_URL_OPTION, REGISTRY_USER_INFO_OPTION, QueryPlan, reader_options, spark_kafka_options
from streamapp_runtime.sinks import kafka as kafka_sink
from streamapp_runtime.sinks import kafka_transactions as kafka_eos
from streamapp_runtime.sinks import postgres as pg_sink
from streamapp_runtime.sinks import tables


class SinkSettings(Protocol):
    """What a sink reads of the runtime's settings (run.settings.Settings)."""

    @property
    def postgres_uris(self) -> dict[str, str]: ...  # connections.postgres_uri's

    @property
    def spark_conf(self) -> dict[str, str]: ...

    @property
    def app_base(self) -> str: ...  # the app's own storage: relative table paths are under it


class SinkMetrics(Protocol):
    """What a sink reports to the runtime's metrics (run.metrics.Metrics)."""

    def written(self, query: str, batch_id: int, rows: int, skipped: int) -> None: ...

    def transactions(self, query: str, committed: int, aborted: int) -> None: ...


@dataclass(frozen=True)
class QueryContext:
    """What a sink writer may use: the session, the compiled app, the settings and Kafka options."""

    spark: SparkSession
    compiler: Compiler
    app: StreamApp
    settings: SinkSettings
    options: dict[str, str]
    metrics: SinkMetrics

    def sink(self, qp: QueryPlan) -> Sink:
        return self.app.spec.sinks[qp.index]


@dataclass(frozen=True)
class SinkWriter:
    frame: Callable[[QueryContext, QueryPlan], DataFrame]
    writer: Callable[[QueryContext, QueryPlan, DataFrame], DataStreamWriter]
    # What the session needs before it starts for this kind (Spark reads extensions at start only).
    session_conf: Callable[[dict[str, str]], dict[str, str]] | None = None


def _where(qp: QueryPlan) -> str:
    return f"spec.sinks[{qp.index}]"


def _stream(ctx: QueryContext, qp: QueryPlan) -> DataFrame:
    return ctx.compiler.query_frame(qp.reads, qp.counts_bad).df


def _console_frame(ctx: QueryContext, qp: QueryPlan) -> DataFrame:
    df = _stream(ctx, qp)
    return df.select(*[c for c in df.columns if not c.startswith(INTERNAL_PREFIX)])


def _console_writer(ctx: QueryContext, qp: QueryPlan, df: DataFrame) -> DataStreamWriter:
    return df.writeStream.format("console").option("truncate", "false").option("numRows", "50")


def _kafka_frame(ctx: QueryContext, qp: QueryPlan) -> DataFrame:
    df, sink, where = _stream(ctx, qp), ctx.sink(qp).kafka, _where(qp)
    return kafka_sink.kafka_rows(df, kafka_sink.key_column(df, sink.key, where), kafka_sink.formats(sink, where, qp.name))


def _to_kafka(ctx: QueryContext, qp: QueryPlan, df: DataFrame, topic: str, delivery: str) -> DataStreamWriter:
    """Spark's Kafka sink (at-least-once), or one Kafka transaction per batch partition (exactly-once)."""
    if delivery == "exactly-once":
        target = kafka_eos.Target(admin_config(ctx.options), topic, qp.name)
        return df.writeStream.foreachBatch(kafka_eos.batch_writer(target, ctx.metrics.written, ctx.metrics.transactions))
    return df.writeStream.format("kafka").options(**spark_kafka_options(ctx.options)).option("topic", topic)


def _kafka_writer(ctx: QueryContext, qp: QueryPlan, df: DataFrame) -> DataStreamWriter:
    sink, url = ctx.sink(qp).kafka, ctx.options.get(REGISTRY_URL_OPTION)
    registry = None if url is None else Registry(url, ctx.options.get(REGISTRY_USER_INFO_OPTION))
    df = kafka_sink.encoded(df, kafka_sink.formats(sink, _where(qp), qp.name, registry))
    return _to_kafka(ctx, qp, df, sink.topic, sink.delivery)


def _postgres_frame(ctx: QueryContext, qp: QueryPlan) -> DataFrame:
    df = _stream(ctx, qp)
    pg_sink.columns_of(df, list(ctx.sink(qp).postgres.primary_key), _where(qp))  # refuses what cannot be written
    return df


def _postgres_writer(ctx: QueryContext, qp: QueryPlan, df: DataFrame) -> DataStreamWriter:
    pg, where = ctx.sink(qp).postgres, _where(qp)
    uri = postgres_uri(ctx.settings.postgres_uris, pg.secret_ref.name, f"{where}.postgres")
    columns = pg_sink.columns_of(df, list(pg.primary_key), where)
    statements = pg_sink.create_statements(pg.table, columns, list(pg.primary_key))
    # Without createTable the user's table must exist; the ledger is ours and always made.
    pg_sink.ensure_tables(uri, statements if pg.create_table else pg_sink.ledger_statements())
    target = pg_sink.Target(uri, pg.table, tuple(c for c, _ in columns), tuple(t for _, t in columns),
                            tuple(pg.primary_key), qp.name)
    return df.writeStream.foreachBatch(pg_sink.batch_writer(target, columns, ctx.metrics.written))


def _parquet_frame(ctx: QueryContext, qp: QueryPlan) -> DataFrame:
    sink = ctx.sink(qp).parquet
    return tables.table_frame(_stream(ctx, qp), list(sink.partition_by), [], f"{_where(qp)}.parquet")


def _parquet_writer(ctx: QueryContext, qp: QueryPlan, df: DataFrame) -> DataStreamWriter:
    from streamapp_runtime.checkpoint import files

    sink = ctx.sink(qp).parquet
    location = tables.table_location(sink.path, ctx.settings.app_base)
    refusal = tables.file_log_refusal(files.names(f"{location}/_spark_metadata"), files.names(f"{qp.checkpoint}/commits"),
                                      location)
    if refusal:
        raise ValueError(f"{_where(qp)}.parquet.path: {refusal}")
    return df.writeStream.format("parquet").option("path", location).partitionBy(*sink.partition_by)


def _delta_frame(ctx: QueryContext, qp: QueryPlan) -> DataFrame:
    sink = ctx.sink(qp).delta
    return tables.table_frame(_stream(ctx, qp), list(sink.partition_by), list(sink.key or []), f"{_where(qp)}.delta")


def _delta_writer(ctx: QueryContext, qp: QueryPlan, df: DataFrame) -> DataStreamWriter:
    sink = ctx.sink(qp).delta
    location = tables.table_location(sink.path, ctx.settings.app_base)
    if sink.mode == "upsert":
        return df.writeStream.foreachBatch(tables.upsert_writer(location, list(sink.key or []), list(sink.partition_by),
                                                                qp.name))
    return df.writeStream.format("delta").option("path", location).partitionBy(*sink.partition_by)


def session_conf(app: StreamApp, conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with what the app's sink kinds need of the session (WRITERS' session_conf)."""
    for kind in dict.fromkeys(sink.kind for sink in app.spec.sinks):
        extra = WRITERS[kind].session_conf
        if extra is not None:
            conf = extra(conf)
    return conf


def _dlq_frame(ctx: QueryContext, qp: QueryPlan) -> DataFrame:
    source = next(s for s in ctx.app.spec.sources if s.name == qp.reads)
    return dead_letters(ctx.spark, source, reader_options(ctx.app, ctx.options))


def _dlq_writer(ctx: QueryContext, qp: QueryPlan, df: DataFrame) -> DataStreamWriter:
    return _to_kafka(ctx, qp, df, ctx.app.dead_letter_topic, ctx.app.spec.dead_letter.delivery)


WRITERS: dict[str, SinkWriter] = {
    "console": SinkWriter(_console_frame, _console_writer),
    "kafka": SinkWriter(_kafka_frame, _kafka_writer),
    "postgres": SinkWriter(_postgres_frame, _postgres_writer),
    "parquet": SinkWriter(_parquet_frame, _parquet_writer),
    "delta": SinkWriter(_delta_frame, _delta_writer, tables.with_delta_conf),
    "dlq": SinkWriter(_dlq_frame, _dlq_writer),
}
