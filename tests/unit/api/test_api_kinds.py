"""Sink kinds and value formats are declared once, in the API: every kind has what the rest of the
project needs (a writer or reader in the runtime, a docs entry, an example), and nothing outside the
declarations branches on a kind's name."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest
import yaml

from streamapp_api.sinks import (
    SINK_KEY_FORMATS, SINK_KINDS, SINK_VALUE_FORMATS, KafkaSink, Sink, SinkKeyFormat, SinkTarget, SinkValueFormat,
    query_name_of,
)
from streamapp_api.sources import VALUE_FORMATS, Source, Table, ValueFormat

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[3]


def _examples() -> list[dict]:
    return [doc for path in sorted((REPO / "examples").glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc and doc.get("kind") == "StreamApp"]


def test_every_sink_field_is_a_declared_kind():
    targets = {name for name, field in Sink.model_fields.items()
               if isinstance(field.annotation, type) and issubclass(field.annotation, SinkTarget)
               or any(isinstance(a, type) and issubclass(a, SinkTarget) for a in get_args(field.annotation))}
    assert targets == set(SINK_KINDS)


def test_every_sink_kind_has_a_writer_docs_and_an_example():
    from streamapp_runtime.sinks import WRITERS

    api_docs = (REPO / "docs/api.md").read_text()
    used = {kind for app in _examples() for sink in app["spec"].get("sinks", []) for kind in SINK_KINDS if kind in sink}
    for kind in SINK_KINDS:
        assert kind in WRITERS, f"sink kind {kind!r} has no writer in streamapp_runtime.sinks.WRITERS"
        assert f"- `{kind}: {{" in api_docs, f"sink kind {kind!r} is not described under 'Sinks' in docs/api.md"
        assert kind in used, f"no example in examples/ writes to a {kind} sink"


def test_every_value_format_has_a_reader_docs_and_an_example():
    from streamapp_runtime.compile.sources import FORMATS

    assert set(get_args(ValueFormat)) == set(VALUE_FORMATS) == set(FORMATS)
    api_docs = (REPO / "docs/api.md").read_text()
    used = {item.get("format", Source.model_fields["format"].default) for app in _examples()
            for item in [*app["spec"].get("sources", []), *app["spec"].get("tables", [])]}
    for name, kind in VALUE_FORMATS.items():
        assert (FORMATS[name].malformed_reason is not None) == kind.can_be_malformed, name
        assert f"`{name}`" in api_docs, f"value format {name!r} is not described in docs/api.md"
        assert name in used, f"no example in examples/ reads format {name!r}"


@pytest.mark.parametrize("field, formats, literal, encoders", [
    ("format", SINK_VALUE_FORMATS, SinkValueFormat, "VALUE_ENCODERS"),
    ("key_format", SINK_KEY_FORMATS, SinkKeyFormat, "KEY_ENCODERS"),
])
def test_every_sink_format_has_an_encoder_docs_and_an_example(field, formats, literal, encoders):
    from streamapp_runtime.sinks import kafka_values

    assert set(get_args(literal)) == set(formats) == set(getattr(kafka_values, encoders))
    api_docs = (REPO / "docs/api.md").read_text()
    alias = KafkaSink.model_fields[field].alias or field
    used = {sink["kafka"].get(alias, KafkaSink.model_fields[field].default) for app in _examples()
            for sink in app["spec"].get("sinks", []) if "kafka" in sink}
    for name in formats:
        assert f"`{name}`" in api_docs.split("### Sinks", 1)[1], f"sink {alias} {name!r} is not under 'Sinks' in docs/api.md"
        assert name in used, f"no example in examples/ writes {alias} {name!r} to a Kafka sink"


@pytest.mark.parametrize("model", [Source, Table])
def test_the_schema_rule_follows_the_format(model):
    base = {"name": "clicks", "topic": "clicks"}
    for name, kind in VALUE_FORMATS.items():
        with_schema = model.model_validate({**base, "format": name, "schema": {"user": "string"}})
        without = model.model_validate({**base, "format": name})
        assert (kind.schema_problem(name, True) is None) == kind.needs_schema
        assert (kind.schema_problem(name, False) is None) != kind.needs_schema
        assert with_schema.columns() >= ({"user"} if kind.needs_schema else set(kind.columns))
        assert without.columns() >= set(kind.columns)


@pytest.mark.parametrize("item, name", [
    ({"from": "clicks", "kafka": {"topic": "Out.Topic"}}, "clicks-out-topic"),
    ({"from": "s", "postgres": {"secretRef": {"name": "pg"}, "table": "a.b", "primaryKey": ["k"]}}, "s-a-b"),
    ({"name": "mine", "from": "s", "kafka": {"topic": "t"}}, "mine"),
])
def test_the_operator_pairs_sinks_by_the_query_name_the_runtime_uses(item, name):
    assert query_name_of(item) == Sink.model_validate(item).query_name == name


# A kind test outside the declarations: a sink's kind tested by hand, or a format compared by name.
_KIND_TESTS = re.compile(r"\b(sinks?\w*|s)\.(kafka|postgres)\b|"
                         r"\bformat\s*[!=]=\s*['\"]|\.kind\s*[!=]=\s*['\"](kafka|postgres)['\"]|"
                         r"['\"](kafka|postgres)['\"] if\b|['\"](json|string)['\"] if\b")
_DECLARATIONS = {"crds/streamapp_api/sinks.py", "crds/streamapp_api/sources.py"}


def test_no_kind_is_tested_by_name_outside_its_declaration():
    found = []
    for package in ("crds", "operator", "apps", "demo"):
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            # a runtime writer module is its kind's own code
            if rel in _DECLARATIONS or rel.startswith("apps/streamapp_runtime/sinks/"):
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if _KIND_TESTS.search(line):
                    found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, "ask the kind's declaration (SINK_KINDS, VALUE_FORMATS) instead:\n" + "\n".join(found)
