"""Record-level behaviour: dead letters, branching, stateless steps, dedupe."""

from __future__ import annotations

import pytest

from streamapp_testkit.runtime import app, consume, produce, run_available_now, ts
from streamapp_testbed.kafka_admin import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]
SCHEMA = {"id": "string", "level": "string", "count": "long", "tags": "array<string>", "ts": "timestamp"}


def test_dead_letters_for_malformed_json_wrong_types_and_missing_event_time(kafka, spark, names, tmp_path):
    topic, out, dlq = names("in"), names("out"), names("dlq")
    create_topic(kafka.bootstrap, topic, partitions=2)
    good = [(f"k{i}", {"id": f"e{i}", "level": "INFO", "count": i, "tags": ["x"], "ts": ts(i)}) for i in range(20)]
    # Other ISO-8601 spellings of a timestamp are good records too.
    good += [("k20", {"id": "e20", "level": "INFO", "count": 20, "tags": [], "ts": "2026-01-01T00:00:20Z"}),
             ("k21", {"id": "e21", "level": "INFO", "count": 21, "tags": [], "ts": "2026-01-01T02:00:21.5+02:00"})]
    bad = [
        ("m1", "{this is not json", "malformed JSON"),
        ("m2", '["an", "array"]', "malformed JSON"),
        ("w1", '{"id": "w1", "level": "INFO", "count": "three", "ts": "2026-01-01T00:00:01Z"}', "field 'count': expected long, got three"),
        ("w2", '{"id": "w2", "level": "INFO", "count": 1, "ts": "yesterday"}', "field 'ts': expected timestamp, got yesterday"),
        ("t1", '{"id": "t1", "level": "INFO", "count": 1}', "missing event time: field 'ts'"),
        ("t2", '{"id": "t2", "level": "INFO", "count": 1, "ts": null}', "missing event time: field 'ts'"),
    ]
    produce(kafka.bootstrap, topic, good[:10] + [(k, v) for k, v, _ in bad] + good[10:])
    the_app = app(names("app"), {
        "sources": [{"name": "events", "topic": topic, "schema": SCHEMA, "eventTime": "ts"}],
        "sinks": [{"from": "events", "kafka": {"topic": out}}],
        "deadLetter": {"topic": dlq},
    })
    progress = run_available_now(spark, the_app, kafka, tmp_path)

    written = consume(kafka.bootstrap, out, expect=len(good))
    assert sorted(r["value"]["id"] for r in written) == sorted(v["id"] for _, v in good)
    assert {r["key"] for r in written} == {k for k, _ in good}  # the record key travels along
    letters = consume(kafka.bootstrap, dlq, to_end=True)  # all of them: each bad record once
    dead = {r["key"]: r for r in letters}
    assert sorted(r["key"] for r in letters) == sorted(k for k, _, _ in bad)
    for key, raw, reason in bad:
        record = dead[key]
        assert reason in record["headers"]["streamapp.error"], (key, record["headers"])
        assert record["headers"]["streamapp.source"] == "events"
        assert record["headers"]["streamapp.topic"] == topic
        raw_value = record["value"] if isinstance(record["value"], str) else None
        assert raw_value is None or raw_value == raw
    # read once: the sink query counted the bad records as it parsed them, no query of its own read them again
    assert list(progress) == [the_app.spec.sinks[0].query_name]
    assert sum(int(p["numInputRows"]) for p in progress[the_app.spec.sinks[0].query_name]) == len(good) + len(bad)


def test_branching_stateless_steps_and_dedupe(kafka, spark, names, tmp_path):
    topic, errors, others, words, unique = names("in"), names("errors"), names("others"), names("words"), names("unique")
    create_topic(kafka.bootstrap, topic, partitions=2)
    levels = ["INFO", "ERROR", "WARN", "ERROR", None]
    records = []
    for i in range(40):
        value = {"id": f"e{i % 25}", "level": levels[i % 5], "count": i, "tags": [f"t{i % 3}", f"u{i % 2}"], "ts": ts(i)}
        records.append((f"k{i}", value))
    produce(kafka.bootstrap, topic, records)
    the_app = app(names("app"), {
        "sources": [{"name": "logs", "topic": topic, "schema": SCHEMA, "eventTime": "ts", "watermark": "1m"}],
        "streams": [
            {"name": "errors", "from": "logs", "steps": [
                {"filter": "level = 'ERROR'"}, {"keyBy": "id"},
                {"withColumns": {"double": "count * 2", "level": "lower(level)"}},
                {"select": ["id", "level", "double", "ts"]}]},
            {"name": "others", "from": "logs", "steps": [{"filter": "level IS NULL OR level <> 'ERROR'"},
                                                         {"sql": "SELECT id, count, ts FROM input WHERE count % 2 = 0"}]},
            {"name": "words", "from": "logs", "steps": [{"explode": {"column": "tags", "as": "tag"}},
                                                        {"select": ["id", "tag"]}]},
            {"name": "unique", "from": "logs", "steps": [{"dedupe": {"keys": ["id"], "within": "1m"}},
                                                         {"select": ["id", "count"]}]},
        ],
        "sinks": [{"from": "errors", "kafka": {"topic": errors}}, {"from": "others", "kafka": {"topic": others, "key": "id"}},
                  {"from": "words", "kafka": {"topic": words}}, {"from": "unique", "kafka": {"topic": unique, "key": "id"}}],
    })
    run_available_now(spark, the_app, kafka, tmp_path)

    values = [v for _, v in records]
    want_errors = sorted((v["id"], "error", v["count"] * 2) for v in values if v["level"] == "ERROR")
    got_errors = consume(kafka.bootstrap, errors, expect=len(want_errors))
    assert sorted((r["value"]["id"], r["value"]["level"], r["value"]["double"]) for r in got_errors) == want_errors
    assert all(r["key"] == r["value"]["id"] for r in got_errors)  # keyBy sets the message key
    assert all(set(r["value"]) == {"id", "level", "double", "ts"} for r in got_errors)
    want_others = sorted((v["id"], v["count"]) for v in values if v["level"] != "ERROR" and v["count"] % 2 == 0)
    got_others = consume(kafka.bootstrap, others, expect=len(want_others))
    assert sorted((r["value"]["id"], r["value"]["count"]) for r in got_others) == want_others
    want_words = sorted((v["id"], t) for v in values for t in v["tags"])
    got_words = consume(kafka.bootstrap, words, expect=len(want_words))
    assert sorted((r["value"]["id"], r["value"]["tag"]) for r in got_words) == want_words
    first_seen: dict[str, int] = {}
    for v in values:
        first_seen.setdefault(v["id"], v["count"])
    got_unique = consume(kafka.bootstrap, unique, expect=len(first_seen))
    assert len(got_unique) == len(first_seen) == 25
    assert {r["value"]["id"] for r in got_unique} == set(first_seen)
