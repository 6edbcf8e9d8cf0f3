"""Record-at-a-time steps: filter, select, withColumns, explode, keyBy, sql. All Spark built-ins."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamapp_api import Explode
from streamapp_api.flow import select_names

from streamapp_runtime.compile.frame import Frame


def _timed(frame: Frame, out: DataFrame, keeps_time: bool) -> Frame:
    """``keeps_time``: whether the event time survives the step, as the API resolved it (a select that
    leaves it out, a withColumns that replaces it); the frame keeps tracking which column holds it."""
    return frame.with_df(out, event_time=frame.event_time if keeps_time and frame.event_time in out.columns else None)


def filter_rows(frame: Frame, condition: str) -> Frame:
    return frame.with_df(frame.df.where(F.expr(condition)))


def select(frame: Frame, items: list[str], keeps_time: bool) -> Frame:
    names, star = select_names(items)
    metadata = [c for c in frame.df.columns if c.startswith("_") and c not in names]
    chosen = list(items) if star else list(items) + metadata  # _key and _timestamp travel along
    return _timed(frame, frame.df.selectExpr(*chosen), keeps_time)


def with_columns(frame: Frame, columns: dict[str, str], keeps_time: bool) -> Frame:
    return _timed(frame, frame.df.withColumns({name: F.expr(expr) for name, expr in columns.items()}), keeps_time)


def explode(frame: Frame, value: Explode) -> Frame:
    target = value.as_ or value.column
    fn = F.explode_outer if value.keep_empty else F.explode
    return frame.with_df(frame.df.withColumn(target, fn(F.col(value.column))))


def key_by(frame: Frame, expression: str) -> Frame:
    return frame.with_df(frame.df.withColumn("_key", F.expr(expression).cast("string")))


def sql(spark: SparkSession, frame: Frame, query: str, keeps_time: bool) -> Frame:
    view = "input"
    frame.df.createOrReplaceTempView(view)
    try:
        out = spark.sql(query)
    finally:
        spark.catalog.dropTempView(view)
    return _timed(frame, out, keeps_time)
