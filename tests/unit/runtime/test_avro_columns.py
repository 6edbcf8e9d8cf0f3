"""The columns an Avro reader schema gives (streamapp_runtime.compile.avro_values): pure."""

from __future__ import annotations

import pytest
from streamapp_api.avro_schemas import spark_type
from streamapp_api.schema_registry import topic_subject
from streamapp_runtime.compile.avro_values import ReaderSchema

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("avro, spark", [
    ("string", "string"), ("long", "bigint"), ("int", "int"), ("double", "double"), ("boolean", "boolean"),
    (["null", "string"], "string"),
    ({"type": "long", "logicalType": "timestamp-millis"}, "timestamp"),
    ({"type": "int", "logicalType": "date"}, "date"),
    ({"type": "enum", "name": "Kind", "symbols": ["A", "B"]}, "string"),
    ({"type": "array", "items": "long"}, "array<bigint>"),
    ({"type": "map", "values": ["null", "double"]}, "map<string,double>"),
    ({"type": "record", "name": "Page", "fields": [{"name": "path", "type": "string"}]}, "struct<`path`:string>"),
])
def test_each_avro_type_becomes_its_spark_column_type(avro, spark):
    assert spark_type(avro) == spark


@pytest.mark.parametrize("avro", [["null", "string", "long"], "fixed-width-thing"])
def test_a_type_with_no_column_type_is_refused_by_name(avro):
    with pytest.raises(ValueError, match="union|no column type"):
        spark_type(avro)


def test_a_reader_schema_gives_one_column_per_field_in_order():
    schema = {"type": "record", "name": "Click", "fields": [
        {"name": "user", "type": "string"}, {"name": "n", "type": ["null", "long"], "default": None}]}
    assert list(ReaderSchema("clicks-value", 3, 7, schema).columns().items()) == [("user", "string"), ("n", "bigint")]
    with pytest.raises(ValueError, match="not an Avro record"):
        ReaderSchema("s", 1, 1, {"type": "string"}).columns()


def test_subjects_follow_the_topic_name_strategy():
    assert (topic_subject("clicks"), topic_subject("clicks", "key")) == ("clicks-value", "clicks-key")
    with pytest.raises(ValueError):
        topic_subject("clicks", "header")


def test_the_registry_reaches_the_readers_but_never_spark():
    from streamapp_api import load
    from streamapp_runtime.plan import REGISTRY_URL_OPTION, REGISTRY_USER_INFO_OPTION, kafka_options, spark_kafka_options

    app = load({"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": "avro"},
                "spec": {"kafka": {"bootstrapServers": "k:9092", "schemaRegistry": {"url": "http://sr:8081"}},
                         "sources": [{"name": "s", "topic": "t", "format": "avro", "schema": {"a": "string"}}],
                         "sinks": [{"from": "s", "kafka": {"topic": "out"}}]}})
    options = kafka_options(app, None, {}, "user:secret")
    assert (options[REGISTRY_URL_OPTION], options[REGISTRY_USER_INFO_OPTION]) == ("http://sr:8081", "user:secret")
    assert spark_kafka_options(options) == {"kafka.bootstrap.servers": "k:9092"}
