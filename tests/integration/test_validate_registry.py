"""`streamapp validate` against the test bed's schema registry, as a user runs it before an apply: the
columns an Avro or Protobuf source declares are checked against its subject's latest schema (registered
by confluent-kafka's serializer or client, as producers do), through HTTP Basic auth when the registry
asks for it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import uuid
from unittest import mock

import pytest
import yaml

from streamapp_api import cli

pytestmark = pytest.mark.integration
CLICK = {"type": "record", "name": "Click", "namespace": "io.streamapp.test", "fields": [
    {"name": "user", "type": "string"}, {"name": "n", "type": "long"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}


def names(stem: str) -> str:
    return f"{stem}-{uuid.uuid4().hex[:8]}"


def _register(registry, subject: str) -> None:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    SchemaRegistryClient(registry.client_conf()).register_schema(subject, Schema(json.dumps(CLICK), "AVRO"))


def _validate(tmp_path, url: str, topic: str, schema: dict, *args: str, user_info: str | None = None,
              key: dict | None = None, value_format: str = "avro"):
    """`streamapp validate` of an app reading ``topic`` (Avro unless ``value_format`` says otherwise; ``key``:
    more fields of the source): its exit status and what it printed."""
    doc = {"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": "clicks"}, "spec": {
        "kafka": {"bootstrapServers": "127.0.0.1:9092", "schemaRegistry": {"url": url}},
        "sources": [{"name": "clicks", "topic": topic, "format": value_format, "schema": schema, **(key or {})}],
        "streams": [{"name": "s", "from": "clicks", "steps": [{"filter": "user <> ''"}]}],
        "sinks": [{"from": "s", "kafka": {"topic": "out"}}]}}
    path = tmp_path / f"{topic}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    env = {"STREAMAPP_SCHEMA_REGISTRY_USER_INFO": user_info} if user_info else {}
    out = io.StringIO()
    with mock.patch.dict(os.environ, env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        if not user_info:
            os.environ.pop("STREAMAPP_SCHEMA_REGISTRY_USER_INFO", None)
        code = cli.main(["validate", str(path), *args])
    return code, out.getvalue()


def test_validate_checks_the_declared_columns_against_the_subject(schema_registry, tmp_path):
    topic = names("clicks")
    _register(schema_registry, f"{topic}-value")
    url = schema_registry.url

    code, out = _validate(tmp_path, url, topic, {"user": "string", "n": "long", "at": "timestamp"})
    assert code == 0 and "valid" in out and "warning" not in out, out

    code, out = _validate(tmp_path, url, topic, {"user": "string", "page": "string", "n": "string"})
    assert code == 1, out
    assert f"error: spec.sources[0].schema[page]: not a field of {topic}-value version 1 (its fields: user, n, at)" in out
    assert f"warning: spec.sources[0].schema[n]: declared string; {topic}-value version 1 has bigint" in out

    # --offline: only the manifest's own checks
    code, out = _validate(tmp_path, url, topic, {"user": "string", "page": "string"}, "--offline")
    assert code == 0 and "page" not in out, out

    # a subject not registered yet: a warning, the manifest valid
    code, out = _validate(tmp_path, url, names("unregistered"), {"user": "string"})
    assert code == 0 and "the registry has no subject" in out, out

    # the spec's address (the cluster's) does not answer here: --schema-registry gives this one
    code, out = _validate(tmp_path, "http://127.0.0.1:9", topic, {"page": "string"},
                          "--schema-registry", url)
    assert code == 1 and "schema[page]: not a field" in out, out


def test_validate_checks_an_avro_keys_fields_against_the_key_subject(schema_registry, tmp_path):
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    topic = names("keyed")
    _register(schema_registry, f"{topic}-value")
    key = {"type": "record", "name": "UserKey", "fields": [{"name": "user_id", "type": "string"}]}
    SchemaRegistryClient(schema_registry.client_conf()).register_schema(f"{topic}-key", Schema(json.dumps(key), "AVRO"))
    code, out = _validate(tmp_path, schema_registry.url, topic, {"user": "string"}, "--strict",
                          key={"keyFormat": "avro", "keySchema": {"user_id": "string"}})
    assert code == 0, out
    code, out = _validate(tmp_path, schema_registry.url, topic, {"user": "string"},
                          key={"keyFormat": "avro", "keySchema": {"id": "string"}})
    assert code == 1 and f"spec.sources[0].keySchema[id]: not a field of {topic}-key version 1 (its fields: user_id)" in out


def test_validate_sends_the_credentials_a_registry_asks_for(schema_registry_with_auth, tmp_path):
    registry = schema_registry_with_auth
    topic = names("clicks")
    _register(registry, f"{topic}-value")
    code, out = _validate(tmp_path, registry.url, topic, {"page": "string"})
    assert code == 0 and "warning: spec.kafka.schemaRegistry.url: not reachable from here" in out and "401" in out, out
    code, out = _validate(tmp_path, registry.url, topic, {"page": "string"},
                          user_info=f"{registry.username}:{registry.password}")
    assert code == 1 and "schema[page]: not a field" in out, out


def test_validate_checks_protobuf_columns_against_one_message_of_the_subject(schema_registry, tmp_path):
    """Two messages in the value schema (a record says which it is): the columns must fit one of them,
    with the runtime's rules of which column types a field fits; a key message under <topic>-key."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from streamapp_testkit.protobuf import message_classes, proto3_file, proto_text

    topic = names("clicks")
    client = SchemaRegistryClient(schema_registry.client_conf())
    value = proto3_file("shop.proto", "shop.v1", {
        "Page": [("path", 1, "string")],
        "Click": [("user", 1, "string"), ("n", 2, "int32"), ("at", 3, "google.protobuf.Timestamp")]})
    key = proto3_file("key.proto", "shop.v1", {"UserKey": [("user_id", 1, "string")]})
    # As test_protobuf_values.py: this registry takes .proto text, the serializer writes by the latest version.
    client.register_schema(f"{topic}-value", Schema(proto_text(value), "PROTOBUF"))
    client.register_schema(f"{topic}-key", Schema(proto_text(key), "PROTOBUF"))
    click = message_classes(value)["Click"]
    serializer = ProtobufSerializer(click, client, {"auto.register.schemas": False, "use.latest.version": True})
    assert serializer(click(user="a", n=1), SerializationContext(topic, MessageField.VALUE))
    keyed = {"keyFormat": "protobuf", "keySchema": {"user_id": "string"}}

    code, out = _validate(tmp_path, schema_registry.url, topic, {"user": "string", "n": "long", "at": "timestamp"},
                          "--strict", key=keyed, value_format="protobuf")
    assert code == 0 and "warning" not in out, out

    code, out = _validate(tmp_path, schema_registry.url, topic, {"user": "string", "n": "string", "page": "string"},
                          key={**keyed, "keySchema": {"id": "string"}}, value_format="protobuf")
    assert code == 1, out
    version = f"{topic}-value version 1 shop.v1.Click"
    assert f"error: spec.sources[0].schema[n]: declared string; {version} has int: int32 does not fit a string " \
           "column, so the app would not start" in out
    assert f"error: spec.sources[0].schema[page]: not a field of {version} (its fields: user, n, at)" in out
    assert f"error: spec.sources[0].keySchema[id]: not a field of {topic}-key version 1 (its fields: user_id)" in out

    # Described by a descriptor set: no registry is read, so nothing is asked of it.
    described = {"protobuf": {"message": "shop.v1.Click", "descriptorSet": {"configMap": "protos", "key": "shop.desc"}}}
    code, out = _validate(tmp_path, schema_registry.url, names("unregistered"), {"page": "string"}, "--strict",
                          key=described, value_format="protobuf")
    assert code == 0 and "registry" not in out, out
