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


def _schema_checked(derive: Callable[[ColumnTarget, DataType], object], refused: type[Exception]
                   ) -> tuple[Callable[[DataFrame, ColumnTarget], Column], Callable[[DataFrame, ColumnTarget], Column]]:
    """The column halves (value, key) of a format whose schema is derived from the column's Spark type: the
    column as it is, its schema derived now, so that a type the format lacks stops --dry-run too."""
    def checked(column: Column, data_type: DataType, target: ColumnTarget) -> Column:
        try:
            derive(target, data_type)
        except refused as exc:
            raise ValueError(f"{target.field}: {exc}") from exc
        return column

    def value(values: DataFrame, target: ColumnTarget) -> Column:
        return checked(F.struct(*[F.col(f"`{c}`") for c in values.columns]), values.schema, target)

    def key(keys: DataFrame, target: ColumnTarget) -> Column:
        return checked(F.col(f"`{keys.columns[0]}`"), keys.schema.fields[0].dataType, target)

    return value, key


_avro_value, _avro_key = _schema_checked(lambda target, data_type: target.avro_schema(data_type), avro_schema.NotAvro)
_protobuf_value, _protobuf_key = _schema_checked(lambda target, data_type: target.protobuf_schema(data_type),
                                                 protobuf_schema.NotProtobuf)


def _registry(target: ColumnTarget, format_name: str) -> SchemaTarget:
    if target.registry is None:
        raise ValueError(f"{target.field}: {format_name} registers its schema in spec.kafka.schemaRegistry, which is "
                         "not set")
    return target.registry


def _avro_encode(df: DataFrame, name: str, target: ColumnTarget) -> DataFrame:
    schema = target.avro_schema(df.schema[name].dataType)
    registered = schema_id(_registry(target, "avro"), json.dumps(schema))
    return df.withColumn(name, avro_encoding.avro_column(F.col(name), schema, registered))


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
