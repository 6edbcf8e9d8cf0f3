"""Avro values in the Confluent wire format read through the test bed's schema registry, by Spark:
records written by confluent-kafka's AvroSerializer, the writer schema of each fetched by its id and
resolved to the reader schema fixed at the start; what cannot be read gets its reason."""

from __future__ import annotations

import json
import struct
import uuid

import pytest

from streamapp_testbed.kafka_admin import create_topic, produce

pytestmark = pytest.mark.integration

CLICK_V1 = {"type": "record", "name": "Click", "namespace": "io.streamapp.test", "fields": [
    {"name": "user", "type": "string"},
    {"name": "n", "type": "long"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
]}
# Registered after the reader started: a field added with a default (BACKWARD compatible).
CLICK_V2 = {**CLICK_V1, "fields": [*CLICK_V1["fields"], {"name": "page", "type": "string", "default": "/"}]}
# `n` as text: no Avro resolution makes a long of a string. Registered under another subject, as a
# producer with a wrong serializer configuration would.
USER_KEY = {"type": "record", "name": "UserKey", "namespace": "io.streamapp.test",
            "fields": [{"name": "user_id", "type": "string"}]}
CLICK_N_AS_TEXT = {**CLICK_V1, "fields": [{"name": "user", "type": "string"}, {"name": "n", "type": "string"},
                                          CLICK_V1["fields"][2]]}


def _serializer(registry, schema: dict, subject_topic: str, field: str = "value"):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(SchemaRegistryClient(registry.client_conf()), json.dumps(schema))
    ctx = SerializationContext(subject_topic, MessageField.VALUE if field == "value" else MessageField.KEY)
    return lambda record: serializer(record, ctx)


def _read(spark, kafka, topic, registry, reader, column="value"):
    from pyspark.sql import functions as F

    from streamapp_runtime.compile.avro_values import avro_values

    raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
           .option("subscribe", topic).option("startingOffsets", "earliest").load())
    rows = raw.select("offset", avro_values(F.col(column), registry, reader, "__error").alias("v")).orderBy("offset")
    return [row.v.asDict() for row in rows.collect()]


def test_each_record_is_read_with_its_writer_schema_and_the_unreadable_ones_say_why(
        kafka, schema_registry, spark, names):
    from datetime import datetime, timezone

    from streamapp_api.schema_registry import Registry, topic_subject
    from streamapp_runtime.compile.avro_values import ReaderSchema

    topic = names("clicks")
    create_topic(kafka.bootstrap, topic, partitions=1)
    at = datetime(2026, 11, 28, 10, 0, tzinfo=timezone.utc)
    v1 = _serializer(schema_registry, CLICK_V1, topic)
    produce(kafka.bootstrap, topic, [(None, v1({"user": "a", "n": 1, "at": at}))])
    registry = Registry(schema_registry.url)
    reader = ReaderSchema.latest(registry, topic_subject(topic))  # what the app does at its start
    assert reader.columns() == {"user": "string", "n": "bigint", "at": "timestamp"}

    v2 = _serializer(schema_registry, CLICK_V2, topic)  # registered now, after the start
    wrong = _serializer(schema_registry, CLICK_N_AS_TEXT, names("elsewhere"))
    produce(kafka.bootstrap, topic, [
        (None, v2({"user": "b", "n": 2, "at": at, "page": "/cart"})),
        (None, wrong({"user": "c", "n": "three", "at": at})),
        (None, b"\x00" + struct.pack(">I", 987654) + b"\x02x"),  # an id the registry never gave
        (None, b'{"user": "d"}'),                                  # JSON, not the wire format
        (None, None),
    ])

    rows = _read(spark, kafka, topic, registry, reader)

    assert rows[:2] == [
        {"user": "a", "n": 1, "at": at.replace(tzinfo=None), "__error": None},
        {"user": "b", "n": 2, "at": at.replace(tzinfo=None), "__error": None},  # v2's page is not a column
    ]
    assert all(set(row.values()) - {row["__error"]} == {None} for row in rows[2:])
    errors = [row["__error"] for row in rows[2:]]
    assert errors[0].startswith("incompatible: writer schema id ") and \
        f"cannot be read as {topic}-value version 1 (id {reader.schema_id})" in errors[0]
    assert errors[1] == "unknown schema id 987654: the registry has no Avro schema of that id"
    assert errors[2] == "not in the Confluent wire format (a zero byte, then a 4-byte schema id)"
    assert errors[3] == "null value: a stream record needs an Avro value"


def test_avro_keys_are_read_under_the_key_subject(kafka, schema_registry, spark, names):
    from streamapp_api.schema_registry import Registry, topic_subject
    from streamapp_runtime.compile.avro_values import ReaderSchema

    key_schema = {"type": "record", "name": "UserKey", "fields": [{"name": "user", "type": "string"},
                                                                  {"name": "region", "type": "int"}]}
    topic = names("keyed")
    create_topic(kafka.bootstrap, topic, partitions=1)
    key = _serializer(schema_registry, key_schema, topic, field="key")
    produce(kafka.bootstrap, topic, [(key({"user": f"u{i}", "region": i}), b"v") for i in range(3)])
    registry = Registry(schema_registry.url)

    rows = _read(spark, kafka, topic, registry, ReaderSchema.latest(registry, topic_subject(topic, "key")), "key")

    assert rows == [{"user": f"u{i}", "region": i, "__error": None} for i in range(3)]


def test_a_reader_on_a_registry_with_basic_auth_uses_its_credentials(schema_registry_with_auth):
    from streamapp_api.schema_registry import Registry, RegistryError
    from streamapp_runtime.compile.avro_values import ReaderSchema, decoder

    _serializer(schema_registry_with_auth, CLICK_V1, "authed")({"user": "a", "n": 1, "at": 0})
    user_info = schema_registry_with_auth.client_conf()["basic.auth.user.info"]

    with pytest.raises(RegistryError, match="HTTP 401"):
        ReaderSchema.latest(Registry(schema_registry_with_auth.url), "authed-value")
    registry = Registry(schema_registry_with_auth.url, user_info)
    reader = ReaderSchema.latest(registry, "authed-value")
    value = _serializer(schema_registry_with_auth, CLICK_V1, "authed")({"user": "z", "n": 9, "at": 0})
    record, error = decoder(registry, reader).decode(value)
    assert error is None and (record["user"], record["n"]) == ("z", 9)


@pytest.mark.slow
def test_an_app_reads_avro_values_across_a_new_writer_schema_and_dead_letters_the_rest(
        kafka, schema_registry, spark, names, tmp_path):
    """The app, as `streamapp run` runs it: format avro through spec.kafka.schemaRegistry. Run 1 reads
    records of v1; v2 is registered after it, and run 2 (same checkpoint) reads v2's records too. The
    records that cannot be read reach the dead-letter topic untouched, with the reason in a header."""
    from streamapp_testkit.runtime import app, consume, run_available_now

    topic, out, dlq = names("clicks"), names("out"), names("dlq")
    for name in (topic, out, dlq):
        create_topic(kafka.bootstrap, name, partitions=1)
    v1 = _serializer(schema_registry, CLICK_V1, topic)
    produce(kafka.bootstrap, topic, [(b"a", v1({"user": "a", "n": 1, "at": 0}))])
    spec = {
        "kafka": {"bootstrapServers": "kafka:9092", "schemaRegistry": {"url": schema_registry.url}},
        "sources": [{"name": "clicks", "topic": topic, "format": "avro",
                     "schema": {"user": "string", "n": "long", "at": "timestamp"}, "eventTime": "at"}],
        "sinks": [{"from": "clicks", "kafka": {"topic": out}}],
        "deadLetter": {"topic": dlq},
    }
    the_app = app(names("app"), spec)
    run_available_now(spark, the_app, kafka, tmp_path)
    assert [(r["value"]["user"], r["value"]["n"]) for r in consume(kafka.bootstrap, out, expect=1)] == [("a", 1)]

    v2 = _serializer(schema_registry, CLICK_V2, topic)
    unknown_id = b"\x00" + struct.pack(">I", 987654) + b"\x02x"
    produce(kafka.bootstrap, topic, [(b"b", v2({"user": "b", "n": 2, "at": 0, "page": "/cart"})),
                                     (b"x", unknown_id), (b"j", b'{"user": "j"}')])
    run_available_now(spark, the_app, kafka, tmp_path)

    rows = consume(kafka.bootstrap, out, to_end=True)
    assert [(r["value"]["user"], r["value"]["n"]) for r in rows] == [("a", 1), ("b", 2)]
    letters = {r["key"]: r for r in consume(kafka.bootstrap, dlq, to_end=True)}
    assert sorted(letters) == ["j", "x"]
    assert letters["x"]["headers"]["streamapp.error"] == "unknown schema id 987654: the registry has no Avro schema of that id"
    assert letters["j"]["headers"]["streamapp.error"].startswith("not in the Confluent wire format")
    assert letters["j"]["value"] == {"user": "j"}  # untouched: it can be replayed once fixed


@pytest.mark.slow
def test_a_table_of_avro_values_is_joined_and_its_tombstones_delete(kafka, schema_registry, spark, names, tmp_path):
    """A table of format avro, its keys Avro records too (keyFormat avro): the latest value per key field,
    a null value (tombstone) deleting its key rather than being an unreadable record."""
    from streamapp_testkit.runtime import app, consume, run_available_now
    from streamapp_testkit.runtime import produce as produce_json

    orders, profiles, out = names("orders"), names("profiles"), names("out")
    for topic in (orders, profiles, out):
        create_topic(kafka.bootstrap, topic, partitions=1)
    # the key an Avro record of its own (the user id), under <topic>-key, as a keyed producer writes it
    profile_schema = {"type": "record", "name": "Profile", "fields": [{"name": "tier", "type": "string"}]}
    profile = _serializer(schema_registry, profile_schema, profiles)
    user = _serializer(schema_registry, USER_KEY, profiles, field="key")
    produce(kafka.bootstrap, profiles, [(user({"user_id": "u1"}), profile({"tier": "gold"})),
                                        (user({"user_id": "u2"}), profile({"tier": "silver"})),
                                        (user({"user_id": "u2"}), None)])
    produce_json(kafka.bootstrap, orders, [(f"o{i}", {"order_id": f"o{i}", "user_id": u}) for i, u in enumerate(["u1", "u2"])])
    the_app = app(names("app"), {
        "kafka": {"bootstrapServers": "kafka:9092", "schemaRegistry": {"url": schema_registry.url}},
        # not "orders": test_cleanup lists every group of a source of that name on the shared broker
        "sources": [{"name": "purchases", "topic": orders, "schema": {"order_id": "string", "user_id": "string"}}],
        "tables": [{"name": "profiles", "topic": profiles, "key": "user_id", "format": "avro",
                    "schema": {"tier": "string"}, "keyFormat": "avro", "keySchema": {"user_id": "string"}}],
        "streams": [{"name": "enriched", "from": "purchases",
                     "steps": [{"join": {"table": "profiles", "key": "user_id", "type": "left"}}]}],
        "sinks": [{"from": "enriched", "kafka": {"topic": out, "key": "order_id"}}],
    })

    run_available_now(spark, the_app, kafka, tmp_path)

    got = {r["key"]: r["value"].get("tier") for r in consume(kafka.bootstrap, out, expect=2)}
    assert got == {"o0": "gold", "o1": None}


@pytest.mark.slow
def test_a_source_reads_the_subject_it_names_under_the_record_name_strategy(
        kafka, schema_registry, spark, names, tmp_path):
    """Producers under RecordNameStrategy register the record's full name as the subject; the source
    names that subject."""
    from confluent_kafka.schema_registry import SchemaRegistryClient, record_subject_name_strategy
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from streamapp_testkit.runtime import app, consume, run_available_now

    topic, out = names("clicks"), names("out")
    for name in (topic, out):
        create_topic(kafka.bootstrap, name, partitions=1)
    record = {**CLICK_V1, "name": f"Click{uuid.uuid4().hex[:8]}"}  # a subject of this test's own
    serializer = AvroSerializer(SchemaRegistryClient(schema_registry.client_conf()), json.dumps(record),
                                conf={"subject.name.strategy": record_subject_name_strategy})
    ctx = SerializationContext(topic, MessageField.VALUE)
    produce(kafka.bootstrap, topic, [(b"a", serializer({"user": "a", "n": 1, "at": 0}, ctx))])
    subject = f"io.streamapp.test.{record['name']}"
    the_app = app(names("app"), {
        "kafka": {"bootstrapServers": "kafka:9092", "schemaRegistry": {"url": schema_registry.url}},
        "sources": [{"name": "clicks", "topic": topic, "format": "avro", "subject": subject,
                     "schema": {"user": "string", "n": "long"}}],
        "sinks": [{"from": "clicks", "kafka": {"topic": out}}],
    })

    run_available_now(spark, the_app, kafka, tmp_path)

    assert [(r["value"]["user"], r["value"]["n"]) for r in consume(kafka.bootstrap, out, expect=1)] == [("a", 1)]


def test_each_record_is_decoded_once_however_many_filters_read_its_fields(schema_registry, spark):
    """Spark copies a deterministic UDF into each filter it pushes below the projection that reads the
    UDF's fields, and the records were decoded once for each. The decoder is one node of the plan."""
    from datetime import datetime

    from pyspark.sql import functions as F

    from streamapp_api import Source
    from streamapp_runtime.compile.sources import ERROR, parse
    from streamapp_runtime.plan import REGISTRY_URL_OPTION

    value = _serializer(schema_registry, CLICK_V1, "once")({"user": "a", "n": 1, "at": 0})
    raw = spark.createDataFrame([(b"k", value, "once", 0, 0, datetime(2026, 1, 1))],
                                "key binary, value binary, topic string, partition int, offset long, timestamp timestamp")
    source = Source.model_validate({"name": "s", "topic": "once", "format": "avro", "schema": {"user": "string", "n": "long"}})
    good = parse(raw, source, {REGISTRY_URL_OPTION: schema_registry.url}).where(F.col(ERROR).isNull()).where(F.col("n") > 0)

    assert good._jdf.queryExecution().executedPlan().toString().count("ArrowEvalPython") == 1
    assert [(r.user, r.n) for r in good.collect()] == [("a", 1)]


def test_avro_keys_become_columns_and_json_in_key_and_an_unreadable_key_says_why(schema_registry, spark):
    """keyFormat avro: the key record's fields are columns beside the value's, _key is the key as JSON; a
    key not in the wire format, or none, is the record's error (its value was fine)."""
    from datetime import datetime

    from streamapp_api import Source
    from streamapp_runtime.compile.sources import ERROR, parse
    from streamapp_runtime.plan import REGISTRY_URL_OPTION

    value = _serializer(schema_registry, CLICK_V1, "keyed")({"user": "a", "n": 1, "at": 0})
    key = _serializer(schema_registry, USER_KEY, "keyed", field="key")({"user_id": "u1"})
    at = datetime(2026, 1, 1)
    raw = spark.createDataFrame([(key, value, "keyed", 0, 0, at), (b"u1", value, "keyed", 0, 1, at),
                                 (None, value, "keyed", 0, 2, at)],
                                "key binary, value binary, topic string, partition int, offset long, timestamp timestamp")
    source = Source.model_validate({"name": "s", "topic": "keyed", "format": "avro", "schema": {"user": "string", "n": "long"},
                                    "keyFormat": "avro", "keySchema": {"user_id": "string"}})
    rows = parse(raw, source, {REGISTRY_URL_OPTION: schema_registry.url}).orderBy("_offset").collect()

    assert [(r._key, r.user_id, r.user, r.n, r[ERROR]) for r in rows[:1]] == [('{"user_id":"u1"}', "u1", "a", 1, None)]
    assert rows[1][ERROR].startswith("key: not in the Confluent wire format") and rows[1].user_id is None
    assert rows[2][ERROR] == "key: none, and keyFormat avro needs one"


def _plain_avro(schema: dict, record: dict) -> bytes:
    """A record as plain Avro binary of ``schema``, no header: what Flink's avro format writes."""
    import io

    from fastavro import parse_schema, schemaless_writer

    out = io.BytesIO()
    schemaless_writer(out, parse_schema(schema), record)
    return out.getvalue()


@pytest.mark.slow
def test_an_app_reads_plain_avro_values_of_its_writer_schema_without_a_registry_and_dead_letters_the_rest(
        kafka, spark, names, tmp_path):
    """format avro with avro.writerSchema: no registry, each value plain Avro of that schema. Values that
    do not decode with it (garbage, a record cut short) or are null reach the dead-letter topic untouched,
    with the reason in a header."""
    from streamapp_testkit.runtime import app, consume, run_available_now

    topic, out, dlq = names("clicks"), names("out"), names("dlq")
    for name in (topic, out, dlq):
        create_topic(kafka.bootstrap, name, partitions=1)
    good = [_plain_avro(CLICK_V1, {"user": user, "n": n, "at": 0}) for user, n in (("a", 1), ("b", 2))]
    truncated = _plain_avro(CLICK_V1, {"user": "t", "n": 3, "at": 0})[:-1]
    produce(kafka.bootstrap, topic, [(b"a", good[0]), (b"g", b'{"user": "g"}'), (b"t", truncated), (b"z", None),
                                     (b"b", good[1])])
    the_app = app(names("app"), {
        "kafka": {"bootstrapServers": "kafka:9092"},
        "sources": [{"name": "clicks", "topic": topic, "format": "avro", "avro": {"writerSchema": json.dumps(CLICK_V1, indent=2)},
                     "schema": {"user": "string", "n": "long", "at": "timestamp"}, "eventTime": "at"}],
        "sinks": [{"from": "clicks", "kafka": {"topic": out}}],
        "deadLetter": {"topic": dlq},
    })

    run_available_now(spark, the_app, kafka, tmp_path)

    rows = consume(kafka.bootstrap, out, to_end=True)
    assert [(r["value"]["user"], r["value"]["n"]) for r in rows] == [("a", 1), ("b", 2)]
    letters = {r["key"]: r for r in consume(kafka.bootstrap, dlq, to_end=True)}
    assert sorted(letters) == ["g", "t", "z"]
    where = "clicks.avro.writerSchema"
    assert letters["g"]["headers"]["streamapp.error"] == f"malformed Avro for {where}: EOFError: Expected -62 bytes, read 12"
    assert letters["t"]["headers"]["streamapp.error"] == f"malformed Avro for {where}: EOFError: the value ends inside the record"
    assert letters["z"]["headers"]["streamapp.error"] == "null value: a stream record needs an Avro value"
    assert letters["g"]["value"] == {"user": "g"}  # untouched: it can be replayed once fixed
