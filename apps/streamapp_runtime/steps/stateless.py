"""Record-at-a-time steps: filter, select, withColumns, explode, keyBy, sql. All Spark built-ins."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamapp_api.flow import select_names

from ..frame import Frame

def apply(spark: SparkSession, frame: Frame, kind: str, value, where: str) -> Frame:
    df = frame.df
    if kind == "filter":
        return frame.with_df(df.where(F.expr(value)))
    if kind == "select":
        names, star = select_names(value)
        metadata = [c for c in df.columns if c.startswith("_") and c not in names]
        items = list(value) if star else list(value) + metadata  # _key and _timestamp travel along
        out = df.selectExpr(*items)
        keeps_time = frame.event_time in out.columns and (star or frame.event_time in names or frame.event_time in metadata)
        return frame.with_df(out, event_time=frame.event_time if keeps_time else None)
    if kind == "withColumns":
        out = df.withColumns({name: F.expr(expr) for name, expr in value.items()})
        replaced = frame.event_time in value
        return frame.with_df(out, event_time=None if replaced else frame.event_time)
    if kind == "explode":
        target = value.as_ or value.column
        fn = F.explode_outer if value.keep_empty else F.explode
        out = df.withColumn(target, fn(F.col(value.column)))
        return frame.with_df(out)
    if kind == "keyBy":
        return frame.with_df(df.withColumn("_key", F.expr(value).cast("string")))
    if kind == "sql":
        view = "input"
        df.createOrReplaceTempView(view)
        try:
            out = spark.sql(value)
        finally:
            spark.catalog.dropTempView(view)
        return frame.with_df(out, event_time=frame.event_time if frame.event_time in out.columns else None)
    raise ValueError(f"{where}: unknown step {kind!r}")
