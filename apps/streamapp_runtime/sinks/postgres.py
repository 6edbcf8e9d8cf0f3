"""Postgres sink: idempotent upsert by primary key inside foreachBatch, exactly-once in effect.

Every partition of a micro-batch is written in one transaction that first records
(query, checkpoint id, batch id, partition) in ``streamapp_batches``; when that row already exists the
partition was written before (a batch replayed after a crash) and nothing is written twice. A replayed
batch gives each partition the same rows: ``replay.by_content`` partitions them by primary key.

The checkpoint id is Spark's query id, which the checkpoint keeps for its whole life: batch numbers
start at 0 again in a new checkpoint (a state reset, a checkpoint deleted by hand, a second app on the
same table), so a batch id alone would make the new run's batches look written and skip them all.
Skipped partitions are logged and counted, never silent.
"""

from __future__ import annotations

import re
import logging
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamapp_runtime import spark_compat
from streamapp_runtime.sinks import replay
from streamapp_runtime.compile.frame import value_columns

BATCHES = "streamapp_batches"
log = logging.getLogger("streamapp.runtime")


@dataclass(frozen=True)
class Target:
    uri: str
    table: str
    columns: tuple[str, ...]
    casts: tuple[str, ...]  # SQL type each parameter is cast to
    primary_key: tuple[str, ...]
    query: str


def pg_type(dt: T.DataType) -> str:
    """Postgres column type of a Spark type. Pure."""
    simple = {
        T.StringType: "text", T.LongType: "bigint", T.IntegerType: "integer", T.ShortType: "smallint",
        T.ByteType: "smallint", T.DoubleType: "double precision", T.FloatType: "real", T.BooleanType: "boolean",
        T.TimestampType: "timestamptz", T.TimestampNTZType: "timestamp", T.DateType: "date", T.BinaryType: "bytea",
    }
    for cls, name in simple.items():
        if isinstance(dt, cls):
            return name
    if isinstance(dt, T.DecimalType):
        return f"numeric({dt.precision},{dt.scale})"
    return "jsonb"


def quote(name: str) -> str:
    return ".".join(f'"{part}"' for part in name.split("."))


def create_statements(table: str, columns: list[tuple[str, str]], primary_key: list[str]) -> list[str]:
    """DDL for the target table and the batch record. Pure."""
    statements = []
    if "." in table:
        statements.append(f"CREATE SCHEMA IF NOT EXISTS {quote(table.split('.')[0])}")
    cols = ", ".join(f"{quote(c)} {t}" + (" NOT NULL" if c in primary_key else "") for c, t in columns)
    pk = ", ".join(quote(c) for c in primary_key)
    statements.append(f"CREATE TABLE IF NOT EXISTS {quote(table)} ({cols}, PRIMARY KEY ({pk}))")
    return statements + ledger_statements()


def ledger_statements() -> list[str]:
    """DDL of the batch ledger, and the migration of a ledger that 0.1 keyed without the checkpoint
    (its rows keep checkpoint_id '', which no checkpoint has: at most one batch is written again). Pure."""
    return [
        f"CREATE TABLE IF NOT EXISTS {BATCHES} (query text NOT NULL, checkpoint_id text NOT NULL, "
        "batch_id bigint NOT NULL, partition integer NOT NULL, rows integer NOT NULL, "
        "written_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (query, checkpoint_id, batch_id, partition))",
        f"ALTER TABLE {BATCHES} ADD COLUMN IF NOT EXISTS checkpoint_id text NOT NULL DEFAULT ''",
        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        f"AND a.attnum = ANY(i.indkey) WHERE i.indrelid = '{BATCHES}'::regclass AND i.indisprimary "
        f"AND a.attname = 'checkpoint_id') THEN ALTER TABLE {BATCHES} DROP CONSTRAINT {BATCHES}_pkey, "
        "ADD PRIMARY KEY (query, checkpoint_id, batch_id, partition); END IF; END $$",
    ]


def upsert_statement(target: Target) -> str:
    """INSERT ... ON CONFLICT (pk) DO UPDATE. Pure."""
    cols = ", ".join(quote(c) for c in target.columns)
    params = ", ".join(f"%s::{t}" for t in target.casts)
    pk = ", ".join(quote(c) for c in target.primary_key)
    updates = [f"{quote(c)} = EXCLUDED.{quote(c)}" for c in target.columns if c not in target.primary_key]
    action = f"DO UPDATE SET {', '.join(updates)}" if updates else "DO NOTHING"
    return f"INSERT INTO {quote(target.table)} ({cols}) VALUES ({params}) ON CONFLICT ({pk}) {action}"


def last_per_key(rows: list[tuple], key_positions: list[int]) -> list[tuple]:
    """Keep the last row of each primary key (one statement cannot update a row twice). Pure."""
    latest: dict[tuple, tuple] = {}
    for row in rows:
        latest[tuple(row[i] for i in key_positions)] = row
    return list(latest.values())


def columns_of(df: DataFrame, primary_key: list[str], where: str) -> list[tuple[str, str]]:
    names = value_columns(df.columns) + [c for c in primary_key if c.startswith("_")]
    for k, column in enumerate(primary_key):
        if column not in df.columns:
            raise ValueError(f"{where}.postgres.primaryKey[{k}]: column {column!r} is not in the stream; its "
                             f"columns are {', '.join(value_columns(df.columns))}")
    types = dict((f.name, f.dataType) for f in df.schema.fields)
    for name in names:
        if not re.match(r"^[a-z_][a-z0-9_]*$", name):
            raise ValueError(f"{where}: column {name!r} is not a lowercase Postgres identifier; rename it with select")
    return [(c, pg_type(types[c])) for c in names]


def prepare(df: DataFrame, columns: list[tuple[str, str]]) -> DataFrame:
    """Values as text Postgres parses exactly (timestamps in UTC, nested values as JSON)."""
    out = []
    for name, pg in columns:
        col = F.col(f"`{name}`")
        if pg == "timestamptz":
            col = F.date_format(col, "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX")
        elif pg == "timestamp":
            col = F.date_format(col, "yyyy-MM-dd'T'HH:mm:ss.SSSSSS")
        elif pg == "jsonb":
            col = F.to_json(col) if not isinstance(df.schema[name].dataType, T.NullType) else F.lit(None).cast("string")
        elif pg not in ("bytea",):
            col = col.cast("string")
        out.append(col.alias(name))
    return df.select(*out)


def ensure_tables(uri: str, statements: list[str]) -> None:
    import psycopg

    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(72231)")  # queries starting together create tables one at a time
        try:
            for statement in statements:
                conn.execute(statement)
        finally:
            conn.execute("SELECT pg_advisory_unlock(72231)")


@dataclass(frozen=True)
class Written:
    """What one partition of a batch did: rows upserted, or skipped as written before."""

    partition: int
    rows: int
    skipped: bool = False


def write_partition(target: Target, checkpoint_id: str, batch_id: int, partition: int, rows) -> list[Written]:
    """Runs on an executor: one transaction per partition, skipped when already recorded."""
    import psycopg

    data = [tuple(row[c] for c in target.columns) for row in rows]
    if not data:
        return []
    key_positions = [target.columns.index(c) for c in target.primary_key]
    data = last_per_key(data, key_positions)
    with psycopg.connect(target.uri) as conn:
        with conn.transaction():
            recorded = conn.execute(
                f"INSERT INTO {BATCHES} (query, checkpoint_id, batch_id, partition, rows) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT DO NOTHING RETURNING 1",
                (target.query, checkpoint_id, batch_id, partition, len(data))).fetchone()
            if recorded is None:  # this partition of this batch was committed before: a replay writes nothing
                return [Written(partition, len(data), skipped=True)]
            with conn.cursor() as cur:
                cur.executemany(upsert_statement(target), data)
    return [Written(partition, len(data))]


def batch_summary(query: str, batch_id: int, written: list[Written]) -> tuple[int, list[int], str | None]:
    """(rows upserted, partitions skipped, the line to log when any was skipped). Pure."""
    rows = sum(w.rows for w in written if not w.skipped)
    skipped = sorted(w.partition for w in written if w.skipped)
    if not skipped:
        return rows, skipped, None
    return rows, skipped, (f"query {query} batch {batch_id}: {len(skipped)} partition(s) ({', '.join(map(str, skipped))}) "
                           f"already written by this checkpoint (a batch replayed after a restart): not written again")


def batch_writer(target: Target, columns: list[tuple[str, str]],
                 on_written: Callable[[str, int, int, int], None] = lambda *_: None):
    """foreachBatch function; ``on_written(query, batch id, rows upserted, partitions skipped)``."""
    def write(df: DataFrame, batch_id: int) -> None:
        checkpoint_id = spark_compat.query_id(df)
        if not checkpoint_id:  # without it the ledger cannot tell this checkpoint's batches from another's
            raise RuntimeError(f"query {target.query}: Spark did not give the query id to foreachBatch")
        prepared = prepare(df, columns)
        written = replay.by_content(prepared, list(target.primary_key)).rdd.mapPartitionsWithIndex(
            lambda partition, rows: write_partition(target, checkpoint_id, batch_id, partition, rows)).collect()
        rows, skipped, line = batch_summary(target.query, batch_id, written)
        if line:
            log.warning(line)
        on_written(target.query, batch_id, rows, len(skipped))

    return write
