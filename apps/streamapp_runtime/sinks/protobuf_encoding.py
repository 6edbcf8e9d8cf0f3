"""Protobuf values of a Kafka sink in the Confluent wire format: a zero byte, the schema id (4 bytes,
big-endian), the message indexes (a single zero byte: the first message of the schema, the only one
here) and the message (compile/protobuf_values.py reads the same format).

The schema (sinks/protobuf_schema.py) is registered as .proto text when the query starts
(sinks/schema_registration.py); rows are encoded in Python with the message class the ``protobuf``
package builds from the same file's FileDescriptorProto, in an Arrow UDF: a batch of rows to each call
on the executors. Serialized deterministically, so the same row gives the same bytes and both
deliveries write what the other would: Spark's Kafka sink takes the binary column, the exactly-once
writer produces it as it is (sinks/kafka_transactions.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

# At module level: arrow_udf reads the encoder's type hints (pa.Array -> pa.Array) in this module's globals.
import pyarrow as pa
from pyspark.sql.types import ArrayType, DataType, MapType, StructType, TimestampNTZType, TimestampType

from streamapp_runtime.compile.avro_values import HEADER, MAGIC
from streamapp_runtime.sinks.protobuf_schema import ProtoSchema

FIRST_MESSAGE = b"\x00"  # the message indexes [0], as the serializers write them
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


def _timestamp(value: datetime) -> dict:
    # Naive: a timestamp_ntz, its wall clock taken as UTC. Floored, so that nanos is never negative.
    micros = (value if value.tzinfo else value.replace(tzinfo=timezone.utc)) - _EPOCH
    seconds, rest = divmod(micros // _MICROSECOND, 1_000_000)
    return {"seconds": seconds, "nanos": rest * 1000}


def _identity(value: Any) -> Any:
    return value


def _default(data_type: DataType) -> Any:
    """What a null element of a repeated field or a null map value is written as: its type's default."""
    if isinstance(data_type, (StructType, TimestampType, TimestampNTZType)):
        return {}  # an empty message (a Timestamp's: the epoch)
    return _SCALAR_DEFAULTS.get(data_type.typeName(), 0)


_SCALAR_DEFAULTS = {"string": "", "varchar": "", "char": "", "binary": b"", "boolean": False, "double": 0.0,
                    "float": 0.0}


def converter(data_type: DataType) -> Callable[[Any], Any]:
    """A Python value of a Spark type (as Arrow gives it, maps as dicts) -> what the message class's
    constructor takes for its field: a dict for a message, a list for a repeated field. Pure."""
    if isinstance(data_type, (TimestampType, TimestampNTZType)):
        return _timestamp
    if isinstance(data_type, StructType):
        return fields_converter(data_type)
    if isinstance(data_type, ArrayType):
        element, default = converter(data_type.elementType), _default(data_type.elementType)
        return lambda values: [default if v is None else element(v) for v in values]
    if isinstance(data_type, MapType):
        value, default = converter(data_type.valueType), _default(data_type.valueType)
        return lambda entries: {k: default if v is None else value(v) for k, v in entries.items()}
    return _identity


def fields_converter(struct: StructType) -> Callable[[dict], dict]:
    """A row of ``struct`` -> the constructor's keyword arguments: a null field left out (unset). Pure."""
    fields = [(f.name, converter(f.dataType)) for f in struct.fields]
    return lambda row: {name: convert(row[name]) for name, convert in fields if row[name] is not None}


# Message classes and converters by the schema's text (and whether a value is a scalar key's), in each
# Python worker: built once per process, not once per batch.
_BUILT: dict[tuple[str, bool], tuple[Any, Callable[[Any], dict]]] = {}


def _built(schema: ProtoSchema) -> tuple[Any, Callable[[Any], dict]]:
    built = (schema.text(), schema.wrapped)
    if built not in _BUILT:
        from google.protobuf.message_factory import GetMessageClass

        from streamapp_api.protobuf_schemas import new_pool

        pool = new_pool()
        pool.Add(schema.file())
        message_class = GetMessageClass(pool.FindMessageTypeByName(schema.message.name))
        fields = fields_converter(schema.columns)
        if schema.wrapped:
            name = schema.columns.fields[0].name
            _BUILT[built] = (message_class, lambda value: fields({name: value}))
        else:
            _BUILT[built] = (message_class, fields)
    return _BUILT[built]


def encode_messages(schema: ProtoSchema, header: bytes, records: list) -> list[bytes | None]:
    """Each record (a dict of the message's fields, or a scalar key's value) as ``header`` and its
    message; a null one as null (a key: no key, as the serializers write None)."""
    message_class, arguments = _built(schema)
    return [None if record is None else header + message_class(**arguments(record)).SerializeToString(deterministic=True)
            for record in records]


def protobuf_header(schema_id: int) -> bytes:
    return HEADER.pack(MAGIC, schema_id) + FIRST_MESSAGE


def protobuf_column(value, schema: ProtoSchema, schema_id: int):
    """A binary column of wire-format values from a column of the schema's columns (a struct for the
    values, the key column for a key)."""
    from pyspark.sql.functions import arrow_udf

    header = protobuf_header(schema_id)

    @arrow_udf("binary")  # type: ignore[call-overload]
    def encode(values: pa.Array) -> pa.Array:
        # Maps as dicts; timestamps come as datetimes with their time zone (timestamp_ntz without).
        records = values.to_pylist(maps_as_pydicts="strict")
        return pa.array(encode_messages(schema, header, records), pa.binary())

    return encode(value)
