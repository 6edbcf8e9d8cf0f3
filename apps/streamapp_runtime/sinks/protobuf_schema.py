"""The Protobuf schemas of a Kafka sink's values and keys, derived from the stream's columns and Spark
types: a proto3 file of one message, as .proto text (what the registry compiles and keeps; registries
such as AxonOps' refuse a serialized descriptor) and as the FileDescriptorProto the encoder builds its
message class from, so no protoc runs.

The values are one message named after the sink, as the Avro record is, a field per value column in
the stream's order, numbered from 1. A key is a message '<sink>_key': a struct key column's fields, or
one field named after a scalar key column (Protobuf has no top-level scalar, so the serializers'
keys are messages too).

- string, bigint, int (short, tinyint), double, float, boolean, binary: string, int64, int32, double,
  float, bool, bytes; a nullable one is proto3 ``optional``, so that null stays null for a reader
  (its field is unset, not 0 or "");
- timestamp (and timestamp_ntz, its wall clock taken as UTC): google.protobuf.Timestamp, imported from
  the well-known types, which registries resolve without a reference; unset when null;
- a struct: a nested message, unset when null; an array: a repeated field; a map of string, bigint,
  int or boolean keys: a map. Protobuf has no null in a repeated field or a map, nor a null repeated
  field or map: a null element or map value is written as its type's default (0, "", an empty
  message), as Flink's protobuf format does, and a null array or map as an empty one;
- anything else (decimal, date, intervals, an array of arrays...) is refused with the column named:
  cast it in a select step.

Pure: nothing here reaches the registry or a JVM; the ``protobuf`` package is imported by ``file``
only (the encoder's side).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    CharType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    VarcharType,
)

from streamapp_runtime.sinks.avro_schema import record_name

TIMESTAMP = "google.protobuf.Timestamp"
TIMESTAMP_IMPORT = "google/protobuf/timestamp.proto"
_SCALARS: list[tuple[type, str]] = [
    (StringType, "string"), (VarcharType, "string"), (CharType, "string"),
    (LongType, "int64"), (IntegerType, "int32"), (ShortType, "int32"), (ByteType, "int32"),
    (DoubleType, "double"), (FloatType, "float"), (BooleanType, "bool"), (BinaryType, "bytes"),
]
SCALAR_NAMES = {name for _, name in _SCALARS}
_MAP_KEYS = ("string", "int64", "int32", "bool")  # the Spark types that give these; proto allows a few more
_PROTO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class NotProtobuf(ValueError):
    """A column whose type or name has no Protobuf counterpart here; the message names the column."""


@dataclass(frozen=True)
class ProtoField:
    """A field: ``type`` a scalar's name, TIMESTAMP, or a nested message's name in the message that has
    the field; ``label`` '', 'optional' or 'repeated'; ``map_key`` the key's scalar type of a map (then
    ``type`` is the values')."""

    name: str
    number: int
    type: str
    label: str = ""
    map_key: str | None = None

    def text(self) -> str:
        kind = f"map<{self.map_key}, {self.type}>" if self.map_key else self.type
        return f"{self.label} {kind} {self.name} = {self.number};".lstrip()


@dataclass(frozen=True)
class ProtoMessage:
    name: str
    fields: tuple[ProtoField, ...]
    nested: tuple[ProtoMessage, ...] = ()

    def text(self, indent: str = "") -> list[str]:
        lines = [f"{indent}message {self.name} {{"]
        for inner in self.nested:
            lines += inner.text(indent + "  ")
        lines += [f"{indent}  {field.text()}" for field in self.fields]
        return [*lines, f"{indent}}}"]


@dataclass(frozen=True)
class ProtoSchema:
    """A proto3 file of one top-level message (no package): what a sink registers and encodes with."""

    message: ProtoMessage
    # The message of the stream's columns: a scalar key's column is the one field of a key message.
    columns: StructType
    wrapped: bool = False  # each value is the one field's (a scalar key), not a struct of the fields

    def imports(self) -> list[str]:
        return [TIMESTAMP_IMPORT] if _uses(self.message, TIMESTAMP) else []

    def text(self) -> str:
        """The .proto text. Pure."""
        lines = ['syntax = "proto3";', ""]
        if self.imports():
            lines += [*(f'import "{name}";' for name in self.imports()), ""]
        return "\n".join([*lines, *self.message.text()]) + "\n"

    def file(self, name: str = "streamapp-sink.proto") -> Any:
        """The FileDescriptorProto of the same file (the registry's compiler makes this of the text)."""
        from google.protobuf import descriptor_pb2

        file = descriptor_pb2.FileDescriptorProto(name=name, syntax="proto3", dependency=self.imports())
        _add_message(file.message_type.add(), self.message, f".{self.message.name}")
        return file


def _uses(message: ProtoMessage, type_name: str) -> bool:
    return any(f.type == type_name for f in message.fields) or any(_uses(m, type_name) for m in message.nested)


def _add_message(proto: Any, message: ProtoMessage, scope: str) -> None:
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F

    proto.name = message.name
    for inner in message.nested:
        _add_message(proto.nested_type.add(), inner, f"{scope}.{inner.name}")
    types = {name: getattr(F, f"TYPE_{name.upper()}") for name in SCALAR_NAMES}

    def typed(field: Any, type_name: str) -> None:
        if type_name in types:
            field.type = types[type_name]
        else:
            field.type = F.TYPE_MESSAGE
            field.type_name = f".{TIMESTAMP}" if type_name == TIMESTAMP else f"{scope}.{type_name}"

    for spec in message.fields:
        # proto3 optional: a synthetic oneof of its own, declared after the field
        optional = {"proto3_optional": True, "oneof_index": len(proto.oneof_decl)} if spec.label == "optional" else {}
        field = proto.field.add(name=spec.name, number=spec.number, **optional,
                                label=F.LABEL_REPEATED if spec.label == "repeated" or spec.map_key else F.LABEL_OPTIONAL)
        if optional:
            proto.oneof_decl.add(name=f"_{spec.name}")
        if spec.map_key:  # a map is a repeated nested entry message of a key and a value, as protoc makes it
            entry = proto.nested_type.add(name=map_entry_name(spec.name))
            entry.options.map_entry = True
            typed(entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL), spec.map_key)
            typed(entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL), spec.type)
            field.type, field.type_name = F.TYPE_MESSAGE, f"{scope}.{entry.name}"
        else:
            typed(field, spec.type)


def _camel(name: str) -> str:
    """protoc's CamelCase of a field name: '_' dropped, the letter after it and the first upper. Pure."""
    parts = name.split("_")
    return "".join(p[:1].upper() + p[1:] for p in parts)


def map_entry_name(field: str) -> str:
    """The entry message protoc makes for a map field. Pure."""
    return f"{_camel(field)}Entry"


# --- from Spark types ----------------------------------------------------------------------------


def value_schema(subject: str, columns: DataType) -> ProtoSchema:
    """The schema of a sink's values, a message named after its ``subject``: ``columns`` the struct of
    the value columns. Pure."""
    if not isinstance(columns, StructType):
        raise NotProtobuf(f"the values are a {columns.simpleString()}, not a struct of columns")
    return ProtoSchema(_message(record_name(subject), columns, ""), columns)


def key_schema(topic: str, column: str, data_type: DataType) -> ProtoSchema:
    """The schema of a sink's keys: a message '<topic>_key' of a struct key column's fields, or of one
    field, the scalar key column (never optional: a null key is written as no key). Pure."""
    name = f"{record_name(topic)}_key"
    if isinstance(data_type, StructType):
        return ProtoSchema(_message(name, data_type, f"{column}."), data_type)
    columns = StructType([StructField(column, data_type, nullable=False)])
    return ProtoSchema(_message(name, columns, ""), columns, wrapped=True)


def _message(name: str, struct: StructType, path: str) -> ProtoMessage:
    fields: list[ProtoField] = []
    nested: list[ProtoMessage] = []
    taken = {f.name for f in struct.fields} | {map_entry_name(f.name) for f in struct.fields
                                               if isinstance(f.dataType, MapType)}

    def message_name(field: str) -> str:
        candidate = _camel(field) or "Message"
        while candidate in taken:
            candidate += "_"
        taken.add(candidate)
        return candidate

    for number, field in enumerate(struct.fields, start=1):
        where = f"{path}{field.name}"
        if not _PROTO_NAME.match(field.name):
            raise NotProtobuf(f"column {where!r}: not a Protobuf field name (letters, digits and '_', not "
                              "starting with a digit); rename it with a select step")
        data_type = field.dataType
        if isinstance(data_type, ArrayType):
            element = _value_type(data_type.elementType, f"{where}[]", lambda: message_name(field.name), nested)
            fields.append(ProtoField(field.name, number, element, "repeated"))
        elif isinstance(data_type, MapType):
            key = _scalar(data_type.keyType)
            if key not in _MAP_KEYS:
                raise NotProtobuf(f"column {where!r}: {data_type.simpleString()}: Protobuf map keys are strings, "
                                  "integers or booleans; cast the keys (transform_keys) or write an array of structs")
            value = _value_type(data_type.valueType, f"{where}{{}}", lambda: message_name(f"{field.name}_value"),
                                nested)
            fields.append(ProtoField(field.name, number, value, map_key=key))
        else:
            kind = _value_type(data_type, where, lambda: message_name(field.name), nested)
            optional = field.nullable and kind in SCALAR_NAMES  # a message has presence of its own
            fields.append(ProtoField(field.name, number, kind, "optional" if optional else ""))
    return ProtoMessage(name, tuple(fields), tuple(nested))


def _scalar(data_type: DataType) -> str | None:
    return next((name for spark, name in _SCALARS if isinstance(data_type, spark)), None)


def _value_type(data_type: DataType, where: str, name: Any, nested: list[ProtoMessage]) -> str:
    """The type of one value (not repeated, not a map) of a Spark type; a struct's message is added to
    ``nested`` under ``name()``. Pure."""
    scalar = _scalar(data_type)
    if scalar is not None:
        return scalar
    if isinstance(data_type, (TimestampType, TimestampNTZType)):
        return TIMESTAMP
    if isinstance(data_type, StructType):
        message = _message(name(), data_type, f"{where}.")
        nested.append(message)
        return message.name
    if isinstance(data_type, (ArrayType, MapType)):
        raise NotProtobuf(f"column {where!r}: {data_type.simpleString()}: Protobuf has no repeated field or map "
                          "within a repeated field or a map; wrap the inner one in a struct")
    raise NotProtobuf(f"column {where!r}: type {data_type.simpleString()} has no Protobuf type here; cast it "
                      "(to string, bigint, double, timestamp...) in a select step")
