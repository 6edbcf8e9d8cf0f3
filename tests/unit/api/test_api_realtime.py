"""Real-time mode as tables: what may run that way, what is refused with which field, and the task
slots an app holds (what the operator sizes executors for and the runtime checks)."""

import copy

import pytest

from streamapp_api import load, validate
from streamapp_api.realtime import query_sources, slots_by_query, task_slots

from test_api_semantic import AGG, BASE, STREAM_JOIN, WINDOW

pytestmark = pytest.mark.unit

STATELESS = [{"filter": "amount > 0"},
             {"withColumns": {"cents": "CAST(amount * 100 AS BIGINT)", "letters": "split(user, '')"}},
             {"explode": {"column": "letters"}}, {"keyBy": "user"},
             {"select": ["user", "cents", "letters", "ts"]},
             {"sql": "SELECT user, upper(letters) AS letter, cents, ts FROM input WHERE cents > 10"}]


def realtime_app(steps=(), **spec):
    doc = copy.deepcopy(BASE)
    doc["spec"]["streams"][0]["steps"] = list(steps)
    doc["spec"]["trigger"] = "realtime"
    doc["spec"].update(spec)
    return doc


def errors(doc):
    return [(i.path, i.message) for i in validate(doc) if i.severity == "error"]


def test_a_stateless_pipeline_writing_to_kafka_may_run_in_realtime_mode():
    assert errors(realtime_app(STATELESS)) == []
    app = load(realtime_app(STATELESS))
    assert app.spec.realtime and load(BASE).spec.realtime is False


@pytest.mark.parametrize("steps, change, path, fragment", [
    ([WINDOW, AGG], None, "spec.streams[0].steps[0].window", "keeps state across records"),
    ([WINDOW, AGG], None, "spec.streams[0].steps[1].aggregate", "stateless steps only"),
    ([{"dedupe": {"keys": ["user"], "within": "1m"}}], None, "spec.streams[0].steps[0].dedupe", "keeps state"),
    ([STREAM_JOIN], None, "spec.streams[0].steps[0].join", "keeps both streams' records in state"),
    ([{"join": {"table": "profiles"}}], None, "spec.streams[0].steps[0].join", "reads the table as a stream"),
    ([{"sql": "SELECT user, count(*) AS n FROM input GROUP BY user"}], None, "spec.streams[0].steps[0].sql",
     "groups rows (GROUP BY)"),
    ([{"sql": "SELECT DISTINCT user FROM input"}], None, "spec.streams[0].steps[0].sql", "removes duplicates"),
    ([], lambda s: s["sinks"].__setitem__(0, {"from": "out", "postgres": {"secretRef": {"name": "pg"}, "table": "t",
                                                                         "primaryKey": ["user"]}}),
     "spec.sinks[0].postgres", "writes to Kafka only"),
    ([], lambda s: s["sinks"][0]["kafka"].update({"delivery": "exactly-once"}), "spec.sinks[0].kafka.delivery",
     "use at-least-once"),
    ([], lambda s: s.update({"scaling": {"mode": "load"}}), "spec.scaling.mode", "micro-batch times"),
    ([], lambda s: s["sources"][0].update({"maxOffsetsPerTrigger": 1000}), "spec.sources[0].maxOffsetsPerTrigger",
     "Spark refuses it"),
    ([], lambda s: (s["kafka"].update({"schemaRegistry": {"url": "http://registry:8081"}}),
                    s["sources"][0].update({"format": "avro"})), "spec.sources[0].format", "decoded in Python"),
    ([], lambda s: s["sources"][1].update({"format": "protobuf", "protobuf": {
        "message": "shop.v1.View", "descriptorSet": {"configMap": "protos", "key": "views.pb"}}}),
     "spec.sources[1].format", "decoded in Python"),
    ([], lambda s: (s["kafka"].update({"schemaRegistry": {"url": "http://registry:8081"}}),
                    s["sources"][0].update({"keyFormat": "avro", "keySchema": {"id": "string"}})),
     "spec.sources[0].keyFormat", "decoded in Python"),
])
def test_what_cannot_run_in_realtime_mode_is_refused_with_the_field(steps, change, path, fragment):
    doc = realtime_app(steps)
    if change:
        change(doc["spec"])
    found = errors(doc)
    assert any(p == path and fragment in m for p, m in found), found
    assert all("micro-batches" in m or "at-least-once" in m or "partitions" in m
               for p, m in found if p == path), found  # each says what to do instead
    doc["spec"].pop("trigger")
    assert not any(p == path for p, _ in errors(doc)), "only real-time mode refuses it"


@pytest.mark.parametrize("trigger", ["real-time", "realtime 1m", "1 minute"])
def test_other_trigger_words_are_refused_by_the_schema(trigger):
    found = [i for i in validate(realtime_app(trigger=trigger)) if i.path == "spec.trigger"]
    assert found and found[0].severity == "error"


def test_each_query_holds_a_slot_for_every_partition_it_reads():
    doc = realtime_app(STATELESS)
    doc["spec"]["streams"].append({"name": "both", "from": "views", "steps": [{"select": ["user", "ts"]}]})
    doc["spec"]["sinks"].append({"from": "both", "kafka": {"topic": "both"}})
    doc["spec"]["sinks"].append({"from": "clicks", "name": "raw", "kafka": {"topic": "raw"}})
    app = load(doc)
    # the two JSON sources have dead-letter queries of their own
    assert query_sources(app) == {"out-out": ("clicks",), "both-both": ("views",), "raw": ("clicks",),
                                  "dlq-clicks": ("clicks",), "dlq-views": ("views",)}
    counts = {"clicks": 4, "views": 2}
    assert slots_by_query(app, counts) == {"out-out": 4, "both-both": 2, "raw": 4, "dlq-clicks": 4, "dlq-views": 2}
    assert task_slots(app, counts) == 16
    assert task_slots(app, {"clicks": 4}) == 4 + 1 + 4 + 4 + 1  # a topic not found yet counts one
    doc["spec"]["deadLetter"] = {"enabled": False}
    assert task_slots(load(doc), counts) == 10
