"""The test bed's schema registry, used the way users use theirs: confluent-kafka's registry client
and its Avro and Protobuf serializers, records through the real broker, the Confluent wire format
(a zero byte, the schema id, the encoded record)."""

from __future__ import annotations

import json
import struct
import uuid

import pytest

from streamapp_testbed.kafka_admin import consume_all, create_topic, produce

pytestmark = pytest.mark.integration

CLICK_V1 = {"type": "record", "name": "Click", "namespace": "io.streamapp.test", "fields": [
    {"name": "user", "type": "string"},
    {"name": "n", "type": "long"},
]}
# v2 adds a field with a default: a reader of v2 reads records of v1 (BACKWARD compatible).
CLICK_V2 = {**CLICK_V1, "fields": [*CLICK_V1["fields"], {"name": "page", "type": "string", "default": "/"}]}
# v2 without the default: a reader of it cannot read records of v1 (not BACKWARD compatible).
CLICK_V2_NO_DEFAULT = {**CLICK_V1, "fields": [*CLICK_V1["fields"], {"name": "page", "type": "string"}]}
USER_KEY = {"type": "record", "name": "UserKey", "namespace": "io.streamapp.test",
            "fields": [{"name": "user", "type": "string"}]}


def _client(registry):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient(registry.client_conf())


def _wire_schema_id(payload: bytes) -> int:
    magic, schema_id = struct.unpack(">bI", payload[:5])
    assert magic == 0, "the Confluent wire format starts with a zero byte"
    return schema_id


def test_avro_keys_and_values_round_trip_through_kafka_under_topic_name_subjects(kafka, schema_registry):
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = _client(schema_registry)
    topic = f"clicks-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap, topic, partitions=2)
    # The serializers' defaults, as a user's producer has them: register on first use, subject by
    # TopicNameStrategy (<topic>-key, <topic>-value).
    key_serializer = AvroSerializer(client, json.dumps(USER_KEY))
    value_serializer = AvroSerializer(client, json.dumps(CLICK_V1))
    key_ctx, value_ctx = SerializationContext(topic, MessageField.KEY), SerializationContext(topic, MessageField.VALUE)
    clicks = [{"user": f"u{i % 3}", "n": i} for i in range(20)]
    produce(kafka.bootstrap, topic, [(key_serializer({"user": c["user"]}, key_ctx), value_serializer(c, value_ctx))
                                     for c in clicks])

    received = consume_all(kafka.bootstrap, topic, expect=len(clicks))

    # The registry is the session's: other tests' subjects are there too.
    assert sorted(s for s in client.get_subjects() if s.startswith(topic)) == [f"{topic}-key", f"{topic}-value"]
    value_id = client.get_latest_version(f"{topic}-value").schema_id
    key_id = client.get_latest_version(f"{topic}-key").schema_id
    assert {_wire_schema_id(v) for _, v in received} == {value_id}
    assert {_wire_schema_id(k) for k, _ in received} == {key_id}
    # A consumer knows no schema up front: each record's schema comes from the registry by its id.
    key_deserializer, value_deserializer = AvroDeserializer(client), AvroDeserializer(client)
    decoded = [(key_deserializer(k, key_ctx), value_deserializer(v, value_ctx)) for k, v in received]
    assert sorted(decoded, key=lambda kv: kv[1]["n"]) == [({"user": c["user"]}, c) for c in clicks]


def test_backward_compatibility_refuses_a_reader_that_cannot_read_the_old_records(schema_registry):
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.schema_registry.error import SchemaRegistryError
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = _client(schema_registry)
    topic = f"evolving-{uuid.uuid4().hex[:8]}"
    subject = f"{topic}-value"
    ctx = SerializationContext(topic, MessageField.VALUE)
    old_record = AvroSerializer(client, json.dumps(CLICK_V1))({"user": "a", "n": 1}, ctx)
    client.set_compatibility(subject, "BACKWARD")

    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(json.dumps(CLICK_V2_NO_DEFAULT), "AVRO"))
    assert refused.value.http_status_code == 409
    assert not client.test_compatibility(subject, Schema(json.dumps(CLICK_V2_NO_DEFAULT), "AVRO"))
    assert [v for v in client.get_versions(subject)] == [1]

    new_id = client.register_schema(subject, Schema(json.dumps(CLICK_V2), "AVRO"))
    new_record = AvroSerializer(client, json.dumps(CLICK_V2), conf={"auto.register.schemas": False,
                                                                      "use.latest.version": True})(
        {"user": "b", "n": 2, "page": "/cart"}, ctx)

    assert client.get_versions(subject) == [1, 2]
    assert _wire_schema_id(new_record) == new_id != _wire_schema_id(old_record)
    # A reader of v2 reads both, the old record with the new field's default.
    reader = AvroDeserializer(client, json.dumps(CLICK_V2))
    assert reader(old_record, ctx) == {"user": "a", "n": 1, "page": "/"}
    assert reader(new_record, ctx) == {"user": "b", "n": 2, "page": "/cart"}


def _protobuf_click_type():
    """A message class built from a descriptor at run time: what protoc would generate, without protoc."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto(name=f"click_{uuid.uuid4().hex[:8]}.proto", package="streamapp.test",
                                               syntax="proto3")
    message = proto.message_type.add(name="Click")
    message.field.add(name="user", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    message.field.add(name="n", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("streamapp.test.Click"))


CLICK_PROTO = """syntax = "proto3";
package streamapp.test;
message Click {
  string user = 1;
  int64 n = 2;
}
"""


def test_protobuf_values_read_back_under_a_schema_registered_as_proto_text(kafka, schema_registry):
    """The schema is registered as .proto text, the form Confluent's Java serializer sends. The Python
    serializer's own registration sends a base64 FileDescriptorProto instead, which this registry
    refuses (HTTP 422, "failed to compile protobuf") where Confluent's accepts both: so here the
    producer serializes against the subject's latest version, as a producer that does not register
    does."""
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = _client(schema_registry)
    click_type = _protobuf_click_type()
    topic = f"proto-clicks-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap, topic, partitions=1)
    ctx = SerializationContext(topic, MessageField.VALUE)
    client.register_schema(f"{topic}-value", Schema(CLICK_PROTO, "PROTOBUF"))
    serializer = ProtobufSerializer(click_type, client, conf={
        "use.deprecated.format": False, "auto.register.schemas": False, "use.latest.version": True})
    produce(kafka.bootstrap, topic, [(None, serializer(click_type(user=f"u{i}", n=i), ctx)) for i in range(5)])

    received = consume_all(kafka.bootstrap, topic, expect=5)

    latest = client.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "PROTOBUF"
    assert {_wire_schema_id(v) for _, v in received} == {latest.schema_id}
    deserializer = ProtobufDeserializer(click_type, conf={"use.deprecated.format": False})
    assert sorted((m.user, m.n) for m in (deserializer(v, ctx) for _, v in received)) == [(f"u{i}", i) for i in range(5)]


def test_a_registry_with_basic_auth_refuses_a_client_without_credentials(schema_registry_with_auth):
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    anonymous = SchemaRegistryClient({"url": schema_registry_with_auth.url})
    with pytest.raises(SchemaRegistryError) as refused:
        anonymous.get_subjects()
    assert refused.value.http_status_code == 401

    client = _client(schema_registry_with_auth)
    subject = f"auth-{uuid.uuid4().hex[:8]}-value"
    schema_id = client.register_schema(subject, Schema(json.dumps(CLICK_V1), "AVRO"))
    assert client.get_schema(schema_id).schema_str and subject in client.get_subjects()
