"""Kafka sink: the value columns in the sink's value format (sinks/kafka_values.py), the key from the
sink's key or the record key.

Delivery is at-least-once: a batch replayed after a crash is written again. Keys are deterministic
(the same record gives the same key and value), so a compacted topic or a consumer keyed on them
converges to the same content.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamapp_runtime.compile.frame import INTERNAL_PREFIX, value_columns
from streamapp_runtime.sinks.kafka_values import ENCODERS, ValueTarget


def key_column(df: DataFrame, key: str | None, where: str) -> str | None:
    if key is not None:
        if key not in df.columns:
            shown = ", ".join(c for c in df.columns if not c.startswith(INTERNAL_PREFIX))
            raise ValueError(f"{where}.kafka.key: column {key!r} is not in the stream; its columns are {shown}")
        return key
    return "_key" if "_key" in df.columns else None


def kafka_rows(df: DataFrame, key: str | None, value_format: str = "json", where: str = "", query: str = "") -> DataFrame:
    """(key, value): the value in ``value_format``, before its encoder's side effects (``encoded``)."""
    values = df.select(*[F.col(f"`{c}`") for c in value_columns(df.columns)])
    value = ENCODERS[value_format].value(values, where, query)
    key_col = F.col(f"`{key}`").cast("string") if key else F.lit(None).cast("string")
    return df.select(key_col.alias("key"), value.alias("value"))


def encoded(df: DataFrame, value_format: str, target: ValueTarget) -> DataFrame:
    """The frame of ``kafka_rows`` as the query writes it (a schema registered first, say)."""
    encode = ENCODERS[value_format].encode
    return df if encode is None else encode(df, target)
