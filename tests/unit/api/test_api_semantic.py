"""Semantic checks as tables: a small valid app, one change, the exact finding (or none)."""

import copy
import json
import subprocess
import sys

import pytest

from streamapp_api import InvalidSpec, load, parse, validate
from streamapp_api.flow import select_names

pytestmark = pytest.mark.unit

BASE = {
    "apiVersion": "streamapp.io/v1alpha1",
    "kind": "StreamApp",
    "metadata": {"name": "t"},
    "spec": {
        "kafka": {"bootstrapServers": "kafka:9092"},
        "sources": [
            {"name": "clicks", "topic": "clicks", "eventTime": "ts", "watermark": "30s",
             "schema": {"user": "string", "event": "string", "amount": "double", "ts": "timestamp"}},
            {"name": "views", "topic": "views", "eventTime": "ts", "watermark": "30s",
             "schema": {"user": "string", "page": "string", "ts": "timestamp"}},
        ],
        "tables": [{"name": "profiles", "topic": "profiles", "key": "user",
                    "schema": {"user": "string", "tier": "string", "event": "string"}}],
        "streams": [{"name": "out", "from": "clicks", "steps": []}],
        "sinks": [{"from": "out", "kafka": {"topic": "out"}}],
    },
}


def app_with(steps, emit=None, **spec):
    doc = copy.deepcopy(BASE)
    doc["spec"]["streams"][0]["steps"] = steps
    if emit:
        doc["spec"]["streams"][0]["emit"] = emit
    doc["spec"].update(spec)
    return doc


def errors(doc):
    return [(i.path, i.message) for i in validate(doc) if i.severity == "error"]


WINDOW = {"window": {"type": "tumbling", "size": "1m"}}
AGG = {"aggregate": {"groupBy": ["user"], "columns": {"n": "count(*)"}}}
STREAM_JOIN = {"join": {"stream": "views", "using": ["user"], "within": "5s"}}


@pytest.mark.parametrize("steps, emit", [
    ([], None),
    ([{"filter": "amount > 0"}, {"select": ["user", "amount * 2 AS double_amount", "ts"]}], None),
    ([WINDOW, AGG], "final"),
    ([WINDOW, AGG], "updates"),
    ([AGG], "updates"),
    ([AGG], None),  # default: updates for a running aggregate
    ([STREAM_JOIN], None),  # default: final (append), which stream joins need
    ([STREAM_JOIN, WINDOW, AGG], "final"),  # chained stateful operators in append mode
    ([{"join": {"table": "profiles", "key": "user", "type": "left"}}, {"filter": "tier = 'gold'"}], None),
    ([{"dedupe": {"keys": ["user", "event"], "within": "10m"}}, WINDOW, AGG], "final"),
    ([{"keyBy": "user"}, {"accumulate": {"columns": {"total": "sum(amount)"}}}], None),
    ([{"withColumns": {"words": "split(event, ' ')"}}, {"explode": {"column": "words", "as": "e"}}], None),
    ([{"sql": "SELECT user, count(*) AS n FROM input GROUP BY user"}], "updates"),
    ([{"window": {"type": "session", "gap": "5m"}}, AGG], "final"),
    ([{"window": {"type": "hopping", "size": "10m", "advance": "1m"}}, AGG], "final"),
    ([WINDOW, AGG, {"filter": "n > 1"}, {"window": {"type": "tumbling", "size": "5m"}},
      {"aggregate": {"columns": {"users": "count(*)", "busiest": "max(n)"}}}], "final"),  # window of windows
    ([WINDOW, AGG, WINDOW, {"aggregate": {"columns": {"users": "count(*)"}}}], None),  # default: final
])
def test_valid_pipelines(steps, emit):
    assert errors(app_with(steps, emit)) == []


@pytest.mark.parametrize("steps, emit, path, fragment", [
    ([WINDOW], None, "spec.streams[0].steps[0].window", "followed directly by an aggregate"),
    ([WINDOW, {"filter": "true"}, AGG], None, "spec.streams[0].steps[0].window", "followed directly"),
    ([{"window": {"type": "session", "gap": "5m"}}, {"aggregate": {"columns": {"n": "count(*)"}}}], None,
     "spec.streams[0].steps[1].aggregate.groupBy", "session window needs at least one groupBy"),
    ([AGG], "final", "spec.streams[0].steps[0].aggregate", "emit: final needs a window"),
    ([WINDOW, AGG, {"aggregate": {"columns": {"users": "count(*)"}}}], "final", "spec.streams[0].steps[2].aggregate",
     "put a window step before this aggregate (one of the same size keeps the same windows)"),
    ([WINDOW, AGG, WINDOW, {"aggregate": {"columns": {"users": "count(*)"}}}], "updates",
     "spec.streams[0].steps[3].aggregate", "one aggregation per query"),
    ([STREAM_JOIN, AGG], None, "spec.streams[0].steps[1].aggregate", "emit: final needs a window"),
    ([STREAM_JOIN], "updates", "spec.streams[0].emit", "not possible after a stream-stream join"),
    ([AGG, {"accumulate": {"columns": {"t": "sum(n)"}}}], "updates", "spec.streams[0].steps[1].accumulate",
     "one aggregation per query"),
    ([{"select": ["user", "amount"]}, WINDOW, AGG], "final", "spec.streams[0].steps[1].window", "no event-time column"),
    ([{"withColumns": {"ts": "current_timestamp()"}}, WINDOW, AGG], "final", "spec.streams[0].emit",
     "needs a watermark"),
    ([{"join": {"table": "profiles", "key": "customer"}}], None, "spec.streams[0].steps[0].join.key", "does not exist"),
    ([{"join": {"stream": "views", "using": ["page"], "within": "5s"}}], None,
     "spec.streams[0].steps[0].join.using[0]", "'page' does not exist in 'out'"),
    ([{"join": {"stream": "out", "using": ["user"], "within": "5s"}}], None,
     "spec.streams[0].steps[0].join.stream", "cannot join itself"),
    ([{"accumulate": {"key": ["customer"], "columns": {"t": "sum(amount)"}}}], None,
     "spec.streams[0].steps[0].accumulate.key[0]", "does not exist"),
    ([{"dedupe": {"keys": ["session"], "within": "1m"}}], None, "spec.streams[0].steps[0].dedupe.keys[0]", "does not exist"),
    ([{"select": ["user", "upper(event)"]}], None, "spec.streams[0].steps[0].select[1]", "AS name"),
    ([{"select": ["nope"]}], None, "spec.streams[0].steps[0].select[0]", "does not exist"),
    ([{"sql": "SELECT * FROM clicks"}], None, "spec.streams[0].steps[0].sql", "'input'"),
    ([{"filter": "a", "sql": "SELECT * FROM input"}], None, "spec.streams[0].steps[0]", "keys filter, sql"),
    ([{"window": {"type": "hopping", "size": "1m", "advance": "2m"}}, AGG], None,
     "spec.streams[0].steps[0].window.advance", "advance 2m is longer than size 1m"),
    ([{"window": {"type": "hopping", "size": "1h", "advance": "1d"}}, AGG], None,
     "spec.streams[0].steps[0].window.advance", "longer than size"),
    ([{"join": {"table": "profiles", "using": ["user"]}}], None, "spec.streams[0].steps[0].join.using", "table join"),
])
def test_refused_pipelines(steps, emit, path, fragment):
    found = errors(app_with(steps, emit))
    assert any(p == path and fragment in m for p, m in found), found


def test_stream_join_needs_watermarks_on_both_sides():
    doc = app_with([STREAM_JOIN])
    del doc["spec"]["sources"][1]["watermark"]
    assert errors(doc) == [("spec.streams[0].steps[0].join.stream",
                            "a stream-stream join needs a watermark on both sides; 'views' has none "
                            "(set watermark on its source)")]


def test_emit_mode_is_inherited_and_conflicts_are_named_downstream():
    doc = app_with([WINDOW, AGG], "final")
    doc["spec"]["streams"].append({"name": "big", "from": "out", "steps": [{"filter": "n > 1"}], "emit": "updates"})
    doc["spec"]["sinks"].append({"from": "big", "kafka": {"topic": "big"}})
    found = errors(doc)
    assert [p for p, _ in found] == ["spec.streams[1].emit"]
    assert "out (final)" in found[0][1]


def test_aggregations_across_streams_count_per_query():
    doc = app_with([AGG], "updates")
    doc["spec"]["streams"].append({"name": "top", "from": "out", "steps": [
        {"aggregate": {"columns": {"most": "max(n)"}}}]})
    doc["spec"]["sinks"].append({"from": "top", "kafka": {"topic": "top"}})
    assert [p for p, _ in errors(doc)] == ["spec.streams[1].steps[0].aggregate"]


@pytest.mark.parametrize("change, path, fragment", [
    (lambda s: s["streams"][0].update({"from": "profiles"}), "spec.streams[0].from", "is a table"),
    (lambda s: s["streams"][0].update({"from": "nowhere"}), "spec.streams[0].from", "not defined"),
    (lambda s: s["sinks"][0].update({"from": "nowhere"}), "spec.sinks[0].from", "not defined"),
    (lambda s: s["tables"][0].update({"name": "clicks"}), "spec.tables[0].name", "already used"),
    (lambda s: s["streams"].append({"name": "out", "from": "clicks"}), "spec.streams[1].name", "already used"),
    (lambda s: s["streams"][0].update({"name": "input"}) or s["sinks"][0].update({"from": "input"}),
     "spec.streams[0].name", "reserved"),
    (lambda s: s["streams"].extend([{"name": "a", "from": "b"}, {"name": "b", "from": "a"}]),
     "spec.streams[2].from", "cycle: a -> b -> a (each reads the next)"),
    (lambda s: s["sinks"].append({"from": "out", "kafka": {"topic": "out"}}), "spec.sinks[1].name", "also used"),
    (lambda s: s["sinks"].__setitem__(0, {"from": "out", "postgres": {"secretRef": {"name": "pg"}, "table": "t",
                                                                    "primaryKey": ["user", "nope"]}}),
     "spec.sinks[0].postgres.primaryKey[1]", "does not exist"),
    (lambda s: s["sinks"][0]["kafka"].update({"key": "nope"}), "spec.sinks[0].kafka.key", "does not exist"),
    (lambda s: s["sources"][0].update({"eventTime": "event"}), "spec.sources[0].eventTime", "must be a timestamp"),
    (lambda s: s["sources"][0]["schema"].update({"tags": "list<string>"}), "spec.sources[0].schema.tags",
     "not a Spark SQL type"),
    (lambda s: s["tables"][0].update({"key": "id"}), "spec.tables[0].key", "not in the table's schema"),
    (lambda s: s.update({"kafka": {"bootstrapServers": "k:9092", "options": {"kafka.group.id": "x"}}}),
     "spec.kafka.options[kafka.group.id]", "managed by Spark"),
    (lambda s: s.update({"sparkConf": {"executor.memory": "1g"}}), "spec.sparkConf[executor.memory]", "start with 'spark.'"),
    (lambda s: s.update({"sparkConf": {"spark.foo": "a\nspark.master=local"}}), "spec.sparkConf[spark.foo]",
     "control, format and separator characters"),
    (lambda s: s.update({"sparkConf": {"spark.dynamicAllocation.enabled": "true"}}),
     "spec.sparkConf[spark.dynamicAllocation.enabled]", "managed by the operator"),
    (lambda s: s.update({"sparkConf": {"spark.decommission.enabled": "false"}}),
     "spec.sparkConf[spark.decommission.enabled]", "turns executor decommissioning on"),
    (lambda s: s.update({"sparkConf": {"spark.streamapp.stateFunction": "pandas"}}),
     "spec.sparkConf[spark.streamapp.stateFunction]", "use one of transformWithState, applyInPandasWithState"),
    (lambda s: s.update({"deadLetter": {"topic": "clicks"}}), "spec.deadLetter.topic", "also an input topic"),
    (lambda s: s.update({"scaling": {"minExecutors": 3, "maxExecutors": 2}}), "spec.scaling.minExecutors",
     "must not exceed maxExecutors"),
    (lambda s: s.update({"executors": 2, "scaling": {"minExecutors": 3}}), "spec.executors", "within"),
    (lambda s: s.update({"executors": 2, "scaling": {"mode": "load"}}), "spec.executors",
     "executors is the manual count, but scaling.mode is load"),
    (lambda s: s.update({"scaling": {"mode": "manual"}}), "spec.scaling.mode", "manual needs spec.executors"),
    (lambda s: s.update({"restartPolicy": {"backoff": "2d", "maxBackoff": "1d"}}), "spec.restartPolicy.backoff",
     "must not exceed maxBackoff"),
    (lambda s: s["sources"][0].update({"topics": ["a"]}), "spec.sources[0].topic", "exactly one of topic or topics"),
    (lambda s: s["sources"][1].update({"format": "string"}), "spec.sources[1].schema", "remove schema"),
    (lambda s: s["sinks"][0].update({"postgres": {"secretRef": {"name": "pg"}, "table": "t", "primaryKey": ["user"]}}),
     "spec.sinks[0]", "exactly one of kafka or postgres"),
])
def test_refused_specs(change, path, fragment):
    doc = copy.deepcopy(BASE)
    change(doc["spec"])
    found = errors(doc)
    assert any(p == path and fragment in m for p, m in found), found


@pytest.mark.parametrize("change, path, fragment", [
    (lambda s: s.update({"shufflePartitions": 4}), "spec.shufflePartitions", "has no effect"),
    (lambda s: s["streams"][0]["steps"].extend([AGG]) or s.update(
        {"shufflePartitions": 2, "scaling": {"maxExecutors": 4}}), "spec.shufflePartitions", "at most 2 of the 8"),
    (lambda s: s.update({"state": {"checkpoint": {"accessModes": ["ReadWriteOnce"]}}, "executors": 2}),
     "spec.state.checkpoint.accessModes", "cannot scale out beyond that node"),
    (lambda s: s["sinks"][0]["kafka"].update({"topic": "clicks"}), "spec.sinks[0].kafka.topic", "read back"),
    (lambda s: s["streams"][0]["steps"].extend([WINDOW, AGG]) or s["sinks"].__setitem__(
        0, {"from": "out", "postgres": {"secretRef": {"name": "pg"}, "table": "t", "primaryKey": ["user"]}}),
     "spec.sinks[0].postgres.primaryKey", "window_start"),
])
def test_warnings_do_not_fail(change, path, fragment):
    doc = copy.deepcopy(BASE)
    change(doc["spec"])
    found = validate(doc)
    assert [i for i in found if i.severity == "error"] == []
    assert any(i.path == path and fragment in i.message and i.severity == "warning" for i in found), found
    load(doc)


@pytest.mark.parametrize("document, path, fragment", [
    ({**BASE, "kind": "Deployment"}, "kind", "'StreamApp'"),
    ({**BASE, "apiVersion": "streamapp.io/v1"}, "apiVersion", "'streamapp.io/v1alpha1'"),
    ({**BASE, "metadata": {"name": "Bad_Name"}}, "metadata.name", "DNS label"),
    ({**BASE, "spec": {**BASE["spec"], "sourcez": []}}, "spec.sourcez", "allowed fields here: image"),
    ({**BASE, "spec": {**BASE["spec"], "sources": []}}, "spec.sources", "at least 1"),
    ({**BASE, "spec": {**BASE["spec"], "trigger": 10}}, "spec.trigger",
     "expected text, got the number 10: use a positive whole number and one unit"),
    ({**BASE, "spec": {**BASE["spec"], "executors": "three"}}, "spec.executors", "expected an integer"),
])
def test_shape_errors_name_the_field(document, path, fragment):
    app, issues = parse(document)
    assert app is None
    assert any(i.path == path and fragment in i.message for i in issues), [str(i) for i in issues]


def test_load_raises_with_all_errors():
    doc = app_with([WINDOW], "final")
    doc["spec"]["sinks"][0]["from"] = "nowhere"
    with pytest.raises(InvalidSpec) as info:
        load(doc)
    assert {i.path for i in info.value.issues} == {"spec.streams[0].steps[0].window", "spec.sinks[0].from"}


def test_defaults_and_helpers():
    app = load(app_with([]))
    spec = app.spec
    assert (spec.scaling.min_executors, spec.scaling.max_executors, spec.executors) == (1, None, None)
    assert spec.scaling_mode == "partitions"
    assert load(app_with([]) | {"spec": {**app_with([])["spec"], "executors": 2}}).spec.scaling_mode == "manual"
    assert spec.to_dict()["scaling"] == {"minExecutors": 1}  # the load settings stay out of the manifest
    scaling = spec.scaling.with_load_defaults()
    assert (scaling.target_utilization, scaling.catch_up, scaling.scale_up_window, scaling.scale_down_window) == \
        (0.7, "5m", "30s", "5m")
    assert spec.state.checkpoint.access_modes == ["ReadWriteOnce"] and spec.state.retain_on_delete
    assert spec.state.checkpoint.size == "10Gi" and spec.state.checkpoint.location is None
    assert spec.sources[0].starting_offsets == "earliest" and spec.sources[0].format == "json"
    assert spec.sinks[0].query_name == "out-out"
    assert spec.dead_letter.enabled and spec.dead_letter.topic is None and app.dead_letter_topic == "t.dlq"
    assert app.to_dict()["spec"]["restartPolicy"] == {"backoff": "10s", "maxBackoff": "5m", "maxRestarts": 0}


@pytest.mark.parametrize("items, names, star", [
    (["a", "b AS c", "upper(x) as Y"], ["a", "c", "Y"], False),
    (["*", "1 AS one"], ["one"], True),
    (["f(x)"], [None], False),
])
def test_select_names(items, names, star):
    assert select_names(items) == (names, star)


def test_api_package_imports_no_spark_kopf_or_kubernetes():
    code = ("import sys, streamapp_api, streamapp_api.cli, streamapp_api.crd, streamapp_api.validate_cli; "
            "bad = [m for m in ('pyspark', 'kopf', 'kubernetes') if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    import os
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p.endswith("crds")) or "crds")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout + result.stderr


DESCRIBED = {"message": "shop.v1.Order", "descriptorSet": {"configMap": "shop-protos", "key": "shop.desc"}}


def test_protobuf_described_by_a_descriptor_set_needs_no_registry():
    doc = _with_source(format="protobuf", protobuf=DESCRIBED)
    doc["spec"]["tables"][0].update(format="protobuf", protobuf=DESCRIBED)
    assert [i for i in validate(doc) if i.severity == "error"] == []
    doc["spec"]["tables"][0].pop("protobuf")
    assert [(i.path, i.message) for i in validate(doc) if i.severity == "error"] == [("spec.tables[0].format", "format protobuf reads each record's "
                                                             "schema from a registry: set spec.kafka.schemaRegistry, "
                                                             "or describe the records with protobuf")]


CLICK = {"type": "record", "name": "Click", "fields": [
    {"name": "user", "type": "string"}, {"name": "event", "type": ["null", "string"]},
    {"name": "amount", "type": "double"}, {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}


def _writer_schema(text):
    """The first source and the table read plain Avro values of the writer schema ``text``."""
    doc = _with_source(format="avro", avro={"writerSchema": text})
    doc["spec"]["tables"][0].update(format="avro", avro={"writerSchema": json.dumps(
        {"type": "record", "name": "Profile", "fields": [{"name": n, "type": "string"} for n in ("user", "tier", "event")]})})
    return doc


def test_avro_of_one_writer_schema_needs_no_registry_and_may_span_lines_beyond_other_texts():
    # indented JSON over lines, longer than any other text but SQL may be (limits.MAX_STRING)
    padded = {**CLICK, "doc": "x" * 9000}
    assert errors(_writer_schema(json.dumps(padded, indent=2))) == []
    doc = _writer_schema(json.dumps(CLICK))
    doc["spec"]["tables"][0].pop("avro")
    assert errors(doc) == [("spec.tables[0].format", "format avro reads each record's schema from a registry: "
                            "set spec.kafka.schemaRegistry, or describe the records with avro")]


@pytest.mark.parametrize("text, path, message", [
    ("{'type': 'record'}", "spec.sources[0].avro.writerSchema",
     "the values cannot be read with this schema: not JSON: Expecting property name enclosed in double quotes"),
    ('"string"', "spec.sources[0].avro.writerSchema",
     'the values cannot be read with this schema: not an Avro record schema: write {"type": "record"'),
    ('{"type": "record", "name": "Click"}', "spec.sources[0].avro.writerSchema",
     "the values cannot be read with this schema: an Avro record needs a name and a list of fields"),
    (json.dumps({**CLICK, "fields": [*CLICK["fields"], {"name": "id", "type": {"type": "fixed", "name": "Id", "size": 16}}]}),
     "spec.sources[0].avro.writerSchema",
     "the values cannot be read with this schema: field 'id': Avro type 'fixed' has no column type here"),
    (json.dumps({**CLICK, "fields": [*CLICK["fields"], {"name": "both", "type": ["int", "string"]}]}),
     "spec.sources[0].avro.writerSchema", "field 'both': union ['int', 'string']: only a union of null and one type"),
    (json.dumps({**CLICK, "fields": [*CLICK["fields"], {"name": "r", "type": {"type": "record"}}]}),
     "spec.sources[0].avro.writerSchema", "field 'r': not an Avro type (KeyError: 'fields')"),
    ('{"type": "record", "name": "Deep", "fields": [' + "[" * 65 + "]" * 65 + "]}", "spec.sources[0].avro.writerSchema",
     "the values cannot be read with this schema: nests brackets 67 deep; at most 64 are allowed"),
    (json.dumps({**CLICK, "fields": CLICK["fields"][:3]}), "spec.sources[0].schema[ts]",
     "'ts' is not a field of avro.writerSchema (its fields: user, event, amount)"),
    (json.dumps({**CLICK, "doc": "x" * 70_000}), "spec.sources[0].avro.writerSchema",
     "characters long; at most 65536 are allowed"),
    (json.dumps(CLICK).replace(", ", ",\u2028"), "spec.sources[0].avro.writerSchema", "U+2028 (LINE SEPARATOR)"),
])
def test_a_writer_schema_the_values_cannot_be_read_with_is_refused_naming_the_field(text, path, message):
    found = errors(_writer_schema(text))
    assert any(p == path and message in m for p, m in found), found


def _with_source(**fields):
    doc = copy.deepcopy(BASE)
    doc["spec"]["sources"][0].update(fields)
    return doc


@pytest.mark.parametrize("document, path, fragment", [
    # a value with no close match is a thing the API does not do, not a typo
    (_with_source(format="thrift"), "spec.sources[0].format",
     "'thrift' is not supported; use one of 'json', 'string', 'avro' or 'protobuf'"),
    (_with_source(format="protobuf", schema={"user": "string"}), "spec.sources[0].format",
     "format protobuf reads each record's schema from a registry: set spec.kafka.schemaRegistry"),
    (_with_source(protobuf=DESCRIBED), "spec.sources[0].protobuf",
     "protobuf describes records of format protobuf: remove it, or set format protobuf"),
    (_with_source(format="protobuf", schema={"user": "string"}, subject="s", protobuf=DESCRIBED), "spec.sources[0].subject",
     "records described by protobuf are read without a registry: remove subject"),
    (_with_source(format="protobuf", schema={"user": "string"}, protobuf={**DESCRIBED, "message": "shop..Order"}),
     "spec.sources[0].protobuf.message", "use a Protobuf message's full name: its package, a dot and its name"),
    (_with_source(avro={"writerSchema": json.dumps(CLICK)}), "spec.sources[0].avro",
     "avro describes records of format avro: remove it, or set format avro"),
    (_with_source(format="avro", subject="s", avro={"writerSchema": json.dumps(CLICK)}), "spec.sources[0].subject",
     "records described by avro are read without a registry: remove subject"),
    (_with_source(format="avro", schema={"user": "string"}), "spec.sources[0].format",
     "format avro reads each record's schema from a registry: set spec.kafka.schemaRegistry"),
    (_with_source(keyFormat="avro", keySchema={"id": "string"}), "spec.sources[0].keyFormat",
     "keyFormat avro reads each key's schema from a registry: set spec.kafka.schemaRegistry"),
    (_with_source(keySchema={"id": "string"}), "spec.sources[0].keySchema",
     "keySchema declares the key's fields of keyFormat avro, protobuf; remove it"),
    (_with_source(keySubject="ids"), "spec.sources[0].keySubject",
     "keySubject names the registry's subject of keyFormat avro, protobuf"),
    (_with_source(keyFormat="protobuf"), "spec.sources[0].keySchema", "keyFormat protobuf needs keySchema"),
    (_with_source(subject="io.shop.Click"), "spec.sources[0].subject",
     "subject names the registry's subject of formats avro, protobuf; remove it, or set one of those formats"),
    (_with_source(format="jsn"), "spec.sources[0].format", "'jsn' is not allowed (did you mean 'json'?)"),
    (_with_source(watermark=30), "spec.sources[0].watermark", "got the number 30: use a positive whole number"),
    (app_with([], kafka={"bootstrapServers": "k:9092", "options": {"auto.offset.reset": "latest"}}),
     "spec.kafka.options[auto.offset.reset]", "set startingOffsets (earliest | latest) on the source"),
    (app_with([], kafka={"bootstrapServers": "k:9092", "options": {"group.id": "mine"}}),
     "spec.kafka.options[group.id]", "consumer group streamapp.<namespace>.<app>.<query>"),
    (app_with([{"aggregate": {"groupBy": ["user"], "columns": {"n": "count"}}}], emit="updates"),
     "spec.streams[0].steps[0].aggregate.columns.n", "'count' names a function, not a column: an aggregate column is a call"),
    (app_with([{"mapValues": {"x": "1"}}]), "spec.streams[0].steps[0].mapValues",
     "Kafka Streams' mapValues is the step withColumns (add or replace columns) or select here; allowed fields here: filter"),
    (app_with([{"aggregate": {"groupBy": "user", "columns": {"n": "count(*)"}}}]),
     "spec.streams[0].steps[0].aggregate.groupBy", "expected a list, got the text 'user': write [user]"),
])
def test_mistakes_a_kafka_or_ksql_user_makes_get_the_way_out(document, path, fragment):
    found = validate(document)
    assert any(i.path == path and fragment in i.message for i in found), [str(i) for i in found]


def test_a_misspelt_group_column_is_named_once_not_suggested_back_downstream():
    doc = app_with([{"aggregate": {"groupBy": ["userid"], "columns": {"n": "count(*)"}}}], emit="updates")
    doc["spec"]["sinks"][0]["kafka"]["key"] = "user"
    found = errors(doc)
    assert [path for path, _ in found] == ["spec.streams[0].steps[0].aggregate.groupBy[0]"], found
    assert "did you mean 'user'" in found[0][1]
