"""Kafka sink: JSON value of the value columns, key from the sink's key or the record key.

Delivery is at-least-once: a batch replayed after a crash is written again. Keys are deterministic
(the same record gives the same key and value), so a compacted topic or a consumer keyed on them
converges to the same content.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamapp_runtime.compile.frame import INTERNAL_PREFIX, value_columns

# ISO-8601 UTC timestamps in sink values (the session time zone is UTC).
OUTPUT_JSON = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "ignoreNullFields": "false"}


def key_column(df: DataFrame, key: str | None, where: str) -> str | None:
    if key is not None:
        if key not in df.columns:
            shown = ", ".join(c for c in df.columns if not c.startswith(INTERNAL_PREFIX))
            raise ValueError(f"{where}.kafka.key: column {key!r} is not in the stream; its columns are {shown}")
        return key
    return "_key" if "_key" in df.columns else None


def kafka_rows(df: DataFrame, key: str | None) -> DataFrame:
    values = value_columns(df.columns)
    value = F.to_json(F.struct(*[F.col(f"`{c}`") for c in values]), OUTPUT_JSON)
    key_col = F.col(f"`{key}`").cast("string") if key else F.lit(None).cast("string")
    return df.select(key_col.alias("key"), value.alias("value"))
