"""Kafka sinks of format avro against the test bed's real schema registry, read back as users read
them: confluent-kafka's AvroDeserializer, which finds each value's writer schema in the registry by the
id the value carries. click-sessions' 1-minute windows are compared with the same pipeline in plain
Python; the exactly-once sink through kill -9 of the driver, every window exactly once for a
read_committed reader; and a subject holding an incompatible schema keeps the app from starting,
the subject named in the driver's last words."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import time
from collections import Counter
from datetime import timedelta

import pytest
import yaml

from streamapp_testkit.manifests import click_sessions_manifest
from streamapp_testkit.runtime import (closed_click_windows, produce_in_turn, start_run, wait_while_running,
                                      watermark_flush)
from streamapp_api import contract
from streamapp_testbed import clickstream
from streamapp_testbed.kafka_admin import create_topic, read_topic

pytestmark = pytest.mark.integration

WINDOW_FIELDS = ("clicks", "page_views", "time_spent")


def avro_sessions_manifest(topic: str, out: str, registry_url: str, **sink: object) -> dict:
    """click-sessions reading JSON clicks from ``topic``, its windows written as Avro to ``out`` (the
    Postgres sink left out); ``sink``: more of the Kafka sink's fields."""
    doc = click_sessions_manifest(topic, out, "unused", name="avro-" + os.urandom(3).hex())
    spec = doc["spec"]
    spec["kafka"]["schemaRegistry"] = {"url": registry_url}
    spec["sinks"] = [{"from": "sessions", "kafka": {**spec["sinks"][0]["kafka"], "format": "avro", **sink}}]
    spec["state"]["checkpoint"]["accessModes"] = ["ReadWriteOnce"]
    return doc


def avro_records(kafka, registry, topic: str, isolation: str = "read_committed", avro_keys: bool = True) -> list[tuple]:
    """Every (key, value) of ``topic`` through confluent-kafka's AvroDeserializer, as a consumer of the
    topic has them; ``avro_keys`` False: keys as text."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserialize = AvroDeserializer(SchemaRegistryClient(registry.client_conf()))
    keys, values = SerializationContext(topic, MessageField.KEY), SerializationContext(topic, MessageField.VALUE)
    messages = read_topic(kafka.bootstrap, topic, idle=None, timeout=120, to_end=True,
                          config={"isolation.level": isolation})
    return [(deserialize(m.key(), keys) if avro_keys else m.key().decode(), deserialize(m.value(), values))
            for m in messages]


def avro_values(kafka, registry, topic: str, isolation: str = "read_committed") -> list[dict]:
    return [value for _, value in avro_records(kafka, registry, topic, isolation, avro_keys=False)]


def windows_of(values: list[dict]) -> Counter:
    return Counter((v["session_id"], v["uuid"], v["window_start"]) for v in values)


def test_windows_written_as_avro_are_read_back_with_confluent_s_deserializer(kafka, schema_registry, spark, names, tmp_path):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from streamapp_api import load
    from streamapp_testkit.runtime import run_available_now

    topic, out = names("clicks"), names("windows")
    create_topic(kafka.bootstrap, topic, partitions=2)
    create_topic(kafka.bootstrap, out, partitions=2)
    events = clickstream.generate(seed=7, users=15, minutes=5)
    produce_in_turn(kafka.bootstrap, topic, events, partitions=2)
    the_app = load(avro_sessions_manifest(topic, out, schema_registry.url, keyFormat="avro"))
    run_available_now(spark, the_app, kafka, tmp_path / "checkpoint")
    flush = watermark_flush(events)  # a later batch, whose watermark closes every window of the events
    produce_in_turn(kafka.bootstrap, topic, [flush], partitions=1)
    run_available_now(spark, the_app, kafka, tmp_path / "checkpoint")

    want = closed_click_windows([*events, flush])
    records = avro_records(kafka, schema_registry, out)
    values = [value for _, value in records]
    assert windows_of(values) == Counter(want.keys()) and len(want) > 50
    assert all(key == value["session_id"] for key, value in records)  # keys: Avro strings under <topic>-key
    assert {(v["session_id"], v["uuid"], v["window_start"]): tuple(v[f] for f in WINDOW_FIELDS) for v in values} == want
    assert {v["window_end"] - v["window_start"] for v in values} == {timedelta(minutes=1)}

    # The schema the registry holds: a record named after its subject, the stream's columns in its order.
    registered = SchemaRegistryClient(schema_registry.client_conf()).get_latest_version(f"{out}-value")
    schema = json.loads(registered.schema.schema_str)
    assert schema["name"] == re.sub(r"\W", "_", f"{out}-value")
    assert [f["name"] for f in schema["fields"]] == ["window_start", "window_end", "session_id", "uuid", *WINDOW_FIELDS]
    window_start = schema["fields"][0]["type"]
    assert {"type": "long", "logicalType": "timestamp-millis"} in (window_start if isinstance(window_start, list) else [window_start])
    assert registered.version == 1  # the second run registered the same schema: the registry kept its id
    key = SchemaRegistryClient(schema_registry.client_conf()).get_latest_version(f"{out}-key")
    assert json.loads(key.schema.schema_str) == "string"

    # And an app downstream reads them with a source of format avro, as the latest version of the subject.
    copied = names("copied")
    create_topic(kafka.bootstrap, copied, partitions=1)
    reader = load({**the_app.to_dict(), "metadata": {"name": names("reader")[:50].rstrip("-")}, "spec": {
        "kafka": {"bootstrapServers": "kafka:9092", "schemaRegistry": {"url": schema_registry.url}},
        "sources": [{"name": "windows", "topic": out, "format": "avro",
                     "schema": {"session_id": "string", "uuid": "string", "window_start": "timestamp", "clicks": "long"}}],
        "sinks": [{"from": "windows", "kafka": {"topic": copied, "key": "session_id"}}]}})
    run_available_now(spark, reader, kafka, tmp_path / "reader")
    read_back = [json.loads(m.value()) for m in read_topic(kafka.bootstrap, copied, idle=None, timeout=60, to_end=True)]
    assert sorted((r["session_id"], r["uuid"], r["window_start"], r["clicks"]) for r in read_back) == sorted(
        (s, u, clickstream.iso(w).replace("000Z", "Z"), clicks) for (s, u, w), (clicks, _, _) in want.items())


@pytest.mark.slow
def test_an_exactly_once_avro_sink_writes_every_row_once_through_a_kill_9(kafka, schema_registry, names, tmp_path):
    """The windows, and every click through a stateless filter: that sink writes in every batch, so
    the kill lands in a batch that writes, before, during or after its transactions."""
    from streamapp_api import load

    topic, out, clicks = names("clicks"), names("windows"), names("clicks-only")
    create_topic(kafka.bootstrap, topic, partitions=3)
    create_topic(kafka.bootstrap, out, partitions=2)
    create_topic(kafka.bootstrap, clicks, partitions=2)
    events = clickstream.generate(seed=23, users=20, minutes=6)
    produce_in_turn(kafka.bootstrap, topic, events, partitions=3)
    doc = avro_sessions_manifest(topic, out, schema_registry.url, delivery="exactly-once")
    doc["spec"]["streams"].append({"name": "clicks-only", "from": "clicks", "steps": [{"filter": "event = 'click'"}]})
    doc["spec"]["sinks"].append({"from": "clicks-only", "kafka": {"topic": clicks, "key": "uuid", "format": "avro",
                                                                  "keyFormat": "avro", "delivery": "exactly-once"}})
    doc["spec"]["sources"][0]["maxOffsetsPerTrigger"] = 60  # small batches: the kill lands in the middle
    path, checkpoint, log = tmp_path / "app.yaml", tmp_path / "checkpoint", tmp_path / "run.log"
    path.write_text(yaml.safe_dump(doc))
    runs = []
    try:
        first = start_run(path, kafka.bootstrap, checkpoint, log)
        runs.append(first)
        # Windows close some 90 s of event time in (1 minute and the 30 s watermark), about the 8th batch
        # of their query; the kill comes after one of them wrote windows.
        query = re.escape(load(doc).spec.sinks[0].query_name)
        windows_written = re.compile(rf"\[{query}\] batch \d+: in \d+ rows \([^)]*\), out [1-9]")
        wait_while_running(lambda: log.exists() and windows_written.search(log.read_text()), first, log,
                           what="a batch that wrote windows")
        time.sleep(random.Random(23).uniform(0, 3))  # somewhere in a batch: before, during or after its transactions
        os.killpg(first.pid, signal.SIGKILL)  # the driver and its JVM, as when a pod dies
        first.wait(30)
        # uncommitted too: a transaction the kill left open holds read_committed readers until it is fenced
        written_before = len(avro_values(kafka, schema_registry, out, isolation="read_uncommitted"))
        assert written_before > 0, "the killed driver wrote no window: the kill came too early to test anything"

        doc["spec"]["sources"][0]["maxOffsetsPerTrigger"] = 5000  # the rest at once
        path.write_text(yaml.safe_dump(doc))
        flush = watermark_flush(events)
        produce_in_turn(kafka.bootstrap, topic, [flush], partitions=1)
        # The backlog, the flush last: available-now ends with a batch of no data under its watermark.
        run = start_run(path, kafka.bootstrap, checkpoint, log, available_now=True)
        runs.append(run)
        assert run.wait(400) == 0, log.read_text()[-3000:]
    finally:
        for proc in runs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)

    want = closed_click_windows([*events, flush])
    values = avro_values(kafka, schema_registry, out)
    got = windows_of(values)
    twice = sum(n - 1 for n in got.values() if n > 1)
    assert got == Counter(want.keys()), f"{sum((Counter(want.keys()) - got).values())} missing, {twice} duplicated"
    assert {(v["session_id"], v["uuid"], v["window_start"]): tuple(v[f] for f in WINDOW_FIELDS) for v in values} == want
    assert len(want) > written_before

    want_clicks = Counter((e.uuid, e.session_id, e.ts.replace(microsecond=e.ts.microsecond // 1000 * 1000))
                          for e in [*events, flush] if e.event == "click")
    clicks_written = avro_records(kafka, schema_registry, clicks)
    assert all(key == value["uuid"] for key, value in clicks_written)
    got_clicks = Counter((v["uuid"], v["session_id"], v["ts"]) for _, v in clicks_written)
    twice = sum(n - 1 for n in got_clicks.values() if n > 1)
    assert got_clicks == want_clicks, f"clicks: {sum((want_clicks - got_clicks).values())} missing, {twice} duplicated"


def test_a_subject_holding_an_incompatible_schema_keeps_the_app_from_starting(kafka, schema_registry, names, tmp_path):
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    topic, out = names("clicks"), names("windows")
    create_topic(kafka.bootstrap, topic)
    create_topic(kafka.bootstrap, out)
    subject = f"{out}-value"
    doc = avro_sessions_manifest(topic, out, schema_registry.url)
    # What another producer registered first, a record of the same name: a reader of the sink's schema
    # could not read its records (clicks a string there, a long here; BACKWARD, the registry's default).
    other = {"type": "record", "name": re.sub(r"\W", "_", subject), "fields": [{"name": "clicks", "type": "string"}]}
    SchemaRegistryClient(schema_registry.client_conf()).register_schema(subject, Schema(json.dumps(other), "AVRO"))
    path, log, last_words = tmp_path / "app.yaml", tmp_path / "run.log", tmp_path / "termination-log"
    path.write_text(yaml.safe_dump(doc))

    run = start_run(path, kafka.bootstrap, tmp_path / "checkpoint", log, **{contract.ENV_TERMINATION_LOG: str(last_words)})
    try:
        code = run.wait(300)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(30)

    assert code == 1, log.read_text()[-3000:]
    said = last_words.read_text().splitlines()
    assert said[0].startswith("PipelineError: SchemaRefused: spec.sinks[0].kafka (sessions-"), said
    assert said[0].endswith(f"the value schema under subject '{subject}': incompatible with the subject's versions "
                            "(HTTP 409, error 409)"), said
    assert said[1].startswith("the registry's answer: ") and "clicks" in said[1], said  # its reason, whole
    assert said[2].startswith("make the stream's columns compatible"), said
    assert len(read_topic(kafka.bootstrap, out, idle=None, timeout=30, to_end=True)) == 0


def test_a_lookup_only_sink_starts_when_the_subject_holds_its_schema_and_not_otherwise(kafka, schema_registry, spark,
                                                                                      names, tmp_path):
    from streamapp_api import load
    from streamapp_runtime.run import runner
    from streamapp_runtime.run.settings import Settings
    from streamapp_runtime.sinks.schema_registration import SchemaRefused
    from streamapp_testkit.runtime import run_available_now

    topic, out = names("clicks"), names("windows")
    create_topic(kafka.bootstrap, topic)
    create_topic(kafka.bootstrap, out)
    lookup = load(avro_sessions_manifest(topic, out, schema_registry.url, registerSchema=False))
    settings = Settings(checkpoint_root=str(tmp_path / "lookup"), kafka_override=kafka.bootstrap, available_now=True,
                        metrics_port=None)

    with pytest.raises(SchemaRefused) as refused:
        runner.start(spark, lookup, settings, quiet=True, wait_for_topics=False)
    assert f"the value schema under subject '{out}-value': not there (HTTP 404" in str(refused.value)

    registering = load(avro_sessions_manifest(topic, out, schema_registry.url))
    run_available_now(spark, registering, kafka, tmp_path / "registering")  # registers it
    run_available_now(spark, lookup, kafka, tmp_path / "lookup")  # now found
