"""The Avro writer schema a Kafka sink derives from its stream's Spark types, the wire format it
encodes records in, and what it says when the registry refuses the schema (streamapp_runtime.sinks.
avro_schema, avro_encoding, schema_registration): pure."""

from __future__ import annotations

import io
import json
from datetime import date, datetime, timezone
from decimal import Decimal

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DateType,
    DayTimeIntervalType,
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

from streamapp_runtime.compile.avro_values import Registry
from streamapp_runtime.sinks.avro_encoding import encode_records, wire_format_header
from streamapp_runtime.sinks.avro_schema import NotAvro, avro_type, key_schema, record_name, writer_schema
from streamapp_runtime.sinks.schema_registration import SchemaTarget, refusal

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("spark, avro", [
    (StringType(), "string"), (LongType(), "long"), (IntegerType(), "int"), (ShortType(), "int"),
    (ByteType(), "int"), (DoubleType(), "double"), (FloatType(), "float"), (BooleanType(), "boolean"),
    (BinaryType(), "bytes"),
    (DateType(), {"type": "int", "logicalType": "date"}),
    (TimestampType(), {"type": "long", "logicalType": "timestamp-millis"}),
    (TimestampNTZType(), {"type": "long", "logicalType": "local-timestamp-millis"}),
    (DecimalType(12, 2), {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}),
    (ArrayType(LongType(), containsNull=False), {"type": "array", "items": "long"}),
    (ArrayType(StringType(), containsNull=True), {"type": "array", "items": ["null", "string"]}),
    (MapType(StringType(), DoubleType(), valueContainsNull=True), {"type": "map", "values": ["null", "double"]}),
])
def test_each_spark_type_becomes_its_avro_type(spark, avro):
    assert avro_type(spark, "R_c", "c") == avro


def test_a_record_named_after_the_sink_with_nullable_columns_as_unions_defaulting_to_null():
    columns = StructType([
        StructField("window_start", TimestampType(), nullable=True),
        StructField("user", StringType(), nullable=True),
        StructField("clicks", LongType(), nullable=False),
        StructField("page", StructType([StructField("path", StringType(), nullable=False)]), nullable=True),
    ])

    assert writer_schema("counts-click-counts.v2", columns) == {
        "type": "record", "name": "counts_click_counts_v2", "fields": [
            {"name": "window_start", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}],
             "default": None},
            {"name": "user", "type": ["null", "string"], "default": None},
            {"name": "clicks", "type": "long"},
            {"name": "page", "type": ["null", {"type": "record", "name": "counts_click_counts_v2_page",
                                               "fields": [{"name": "path", "type": "string"}]}], "default": None},
        ]}


def test_a_name_avro_cannot_take_is_made_one():
    assert record_name("9lives") == "_9lives"
    assert record_name("clicks-out") == "clicks_out"


@pytest.mark.parametrize("column, fragment", [
    (StructField("m", MapType(LongType(), StringType())), "column 'm': map<bigint,string>: Avro maps have string keys"),
    (StructField("d", DayTimeIntervalType()), "column 'd': type interval day to second has no Avro type here"),
    (StructField("s", StructType([StructField("a b", StringType())])), "column 's.a b': not an Avro field name"),
])
def test_a_column_avro_cannot_hold_is_refused_by_name(column, fragment):
    with pytest.raises(NotAvro) as refused:
        writer_schema("q", StructType([column]))
    assert fragment in str(refused.value)


def test_records_are_encoded_in_the_confluent_wire_format():
    from fastavro import parse_schema, schemaless_reader

    columns = StructType([StructField("at", TimestampType()), StructField("day", DateType()),
                          StructField("amount", DecimalType(10, 2)), StructField("tags", MapType(StringType(), LongType())),
                          StructField("note", StringType())])
    schema = writer_schema("q", columns)
    at = datetime(2026, 11, 28, 10, 0, 0, 123456, tzinfo=timezone.utc)
    record = {"at": at, "day": date(2026, 11, 28), "amount": Decimal("12.50"), "tags": {"a": 1}, "note": None}

    [value] = encode_records(json.dumps(schema), wire_format_header(258), [record])

    assert value[:5] == b"\x00\x00\x00\x01\x02"  # the magic byte, then the id 258 big-endian
    back = schemaless_reader(io.BytesIO(value[5:]), parse_schema(schema), None)
    assert back == {**record, "at": at.replace(microsecond=123000)}  # timestamp-millis: the microseconds cut
    assert encode_records(json.dumps(schema), wire_format_header(258), [record]) == [value]


def _target(register: bool = True) -> SchemaTarget:
    return SchemaTarget(Registry("http://sr:8081"), "counts-value", register, "spec.sinks[0].kafka (counts-out)")


def test_a_refusal_names_the_sink_the_subject_and_the_registry_s_answer_each_on_a_line():
    incompatible = refusal(_target(), 409, {"error_code": 409, "message": "BACKWARD check failed: clicks: type"})
    assert incompatible.splitlines() == [
        "spec.sinks[0].kafka (counts-out): the value schema under subject 'counts-value': incompatible with the "
        "subject's versions (HTTP 409, error 409)",
        "the registry's answer: BACKWARD check failed: clicks: type",
        "make the stream's columns compatible, change the subject's compatibility level, or write to another "
        "subject (registry http://sr:8081)"]

    not_there = refusal(_target(register=False), 404, {"error_code": 40403, "message": "Schema not found"})
    assert "'counts-value': not there (HTTP 404, error 40403; registerSchema: false looks it up only)" in not_there
    assert "check spec.kafka.schemaRegistry.secretRef" in refusal(_target(), 401, {})


def test_a_key_is_its_column_s_type_and_a_null_key_no_key():
    from fastavro import parse_schema, schemaless_reader

    assert key_schema("counts-out", "session_id", StringType()) == "string"
    assert key_schema("counts-out", "k", StructType([StructField("user", StringType(), nullable=False)])) == {
        "type": "record", "name": "counts_out_key", "fields": [{"name": "user", "type": "string"}]}

    keys = encode_records(json.dumps("string"), wire_format_header(3), ["u1", None])

    assert keys[1] is None
    assert schemaless_reader(io.BytesIO(keys[0][5:]), parse_schema("string"), None) == "u1"


def test_the_record_follows_the_subject_so_renaming_the_sink_keeps_the_registered_schema():
    from streamapp_api.sinks import KafkaSink
    from streamapp_runtime.sinks.kafka import formats

    columns = StructType([StructField("user", StringType(), nullable=False)])
    key = StructType([StructField("user", StringType(), nullable=False)])
    sink = KafkaSink.model_validate({"topic": "orders", "format": "avro", "keyFormat": "avro", "key": "k"})
    before, renamed = formats(sink, "spec.sinks[0]", "counts-orders"), formats(sink, "spec.sinks[0]", "totals")
    assert before.value_target.avro_schema(columns) == renamed.value_target.avro_schema(columns)
    assert before.value_target.avro_schema(columns)["name"] == "orders_value"
    assert renamed.key_target.avro_schema(key)["name"] == "orders_key"
    assert renamed.value_target.protobuf_schema(columns).text() == before.value_target.protobuf_schema(columns).text()
    assert "message orders_value {" in renamed.value_target.protobuf_schema(columns).text()
    under_a_subject = KafkaSink.model_validate({"topic": "orders", "format": "avro", "subject": "shop.v1.Order"})
    assert formats(under_a_subject, "spec.sinks[0]", "q").value_target.avro_schema(columns)["name"] == "shop_v1_Order"
