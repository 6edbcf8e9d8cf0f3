"""Record-at-a-time steps: filter, select, withColumns, explode, keyBy, sql. All Spark built-ins."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamapp_api.flow import select_names

from streamapp_runtime.compile.frame import Frame, StepError


def apply(spark: SparkSession, frame: Frame, kind: str, value, where: str, keeps_time: bool = True) -> Frame:
    """``keeps_time``: whether the event time survives this step, as the API resolved it (a select
    that leaves it out, a withColumns that replaces it); the frame keeps tracking which column holds it."""
    df = frame.df

    def timed(out) -> Frame:
        return frame.with_df(out, event_time=frame.event_time if keeps_time and frame.event_time in out.columns else None)

    if kind == "filter":
        return frame.with_df(df.where(F.expr(value)))
    if kind == "select":
        names, star = select_names(value)
        metadata = [c for c in df.columns if c.startswith("_") and c not in names]
        items = list(value) if star else list(value) + metadata  # _key and _timestamp travel along
        return timed(df.selectExpr(*items))
    if kind == "withColumns":
        return timed(df.withColumns({name: F.expr(expr) for name, expr in value.items()}))
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
        return timed(out)
    raise StepError(f"{where}: unknown step {kind!r}")
