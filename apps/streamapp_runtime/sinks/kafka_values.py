"""How a Kafka sink writes its values, one row per format of ``streamapp_api.sinks.SINK_VALUE_FORMATS``.

Each format has two halves, as the sinks have (sinks/__init__.py): ``value``, the value column of the
query's frame (pure: what ``streamapp run --dry-run`` shows and checks), and ``encode``, the frame the
query writes, made from that one once the format's side effects are done (a schema registered).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from streamapp_runtime.sinks import avro_encoding, avro_schema

# ISO-8601 UTC timestamps in sink values (the session time zone is UTC).
OUTPUT_JSON = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "ignoreNullFields": "false"}


@dataclass(frozen=True)
class ValueTarget:
    """What an encoder may need of the sink: its name in messages, its query's name (the Avro record's),
    and where its schema goes (None: the app has no schema registry)."""

    where: str
    query: str
    schema: avro_encoding.SchemaTarget | None


@dataclass(frozen=True)
class ValueEncoder:
    # The value column from the value columns' frame and the query's name (pure).
    value: Callable[[DataFrame, str, str], Column]
    # The frame of (key, value) the query writes, from the frame ``value`` made (None: that frame as it is).
    encode: Callable[[DataFrame, ValueTarget], DataFrame] | None = None


def _json_value(df: DataFrame, where: str, query: str) -> Column:
    return F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns]), OUTPUT_JSON)


def _avro_value(df: DataFrame, where: str, query: str) -> Column:
    """The value columns as one struct, its writer schema checked now (a type Avro lacks stops --dry-run)."""
    try:
        avro_schema.writer_schema(query, df.schema)
    except avro_schema.NotAvro as exc:
        raise ValueError(f"{where}.kafka.format: {exc}") from exc
    return F.struct(*[F.col(f"`{c}`") for c in df.columns])


def _avro_encode(df: DataFrame, target: ValueTarget) -> DataFrame:
    if target.schema is None:
        raise ValueError(f"{target.where}.kafka.format: avro registers its schema in spec.kafka.schemaRegistry, "
                         "which is not set")
    value_type = df.schema["value"].dataType
    assert isinstance(value_type, StructType)
    schema = avro_schema.writer_schema(target.query, value_type)
    schema_id = avro_encoding.schema_id(target.schema, schema)
    return df.select("key", avro_encoding.avro_column(F.col("value"), schema, schema_id).alias("value"))


ENCODERS: dict[str, ValueEncoder] = {
    "json": ValueEncoder(_json_value),
    "avro": ValueEncoder(_avro_value, _avro_encode),
}
