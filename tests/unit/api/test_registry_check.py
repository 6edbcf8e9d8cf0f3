"""`streamapp validate`'s check of registry-read columns, without a registry: the comparison, and what it
says when the registry does not answer (the real registry: tests/integration/test_validate_registry.py)."""

from __future__ import annotations

import socket

import pytest

from streamapp_api import load
from streamapp_api.registry_check import RegistryAccess, _column_issues, registry_issues

pytestmark = pytest.mark.unit
FIELDS = {"user": "string", "n": "bigint", "at": "timestamp"}


@pytest.mark.parametrize("declared, found", [
    ({"user": "string", "n": "long"}, []),  # long is bigint
    ({"n": "BIGINT", "at": "timestamp"}, []),
    ({"page": "string"}, [("error", "s.schema[page]", "not a field of clicks-value version 2 (its fields: user, n, at)")]),
    ({"n": "string"}, [("warning", "s.schema[n]", "declared string; clicks-value version 2 has bigint: each value is cast")]),
])
def test_declared_columns_against_the_registrys_fields(declared, found):
    issues = _column_issues("s.schema", declared, FIELDS, "clicks-value version 2")
    assert [(i.severity, i.path) for i in issues] == [(s, p) for s, p, _ in found]
    assert all(m in i.message for i, (_, _, m) in zip(issues, found))


def _app(**kafka):
    return load({"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": "a"}, "spec": {
        "kafka": {"bootstrapServers": "kafka:9092", **kafka},
        "sources": [{"name": "clicks", "topic": "clicks", "format": "avro", "schema": {"user": "string"}}],
        "streams": [{"name": "s", "from": "clicks", "steps": [{"filter": "user <> ''"}]}],
        "sinks": [{"from": "s", "kafka": {"topic": "out"}}]}})


def test_a_registry_that_does_not_answer_is_one_warning_naming_the_field():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    issues = registry_issues(_app(schemaRegistry={"url": url}), RegistryAccess(timeout=2))
    assert [(i.severity, i.path) for i in issues] == [("warning", "spec.kafka.schemaRegistry.url")]
    assert "not reachable from here" in issues[0].message and "--offline" in issues[0].message


def test_an_app_without_registry_formats_asks_nothing():
    app = load({"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": "a"}, "spec": {
        "kafka": {"bootstrapServers": "kafka:9092", "schemaRegistry": {"url": "http://192.0.2.1:8081"}},
        "sources": [{"name": "lines", "topic": "t", "format": "string"}],
        "streams": [{"name": "s", "from": "lines", "steps": [{"filter": "value <> ''"}]}],
        "sinks": [{"from": "s", "kafka": {"topic": "out"}}]}})
    assert registry_issues(app, RegistryAccess(timeout=0.01)) == []


def test_without_the_protobuf_package_protobuf_columns_are_a_warning_not_checked(monkeypatch):
    """The API's own dependencies do not include protobuf: validate says it did not check, and goes on."""
    from streamapp_api import registry_check

    def no_protobuf(registry, answer, subject):
        raise ImportError("No module named 'google'")

    monkeypatch.setattr(registry_check.Registry, "latest",
                        lambda self, subject, timeout: {"schemaType": "PROTOBUF", "version": 3, "schema": "..."})
    monkeypatch.setitem(registry_check.COLUMNS_OF, "PROTOBUF", no_protobuf)
    app = load({"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": "a"}, "spec": {
        "kafka": {"bootstrapServers": "kafka:9092", "schemaRegistry": {"url": "http://192.0.2.1:8081"}},
        "sources": [{"name": "clicks", "topic": "clicks", "format": "protobuf", "schema": {"user": "string"}}],
        "streams": [{"name": "s", "from": "clicks", "steps": [{"filter": "user <> ''"}]}],
        "sinks": [{"from": "s", "kafka": {"topic": "out"}}]}})
    issues = registry_issues(app, RegistryAccess(timeout=0.01))
    assert [(i.severity, i.path) for i in issues] == [("warning", "spec.sources[0]")]
    assert issues[0].message.startswith("PROTOBUF columns were not checked against clicks-value version 3")
