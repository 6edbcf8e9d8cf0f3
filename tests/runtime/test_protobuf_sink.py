"""Kafka sinks of format protobuf against the test bed's real schema registry, read back as users read
them: confluent-kafka's ProtobufDeserializer, which parses each value after the wire format's schema
id and message indexes, given the message class a consumer has (built here from the registered schema,
as generated code would be). click-sessions' 1-minute windows, written by one app to two sinks, one
at-least-once with Protobuf keys and one exactly-once, are compared with the same pipeline in plain
Python, then read by an app with a source of format protobuf. The exactly-once writer's crash path
is the Avro sink's (test_avro_sink.py): it produces the bytes the encoder made, whatever the format."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from datetime import timedelta, timezone

import pytest

from streamapp_testkit.manifests import click_sessions_manifest
from streamapp_testkit.runtime import closed_click_windows, produce_in_turn, run_available_now, watermark_flush
from streamapp_testbed import clickstream
from streamapp_testbed.kafka_admin import create_topic, read_topic

pytestmark = pytest.mark.integration

WINDOW_FIELDS = ("clicks", "page_views", "time_spent")


def message_class(registry_url: str, subject: str):
    """The class of the first message of the subject's latest schema, from the registry's descriptor
    (?format=serialized): what a consumer's generated code would be."""
    from google.protobuf.message_factory import GetMessageClass

    from streamapp_api.protobuf_schemas import top_level_messages
    from streamapp_api.schema_registry import Registry

    return GetMessageClass(top_level_messages(Registry(registry_url), subject)[0])


def protobuf_records(kafka, registry, topic: str, protobuf_keys: bool) -> list[tuple]:
    """Every (key, value message) of ``topic`` for a read_committed consumer, through ProtobufDeserializer."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient(registry.client_conf())
    values = ProtobufDeserializer(message_class(registry.url, f"{topic}-value"), {}, client)
    keys = ProtobufDeserializer(message_class(registry.url, f"{topic}-key"), {}, client) if protobuf_keys else None
    value_ctx, key_ctx = SerializationContext(topic, MessageField.VALUE), SerializationContext(topic, MessageField.KEY)
    messages = read_topic(kafka.bootstrap, topic, idle=None, timeout=120, to_end=True,
                          config={"isolation.level": "read_committed"})
    return [(keys(m.key(), key_ctx) if keys else m.key().decode(), values(m.value(), value_ctx)) for m in messages]


def latest_schema(registry, subject: str) -> dict:
    from streamapp_api.schema_registry import Registry

    latest = Registry(registry.url).get(f"/subjects/{subject}/versions/latest")
    assert latest is not None, subject
    return latest


def windows(messages) -> dict:
    """(session_id, uuid, window_start) -> (clicks, page_views, time_spent), each window once (a
    duplicate fails the comparison)."""
    got = Counter((m.session_id, m.uuid, m.window_start.ToDatetime(tzinfo=timezone.utc)) for m in messages)
    assert max(got.values()) == 1, [k for k, n in got.items() if n > 1][:5]
    return {(m.session_id, m.uuid, m.window_start.ToDatetime(tzinfo=timezone.utc)): tuple(getattr(m, f) for f in WINDOW_FIELDS)
            for m in messages}


def test_windows_written_as_protobuf_are_read_back_with_confluent_s_deserializer(kafka, schema_registry, spark, names,
                                                                                  tmp_path):
    from streamapp_api import load

    topic, out, once = names("clicks"), names("windows"), names("windows-once")
    create_topic(kafka.bootstrap, topic, partitions=2)
    create_topic(kafka.bootstrap, out, partitions=2)
    create_topic(kafka.bootstrap, once, partitions=2)
    events = clickstream.generate(seed=11, users=12, minutes=4)
    produce_in_turn(kafka.bootstrap, topic, events, partitions=2)
    doc = click_sessions_manifest(topic, out, "unused", name="protobuf-" + os.urandom(3).hex())
    spec = doc["spec"]
    spec["kafka"]["schemaRegistry"] = {"url": schema_registry.url}
    spec["state"]["checkpoint"]["accessModes"] = ["ReadWriteOnce"]
    sink = spec["sinks"][0]["kafka"]
    spec["sinks"] = [
        {"from": "sessions", "kafka": {**sink, "format": "protobuf", "keyFormat": "protobuf"}},
        {"from": "sessions", "kafka": {**sink, "topic": once, "format": "protobuf", "delivery": "exactly-once"}},
    ]
    the_app = load(doc)
    run_available_now(spark, the_app, kafka, tmp_path / "checkpoint")
    flush = watermark_flush(events)  # a later batch, whose watermark closes every window of the events
    produce_in_turn(kafka.bootstrap, topic, [flush], partitions=1)
    run_available_now(spark, the_app, kafka, tmp_path / "checkpoint")

    want = closed_click_windows([*events, flush])
    assert len(want) > 30
    records = protobuf_records(kafka, schema_registry, out, protobuf_keys=True)
    assert windows([value for _, value in records]) == want
    assert all(key.session_id == value.session_id for key, value in records)  # keys: messages of one field
    assert {value.window_end.ToDatetime() - value.window_start.ToDatetime() for _, value in records} == {
        timedelta(minutes=1)}
    exactly_once = protobuf_records(kafka, schema_registry, once, protobuf_keys=False)
    assert windows([value for _, value in exactly_once]) == want
    assert all(key == value.session_id for key, value in exactly_once)

    # What the registry holds: .proto text, a message named after the subject, the columns in the stream's order.
    registered = latest_schema(schema_registry, f"{out}-value")
    assert registered["schemaType"] == "PROTOBUF" and registered["version"] == 1  # the second run: the same id
    text = registered["schema"]
    message = re.sub(r"\W", "_", f"{out}-value")
    assert f"message {message} {{" in text and 'import "google/protobuf/timestamp.proto";' in text
    assert "google.protobuf.Timestamp window_start = 1;" in text and "optional string session_id = 3;" in text
    assert "string session_id = 1;" in latest_schema(schema_registry, f"{out}-key")["schema"]

    # And an app downstream reads them with a source of format protobuf.
    copied = names("copied")
    create_topic(kafka.bootstrap, copied, partitions=1)
    reader = load({**the_app.to_dict(), "metadata": {"name": names("reader")[:50].rstrip("-")}, "spec": {
        "kafka": {"bootstrapServers": "kafka:9092", "schemaRegistry": {"url": schema_registry.url}},
        "sources": [{"name": "windows", "topic": out, "format": "protobuf",
                     "schema": {"session_id": "string", "uuid": "string", "window_start": "timestamp", "clicks": "bigint"}}],
        "sinks": [{"from": "windows", "kafka": {"topic": copied, "key": "session_id"}}]}})
    run_available_now(spark, reader, kafka, tmp_path / "reader")
    read_back = [json.loads(m.value()) for m in read_topic(kafka.bootstrap, copied, idle=None, timeout=60, to_end=True)]
    assert sorted((r["session_id"], r["uuid"], r["window_start"], r["clicks"]) for r in read_back) == sorted(
        (s, u, clickstream.iso(w).replace("000Z", "Z"), clicks) for (s, u, w), (clicks, _, _) in want.items())
