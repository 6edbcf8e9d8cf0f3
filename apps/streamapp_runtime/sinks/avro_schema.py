"""The Avro writer schemas of a Kafka sink's values and keys, derived from the stream's columns and
Spark types.

One record named after the sink, a field per value column in the stream's order. A nullable column is
the union ``["null", T]`` with default null (a reader of a later version without the field, or an
earlier one with it, resolves); a column Spark knows is never null is ``T`` alone.

Timestamps are ``timestamp-millis`` (``local-timestamp-millis`` for timestamp_ntz): the logical type
Kafka Connect's Avro converter, ksqlDB and Flink's ``avro-confluent`` (TIMESTAMP(3)) read as a
timestamp; ``timestamp-micros`` reaches several of them as a plain long. Kafka's own record timestamps
and the windows' bounds are whole milliseconds; a microsecond fraction of a computed timestamp is cut.

Pure: nothing here reaches the registry or a JVM.
"""

from __future__ import annotations

import re

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    CharType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
    VarcharType,
)

_AVRO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PRIMITIVES: list[tuple[type, object]] = [
    (StringType, "string"), (VarcharType, "string"), (CharType, "string"),
    (LongType, "long"), (IntegerType, "int"), (ShortType, "int"), (ByteType, "int"),
    (DoubleType, "double"), (FloatType, "float"), (BooleanType, "boolean"), (BinaryType, "bytes"),
    (DateType, {"type": "int", "logicalType": "date"}),
    (TimestampType, {"type": "long", "logicalType": "timestamp-millis"}),
    (TimestampNTZType, {"type": "long", "logicalType": "local-timestamp-millis"}),
    (NullType, "null"),
]


class NotAvro(ValueError):
    """A column whose type or name has no Avro counterpart here; the message names the column."""


def record_name(basis: str) -> str:
    """An Avro name from a sink's subject (or topic): each character outside [A-Za-z0-9_] becomes '_'.
    Pure."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", basis)
    return name if _AVRO_NAME.match(name) else f"_{name}"


def writer_schema(subject: str, columns: DataType) -> dict:
    """The record schema of a sink's values, named after its ``subject``: ``columns`` the struct of the
    value columns (no metadata). Pure."""
    if not isinstance(columns, StructType):
        raise NotAvro(f"the values are a {columns.simpleString()}, not a struct of columns")
    name = record_name(subject)
    return {"type": "record", "name": name, "fields": _fields(name, columns, "")}


def key_schema(topic: str, column: str, data_type: DataType) -> object:
    """The schema of a sink's keys: the key column's type, a struct a record named '<topic>_key'. Not
    a union with null: a null key is written as no key, as the serializers write None. Pure."""
    return avro_type(data_type, f"{record_name(topic)}_key", column)


def _fields(record: str, struct: StructType, path: str) -> list[dict]:
    fields = []
    for field in struct.fields:
        where = f"{path}{field.name}"
        if not _AVRO_NAME.match(field.name):
            raise NotAvro(f"column {where!r}: not an Avro field name (letters, digits and '_', not starting "
                          "with a digit); rename it with a select step")
        avro = _nullable(avro_type(field.dataType, f"{record}_{field.name}", where), field.nullable)
        fields.append({"name": field.name, "type": avro, **({"default": None} if _is_union(avro) else {})})
    return fields


def _nullable(avro: object, nullable: bool) -> object:
    return ["null", avro] if nullable and avro != "null" else avro


def _is_union(avro: object) -> bool:
    return isinstance(avro, list)


def avro_type(data_type: DataType, name: str, where: str) -> object:
    """The Avro type of a Spark type (not null: ``_nullable`` adds the union); ``name`` the full name a
    nested record takes, ``where`` the column's path for messages. Pure."""
    for spark_class, avro in _PRIMITIVES:
        if isinstance(data_type, spark_class):
            return dict(avro) if isinstance(avro, dict) else avro
    if isinstance(data_type, DecimalType):
        return {"type": "bytes", "logicalType": "decimal", "precision": data_type.precision, "scale": data_type.scale}
    if isinstance(data_type, ArrayType):
        return {"type": "array",
                "items": _nullable(avro_type(data_type.elementType, name, f"{where}[]"), data_type.containsNull)}
    if isinstance(data_type, MapType):
        if not isinstance(data_type.keyType, (StringType, VarcharType, CharType)):
            raise NotAvro(f"column {where!r}: {data_type.simpleString()}: Avro maps have string keys; cast the "
                          "keys to string (transform_keys) or write the map as an array of structs")
        return {"type": "map",
                "values": _nullable(avro_type(data_type.valueType, name, f"{where}{{}}"), data_type.valueContainsNull)}
    if isinstance(data_type, StructType):
        return {"type": "record", "name": name, "fields": _fields(name, data_type, f"{where}.")}
    raise NotAvro(f"column {where!r}: type {data_type.simpleString()} has no Avro type here; cast it (to string, "
                  "long, double, timestamp...) in a select step")
