"""The Protobuf schema a Kafka sink derives from its stream's Spark types (.proto text and the
descriptor the encoder builds its message class from), and the wire format it encodes rows in, read
back by the runtime's own Protobuf reader (streamapp_runtime.sinks.protobuf_schema,
protobuf_encoding): pure."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DateType,
    DecimalType,
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
)

from streamapp_runtime.compile.protobuf_values import message_indexes, struct_reader
from streamapp_runtime.sinks.protobuf_encoding import _built, encode_messages, protobuf_header
from streamapp_runtime.sinks.protobuf_schema import TIMESTAMP, NotProtobuf, ProtoField, key_schema, value_schema

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("spark, proto", [
    (StringType(), "string"), (LongType(), "int64"), (IntegerType(), "int32"), (ShortType(), "int32"),
    (ByteType(), "int32"), (DoubleType(), "double"), (FloatType(), "float"), (BooleanType(), "bool"),
    (BinaryType(), "bytes"), (TimestampType(), TIMESTAMP), (TimestampNTZType(), TIMESTAMP),
])
def test_each_spark_type_becomes_its_protobuf_type(spark, proto):
    [field] = value_schema("q", StructType([StructField("c", spark, nullable=False)])).message.fields
    assert field == ProtoField("c", 1, proto)


COLUMNS = StructType([
    StructField("window_start", TimestampType(), nullable=True),
    StructField("user", StringType(), nullable=True),
    StructField("clicks", LongType(), nullable=False),
    StructField("page", StructType([StructField("path", StringType(), nullable=False)]), nullable=True),
    StructField("tags", ArrayType(StringType(), containsNull=True)),
    StructField("scores", MapType(StringType(), DoubleType(), valueContainsNull=True)),
])


def test_a_message_named_after_the_sink_with_nullable_scalars_optional():
    schema = value_schema("counts-click-counts.v2", COLUMNS)

    assert schema.text() == "\n".join([
        'syntax = "proto3";',
        "",
        'import "google/protobuf/timestamp.proto";',
        "",
        "message counts_click_counts_v2 {",
        "  message Page {",
        "    string path = 1;",
        "  }",
        "  google.protobuf.Timestamp window_start = 1;",  # a message: unset is null without 'optional'
        "  optional string user = 2;",
        "  int64 clicks = 3;",
        "  Page page = 4;",
        "  repeated string tags = 5;",
        "  map<string, double> scores = 6;",
        "}",
    ]) + "\n"
    file = schema.file()
    assert list(file.dependency) == ["google/protobuf/timestamp.proto"]
    assert [m.name for m in file.message_type[0].nested_type] == ["Page", "ScoresEntry"]  # the entry as protoc names it


def test_a_nested_message_takes_a_name_no_field_has():
    columns = StructType([StructField("Page", StringType()), StructField("page", StructType([StructField("a", LongType())]))])
    message = value_schema("q", columns).message
    assert [m.name for m in message.nested] == ["Page_"]
    assert message.fields[1] == ProtoField("page", 2, "Page_")


def test_a_key_is_a_message_of_its_column():
    assert key_schema("counts-out", "session_id", StringType()).text().endswith(
        "message counts_out_key {\n  string session_id = 1;\n}\n")
    struct_key = key_schema("counts-out", "k", StructType([StructField("user", StringType(), nullable=True)]))
    assert struct_key.message.fields == (ProtoField("user", 1, "string", "optional"),)


@pytest.mark.parametrize("column, fragment", [
    (StructField("d", DecimalType(10, 2)), "column 'd': type decimal(10,2) has no Protobuf type here"),
    (StructField("day", DateType()), "column 'day': type date has no Protobuf type here"),
    (StructField("m", MapType(DoubleType(), StringType())), "column 'm': map<double,string>: Protobuf map keys are"),
    (StructField("xs", ArrayType(ArrayType(LongType()))), "column 'xs[]': array<bigint>: Protobuf has no repeated field"),
    (StructField("s", StructType([StructField("a b", StringType())])), "column 's.a b': not a Protobuf field name"),
])
def test_a_column_protobuf_cannot_hold_is_refused_by_name(column, fragment):
    with pytest.raises(NotProtobuf) as refused:
        value_schema("q", StructType([column]))
    assert fragment in str(refused.value)


def test_rows_are_encoded_in_the_confluent_wire_format_and_read_back_as_written():
    schema = value_schema("q", COLUMNS)
    at = datetime(2026, 11, 28, 10, 0, 0, 123456, tzinfo=timezone.utc)
    full = {"window_start": at, "user": "u1", "clicks": 3, "page": {"path": "/a"}, "tags": ["x", None],
            "scores": {"a": 1.5, "b": None}}
    empty = {"window_start": None, "user": None, "clicks": 0, "page": None, "tags": None, "scores": None}

    values = encode_messages(schema, protobuf_header(258), [full, empty, None])

    assert values[0][:6] == b"\x00\x00\x00\x01\x02\x00"  # magic, the id 258 big-endian, message indexes [0]
    assert values[2] is None
    assert message_indexes(values[0], 5) == ([0], 6)
    message_class, _ = _built(schema)
    read = struct_reader(message_class.DESCRIPTOR, COLUMNS)
    rows = [read(message_class.FromString(value[6:])) for value in values[:2]]
    assert rows[0] == {**full, "tags": ["x", ""], "scores": {"a": 1.5, "b": 0.0}}  # no null in a repeated field or map
    assert rows[1] == {**empty, "tags": [], "scores": {}}  # null stays null, but for a repeated field or map
    assert encode_messages(schema, protobuf_header(258), [full]) == values[:1]  # the same bytes for a replay


def test_timestamps_before_the_epoch_and_without_a_time_zone():
    columns = StructType([StructField("at", TimestampType()), StructField("local", TimestampNTZType())])
    schema = value_schema("q", columns)
    before = datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=timezone.utc)
    [value] = encode_messages(schema, protobuf_header(1), [{"at": before, "local": before.replace(tzinfo=None)}])
    message_class, _ = _built(schema)
    message = message_class.FromString(value[6:])
    assert (message.at.seconds, message.at.nanos) == (-1, 500_000_000)
    assert message.local == message.at  # its wall clock as UTC
