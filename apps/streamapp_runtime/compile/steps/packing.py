"""Carry whole rows through a Python state function as one JSON string, and back.

The state functions (table joins, accumulate) only need a key, an order and a few values; the rest of
the row rides along untouched, whatever its schema, and is restored with the same Spark types.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from streamapp_api.durations import parse_duration, spark_interval

from streamapp_runtime import spark_compat

from streamapp_runtime.compile.frame import Frame
from streamapp_runtime.compile.sources import JSON_OPTIONS

PAYLOAD = "__payload"
ORDER_TIME = "__order_ts"
ORDER_OFFSET = "__order_offset"


def pack(df: DataFrame) -> Column:
    return F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns]), JSON_OPTIONS).alias(PAYLOAD)


def order_columns(frame: Frame, record_time: bool = False) -> list[Column]:
    """Processing order inside a batch: event time (or, for table joins, the Kafka record time), then offset."""
    df = frame.df
    candidates = ["_timestamp", frame.event_time] if record_time else [frame.event_time, "_timestamp"]
    time = next((c for c in candidates if c and c in df.columns), None)
    # microseconds, not a timestamp: the row-based state API turns each value into a Python object,
    # and an int costs less than a datetime; the order is the same
    ts = F.unix_micros(F.col(time).cast("timestamp")) if time else F.lit(None).cast("long")
    offset = F.col("_offset") if "_offset" in df.columns else F.lit(0).cast("long")
    return [ts.alias(ORDER_TIME), offset.cast("long").alias(ORDER_OFFSET)]


def unpack(df: DataFrame, schema: StructType, column: str = PAYLOAD) -> list[Column]:
    parsed = F.from_json(F.col(column), schema, JSON_OPTIONS)
    return [parsed.getField(field.name).alias(field.name) for field in schema.fields]


def rewatermark(frame: Frame, df: DataFrame, passed_through: bool = False) -> Frame:
    """A row that went through a state function lost its event-time mark; declare it again. When the
    state operator passed the query's watermark through (``passed_through``: keyed_state), Spark
    refuses a second declaration: the event-time column is marked as carrying the one it has."""
    if frame.watermark is None or frame.event_time not in df.columns:
        return frame.with_df(df)
    if passed_through:
        delay_ms = int(parse_duration(frame.watermark).total_seconds() * 1000)
        marked = spark_compat.carries_watermark(F.col(f"`{frame.event_time}`"), frame.event_time, delay_ms)
        return frame.with_df(df.select(*[marked if c == frame.event_time else F.col(f"`{c}`") for c in df.columns]))
    return frame.with_df(df.withWatermark(frame.event_time, spark_interval(frame.watermark)))
