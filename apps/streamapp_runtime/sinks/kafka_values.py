"""How a Kafka sink writes its values and keys: one row per format of ``streamapp_api.sinks``'
SINK_VALUE_FORMATS (VALUE_ENCODERS) and SINK_KEY_FORMATS (KEY_ENCODERS).

Each format has two halves, as the sinks have (sinks/__init__.py): ``column``, the column of the
query's frame (pure: what ``streamapp run --dry-run`` shows and checks), and ``encode``, the frame the
query writes with that column encoded, once the format's side effects are done (a schema registered).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from streamapp_runtime.sinks import avro_encoding, avro_schema, protobuf_encoding, protobuf_schema
from streamapp_runtime.sinks.schema_registration import SchemaTarget, schema_id

# ISO-8601 UTC timestamps in sink values (the session time zone is UTC).
OUTPUT_JSON = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "ignoreNullFields": "false"}


@dataclass(frozen=True)
class ColumnTarget:
    """What an encoder may need of the sink for one column (the key or the value): the field naming its
    format in messages (spec.sinks[0].kafka.format), the Avro and the Protobuf schema of a column of a
    Spark type, and where that schema goes (None: the app has no schema registry; the pure half has
    none either)."""

    field: str
    avro_schema: Callable[[DataType], object]
    protobuf_schema: Callable[[DataType], protobuf_schema.ProtoSchema]
    registry: SchemaTarget | None = None


@dataclass(frozen=True)
class Encoder:
    # The column written, from the frame of the columns it is made of (pure).
    column: Callable[[DataFrame, ColumnTarget], Column]
    # The frame the query writes, from the frame ``column`` went into and the name it has there (None:
    # that frame as it is).
    encode: Callable[[DataFrame, str, ColumnTarget], DataFrame] | None = None


def _json_value(values: DataFrame, target: ColumnTarget) -> Column:
    return F.to_json(F.struct(*[F.col(f"`{c}`") for c in values.columns]), OUTPUT_JSON)


def _string_key(keys: DataFrame, target: ColumnTarget) -> Column:
    return F.col(f"`{keys.columns[0]}`").cast("string")


def _checked_avro(column: Column, data_type: DataType, target: ColumnTarget) -> Column:
    """``column`` as it is, its Avro schema derived now: a type Avro lacks stops --dry-run too."""
    try:
        target.avro_schema(data_type)
    except avro_schema.NotAvro as exc:
        raise ValueError(f"{target.field}: {exc}") from exc
    return column


def _avro_value(values: DataFrame, target: ColumnTarget) -> Column:
    return _checked_avro(F.struct(*[F.col(f"`{c}`") for c in values.columns]), values.schema, target)


def _avro_key(keys: DataFrame, target: ColumnTarget) -> Column:
    return _checked_avro(F.col(f"`{keys.columns[0]}`"), keys.schema.fields[0].dataType, target)


def _registry(target: ColumnTarget, format_name: str) -> SchemaTarget:
    if target.registry is None:
        raise ValueError(f"{target.field}: {format_name} registers its schema in spec.kafka.schemaRegistry, which is "
                         "not set")
    return target.registry


def _avro_encode(df: DataFrame, name: str, target: ColumnTarget) -> DataFrame:
    schema = target.avro_schema(df.schema[name].dataType)
    registered = schema_id(_registry(target, "avro"), json.dumps(schema))
    return df.withColumn(name, avro_encoding.avro_column(F.col(name), schema, registered))


def _checked_protobuf(column: Column, data_type: DataType, target: ColumnTarget) -> Column:
    """``column`` as it is, its Protobuf schema derived now: a type Protobuf lacks stops --dry-run too."""
    try:
        target.protobuf_schema(data_type)
    except protobuf_schema.NotProtobuf as exc:
        raise ValueError(f"{target.field}: {exc}") from exc
    return column


def _protobuf_value(values: DataFrame, target: ColumnTarget) -> Column:
    return _checked_protobuf(F.struct(*[F.col(f"`{c}`") for c in values.columns]), values.schema, target)


def _protobuf_key(keys: DataFrame, target: ColumnTarget) -> Column:
    return _checked_protobuf(F.col(f"`{keys.columns[0]}`"), keys.schema.fields[0].dataType, target)


def _protobuf_encode(df: DataFrame, name: str, target: ColumnTarget) -> DataFrame:
    schema = target.protobuf_schema(df.schema[name].dataType)
    registered = schema_id(_registry(target, "protobuf"), schema.text(), "PROTOBUF")
    return df.withColumn(name, protobuf_encoding.protobuf_column(F.col(name), schema, registered))


VALUE_ENCODERS: dict[str, Encoder] = {
    "json": Encoder(_json_value),
    "avro": Encoder(_avro_value, _avro_encode),
    "protobuf": Encoder(_protobuf_value, _protobuf_encode),
}
KEY_ENCODERS: dict[str, Encoder] = {
    "string": Encoder(_string_key),
    "avro": Encoder(_avro_key, _avro_encode),
    "protobuf": Encoder(_protobuf_key, _protobuf_encode),
}
