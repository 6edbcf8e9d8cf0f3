"""Parquet and Delta Lake table sinks: where a table is, and how each write is made exactly once.

- parquet: Spark's file sink. Each micro-batch's files are listed in the folder's ``_spark_metadata``
  log under the batch id, and a batch the log already holds is skipped: a batch replayed after a
  crash adds nothing. Readers that read through the log (Spark; the tests' pyarrow reader) see every
  row once; a reader listing the folder may also see a killed batch's orphaned files.
- delta, append: Delta's streaming sink, which commits each batch with (query id, batch id) as a
  ``txn`` action in the table's log and skips a batch already committed by that query.
- delta, upsert: a MERGE by key per micro-batch in foreachBatch, with Delta's own idempotent-write
  settings (``txnAppId`` = the query's id, ``txnVersion`` = the batch id): Delta records them in the
  same commit as the MERGE and skips a commit whose version that app id already reached, so a replayed
  batch changes nothing. The query's id, not a name: a new checkpoint (a state reset) starts again at
  batch 0 under a new id, and its batches are written.

A relative table path is kept under the app's own storage (its volume or object-store location, the
parent of its state generations), in ``tables/``: a state reset keeps the table. The API's pattern
keeps such a path inside that folder (no '..', no absolute path).
"""

from __future__ import annotations

import logging
from pyspark.sql import DataFrame, SparkSession

from streamapp_api.checkpoint import join
from streamapp_api.sinks import TABLES_FOLDER, is_relative_table_path

from streamapp_runtime import spark_compat
from streamapp_runtime.compile.frame import value_columns

log = logging.getLogger("streamapp.runtime")

# Delta's SQL (MERGE INTO delta.`path`) and its path tables: set on the session of an app with a delta
# sink, before it starts (Spark reads both at session start only).
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_SESSION_CONF = {"spark.sql.extensions": DELTA_EXTENSION,
                      "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}
# Delta's idempotent writes for commands other than a DataFrame write (MERGE here): a commit carries
# (app id, version), and one whose version the app id already committed is skipped.
TXN_APP_ID, TXN_VERSION = "spark.databricks.delta.write.txnAppId", "spark.databricks.delta.write.txnVersion"


def table_location(path: str, app_base: str) -> str:
    """Where Spark writes the table: ``path`` itself (s3a://), or ``<app base>/tables/<path>``. Pure."""
    if not is_relative_table_path(path):
        return path
    location = join(app_base, TABLES_FOLDER)
    for segment in path.split("/"):
        location = join(location, segment)
    return location


def with_delta_conf(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with Delta's session extension added to any the app set, and Delta's catalog unless one
    is set. Pure."""
    out = dict(conf)
    extensions = [e.strip() for e in out.get("spark.sql.extensions", "").split(",") if e.strip()]
    if DELTA_EXTENSION not in extensions:
        out["spark.sql.extensions"] = ",".join([*extensions, DELTA_EXTENSION])
    out.setdefault("spark.sql.catalog.spark_catalog", DELTA_SESSION_CONF["spark.sql.catalog.spark_catalog"])
    return out


def table_frame(df: DataFrame, partition_by: list[str], key: list[str], where: str) -> DataFrame:
    """The columns a table gets: the stream's value columns, and metadata columns (_key, _timestamp)
    the sink names as partition or key columns."""
    named = [*partition_by, *key]
    for column in named:
        if column not in df.columns:
            raise ValueError(f"{where}: column {column!r} is not in the stream; its columns are "
                             f"{', '.join(value_columns(df.columns))}")
    columns = value_columns(df.columns) + [c for c in dict.fromkeys(named) if c.startswith("_")]
    return df.select(*[f"`{c}`" for c in columns])


def quote_path(location: str) -> str:
    """A path as a Spark SQL identifier (delta.`...`). Pure."""
    return "`" + location.replace("`", "``") + "`"


def merge_statement(location: str, view: str, key: list[str]) -> str:
    """MERGE of a batch's rows (the view) into the table by key: null keys match null keys, as a
    key's null is one value here. Pure."""
    on = " AND ".join(f"t.`{c}` <=> s.`{c}`" for c in key)
    return (f"MERGE INTO delta.{quote_path(location)} AS t USING `{view}` AS s ON {on} "
            "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")


def is_delta_table(spark: SparkSession, location: str) -> bool:
    jvm = spark.sparkContext._jvm
    return bool(jvm.io.delta.tables.DeltaTable.isDeltaTable(spark._jsparkSession, location))


def upsert_writer(location: str, key: list[str], partition_by: list[str], query: str):
    """foreachBatch function merging each batch into the Delta table at ``location`` by ``key``, once."""
    def write(df: DataFrame, batch_id: int) -> None:
        app_id = spark_compat.query_id(df)
        if not app_id:  # without it a replay could not be told from a new batch
            raise RuntimeError(f"query {query}: Spark did not give the query id to foreachBatch")
        spark = df.sparkSession  # the query's own session: the settings below reach no other query
        # One row per key: MERGE refuses two source rows for one target row. An aggregation emits one.
        rows = df.dropDuplicates(key)
        if not is_delta_table(spark, location):  # the first batch makes the table, with the same marker
            (rows.write.format("delta").mode("append").partitionBy(*partition_by)
             .option("txnAppId", app_id).option("txnVersion", batch_id).save(location))
            return
        view = f"streamapp_upsert_{app_id.replace('-', '_')}"
        rows.createOrReplaceTempView(view)
        spark.conf.set(TXN_APP_ID, app_id)
        spark.conf.set(TXN_VERSION, str(batch_id))
        try:
            spark.sql(merge_statement(location, view, key))
        finally:
            spark.conf.unset(TXN_APP_ID)
            spark.conf.unset(TXN_VERSION)
            spark.catalog.dropTempView(view)

    return write


def _batch_of(name: str) -> int | None:
    """The batch of a file-sink log entry ('7', '9.compact'), None for anything else. Pure."""
    head = name.split(".", 1)[0]
    return int(head) if head.isdigit() and name in (head, f"{head}.compact") else None


def file_log_refusal(logged: list[str], commits: list[str], location: str) -> str | None:
    """Why a parquet sink must not start: its folder's _spark_metadata log (``logged``) holds batches
    beyond the one this checkpoint (``commits``) may have left uncommitted, so Spark would skip this
    query's batches up to there as written (a state reset, another app's folder). Pure."""
    last_logged = max((b for b in map(_batch_of, logged) if b is not None), default=None)
    last_committed = max((b for b in map(_batch_of, commits) if b is not None), default=-1)
    if last_logged is None or last_logged <= last_committed + 1:
        return None
    return (f"{location} was written by another checkpoint: its _spark_metadata log reaches batch {last_logged}, "
            f"this query's checkpoint {'only ' + str(last_committed) if last_committed >= 0 else 'none'}, and "
            "Spark's file sink would skip this query's batches up to there as written (a state reset keeps "
            "the table). Move the folder away, or give the sink another path")
