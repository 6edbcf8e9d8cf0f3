"""Protobuf values read by Spark: in the Confluent wire format through the test bed's schema registry,
written by confluent-kafka's ProtobufSerializer, each with the writer schema its id and message
indexes name; or plain payloads described by a descriptor set. What cannot be read gets its reason.

The registry here (AxonOps Schema Registry) compiles .proto text and refuses the serialized
descriptor ProtobufSerializer registers by itself (HTTP 422), so each schema is registered as .proto
text first, as a CI pipeline or a Java/Go producer does, and the serializer writes with the subject's
latest version (use.latest.version) instead of registering."""

from __future__ import annotations

import struct
from collections import defaultdict
from datetime import datetime, timedelta, timezone

import pytest

from streamapp_testbed.kafka_admin import create_topic, produce
from streamapp_testkit.protobuf import descriptor_set, message_classes, proto3_file, proto_text

pytestmark = pytest.mark.integration

BASE = datetime(2026, 1, 1, tzinfo=timezone.utc)
# Two messages, Click second: its records carry the message indexes [1], not the one-byte [0].
CLICK = {"Page": [("path", 1, "string")],
         "Click": [("user", 1, "string"), ("n", 2, "int64"), ("at", 3, "google.protobuf.Timestamp")]}
# Registered after the reader started: a field added (BACKWARD compatible).
CLICK_V2 = {**CLICK, "Click": [*CLICK["Click"], ("page", 4, "string")]}
# `n` as text: registered under another subject, as a producer with a wrong schema would.
CLICK_N_AS_TEXT = {**CLICK, "Click": [("user", 1, "string"), ("n", 2, "string"), ("at", 3, "google.protobuf.Timestamp")]}
UNKNOWN_ID = b"\x00" + struct.pack(">I", 987654) + b"\x00\x0a\x01x"


def _writer(registry, messages: dict, subject_topic: str, message: str = "Click", part: str = "value"):
    """(the class of ``message``, a serializer of it): the schema registered as .proto text under the
    topic's value (or key) subject, records written by ProtobufSerializer with that latest version."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    file = proto3_file("shop.proto", "shop.v1", messages)
    client = SchemaRegistryClient(registry.client_conf())
    client.register_schema(f"{subject_topic}-{part}", Schema(proto_text(file), "PROTOBUF"))
    cls = message_classes(file)[message]
    serializer = ProtobufSerializer(cls, client, {"auto.register.schemas": False, "use.latest.version": True})
    ctx = SerializationContext(subject_topic, MessageField.VALUE if part == "value" else MessageField.KEY)
    return cls, lambda record: serializer(record, ctx)


def _click(cls, user: str, n, seconds: float, **more):
    message = cls(user=user, n=n, **more)
    message.at.FromDatetime(BASE + timedelta(seconds=seconds))
    return message


def _columns(ddl: str):
    from pyspark.sql.types import DataType
    return DataType.fromDDL(ddl)


def test_each_record_is_read_with_its_writer_schema_and_the_unreadable_ones_say_why(
        kafka, schema_registry, spark, names):
    from pyspark.sql import functions as F

    from streamapp_api.protobuf_schemas import top_level_messages
    from streamapp_runtime.compile.avro_values import Registry
    from streamapp_runtime.compile.protobuf_values import RegistryMessages, protobuf_values

    topic = names("clicks")
    create_topic(kafka.bootstrap, topic, partitions=1)
    v1_class, v1 = _writer(schema_registry, CLICK, topic)
    produce(kafka.bootstrap, topic, [(None, v1(_click(v1_class, "a", 1, 0)))])
    registry = Registry(schema_registry.url)
    assert [m.full_name for m in top_level_messages(registry, f"{topic}-value")] == ["shop.v1.Page", "shop.v1.Click"]

    v2_class, v2 = _writer(schema_registry, CLICK_V2, topic)  # registered now, after the start
    wrong_class, wrong = _writer(schema_registry, CLICK_N_AS_TEXT, names("elsewhere"))
    good_header = v1(_click(v1_class, "z", 0, 0))[:7]  # v1's id and indexes [1] before a payload that is not one
    assert good_header[5:] == b"\x02\x02"
    produce(kafka.bootstrap, topic, [
        (None, v2(_click(v2_class, "b", 2, 60, page="/cart"))),
        (None, v2(v2_class(user="c"))),                   # n and at unset: 0 (no presence) and null (a message)
        (None, wrong(_click(wrong_class, "d", "three", 0))),
        (None, UNKNOWN_ID),                                # an id the registry never gave
        (None, good_header[:6]),                           # cut in the message indexes
        (None, good_header + b"\xff\xff\xff"),             # the wire format, then no protobuf message
        (None, b'{"user": "e"}'),                          # JSON, not the wire format
        (None, None),
    ])
    columns = _columns("user string, n bigint, at timestamp, page string")
    raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
           .option("subscribe", topic).option("startingOffsets", "earliest").load())
    decoded = protobuf_values(F.col("value"), RegistryMessages(registry), columns, "__error")

    rows = [r.v.asDict() for r in raw.select("offset", decoded.alias("v")).orderBy("offset").collect()]

    def at(seconds):
        return (BASE + timedelta(seconds=seconds)).replace(tzinfo=None)  # the session's time zone is UTC
    assert rows[:3] == [
        {"user": "a", "n": 1, "at": at(0), "page": None, "__error": None},  # v1 has no page: null
        {"user": "b", "n": 2, "at": at(60), "page": "/cart", "__error": None},
        {"user": "c", "n": 0, "at": None, "page": "", "__error": None},
    ]
    assert all(set(row.values()) - {row["__error"]} == {None} for row in rows[3:])
    errors = [row["__error"] for row in rows[3:]]
    assert errors[0].startswith("wrong type in writer schema id ") and errors[0].endswith(
        "(shop.v1.Click): field 'n': string does not fit a bigint column")
    assert errors[1] == "unknown schema id 987654: the registry has no Protobuf schema of that id"
    assert errors[2].startswith("malformed message indexes after schema id ") and errors[2].endswith(": a count of 1 with 0 bytes left")
    assert errors[3].startswith("malformed Protobuf for writer schema id ") and "(shop.v1.Click)" in errors[3]
    assert errors[4] == "not in the Confluent wire format (a zero byte, then a 4-byte schema id)"
    assert errors[5] == "null value: a stream record needs a Protobuf value"


def test_a_writer_schema_that_references_another_subjects_schema_is_read(schema_registry, names):
    """A .proto importing another, registered with a reference to that file's subject (as Confluent's
    serializers register imports): the reference is fetched with the schema."""
    from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from streamapp_runtime.compile.avro_values import Registry
    from streamapp_runtime.compile.protobuf_values import ProtobufDecoder, RegistryMessages

    money = proto3_file("shop/money.proto", "shop.common", {"Money": [("currency", 1, "string"), ("units", 2, "int64")]})
    order = proto3_file("shop/order.proto", "shop.v1", {"Order": [("id", 1, "string"), ("total", 2, "shop.common.Money")]})
    order.dependency.append("shop/money.proto")
    client = SchemaRegistryClient(schema_registry.client_conf())
    money_subject, order_subject = names("money"), names("orders") + "-value"
    client.register_schema(money_subject, Schema(proto_text(money), "PROTOBUF"))
    schema_id = client.register_schema(order_subject, Schema(proto_text(order), "PROTOBUF", [
        SchemaReference("shop/money.proto", money_subject, 1)]))
    payload = message_classes(order, money)["Order"](id="o1", total={"currency": "EUR", "units": 12}).SerializeToString()
    columns = StructType([StructField("id", StringType()), StructField("total", StructType([
        StructField("currency", StringType()), StructField("units", LongType())]))])
    decoder = ProtobufDecoder(RegistryMessages(Registry(schema_registry.url)), columns)

    assert decoder.decode(b"\x00" + struct.pack(">I", schema_id) + b"\x00" + payload) == (
        {"id": "o1", "total": {"currency": "EUR", "units": 12}}, None)


def test_each_record_is_decoded_once_however_many_filters_read_its_fields(schema_registry, spark, names):
    from pyspark.sql import functions as F

    from streamapp_api import Source
    from streamapp_runtime.compile.sources import ERROR, parse
    from streamapp_runtime.plan import REGISTRY_URL_OPTION

    topic = names("once")
    cls, write = _writer(schema_registry, CLICK, topic)
    raw = spark.createDataFrame([(b"k", write(_click(cls, "a", 1, 0)), topic, 0, 0, datetime(2026, 1, 1))],
                                "key binary, value binary, topic string, partition int, offset long, timestamp timestamp")
    source = Source.model_validate({"name": "s", "topic": topic, "format": "protobuf",
                                    "schema": {"user": "string", "n": "long"}})
    good = parse(raw, source, {REGISTRY_URL_OPTION: schema_registry.url}).where(F.col(ERROR).isNull()).where(F.col("n") > 0)

    assert good._jdf.queryExecution().executedPlan().toString().count("ArrowEvalPython") == 1
    assert [(r.user, r.n) for r in good.collect()] == [("a", 1)]


def test_protobuf_keys_become_columns_and_json_in_key_and_an_unreadable_key_says_why(schema_registry, spark, names):
    """keyFormat protobuf: the key message's fields are columns beside the value's, _key is the key as JSON;
    a key not in the wire format, or none, is the record's error (its value was fine); a keySchema column
    that is no field of the key subject's message stops the start."""
    from streamapp_api import Source
    from streamapp_runtime.compile.sources import ERROR, parse
    from streamapp_runtime.plan import REGISTRY_URL_OPTION

    topic = names("keyed")
    cls, value = _writer(schema_registry, CLICK, topic)
    key_class, key = _writer(schema_registry, {"UserKey": [("user_id", 1, "string"), ("region", 2, "int32")]},
                             topic, "UserKey", part="key")
    written = value(_click(cls, "a", 1, 0))
    at = datetime(2026, 1, 1)
    raw = spark.createDataFrame([(key(key_class(user_id="u1", region=7)), written, topic, 0, 0, at),
                                 (b"u1", written, topic, 0, 1, at), (None, written, topic, 0, 2, at)],
                                "key binary, value binary, topic string, partition int, offset long, timestamp timestamp")
    spec = {"name": "s", "topic": topic, "format": "protobuf", "schema": {"user": "string", "n": "long"},
            "keyFormat": "protobuf", "keySchema": {"user_id": "string", "region": "long"}}
    options = {REGISTRY_URL_OPTION: schema_registry.url}
    rows = parse(raw, Source.model_validate(spec), options).orderBy("_offset").collect()

    assert [(r._key, r.user_id, r.region, r.user, r.n, r[ERROR]) for r in rows[:1]] == [
        ('{"user_id":"u1","region":7}', "u1", 7, "a", 1, None)]
    assert rows[1][ERROR] == "key: not in the Confluent wire format (a zero byte, then a 4-byte schema id)"
    assert rows[1].user_id is None and rows[1]._key is None
    assert rows[2][ERROR] == "key: none, and keyFormat protobuf needs one"
    with pytest.raises(ValueError, match=f"'id' not a field of s.keySchema: subject {topic}-key message shop.v1.UserKey"):
        parse(raw, Source.model_validate({**spec, "keySchema": {"id": "string"}}), options)


def test_a_column_that_is_no_field_of_the_subjects_latest_message_stops_the_start(schema_registry, spark, names):
    from streamapp_api import Source
    from streamapp_runtime.compile.sources import parse
    from streamapp_runtime.plan import REGISTRY_URL_OPTION

    topic = names("typo")
    _writer(schema_registry, CLICK, topic)
    raw = spark.createDataFrame([], "key binary, value binary, topic string, partition int, offset long, timestamp timestamp")
    source = Source.model_validate({"name": "s", "topic": topic, "format": "protobuf",
                                    "schema": {"user": "string", "count": "long"}})

    with pytest.raises(ValueError, match=f"'count' not a field of s.schema: subject {topic}-value message shop.v1.Click"):
        parse(raw, source, {REGISTRY_URL_OPTION: schema_registry.url})


def _closed_windows(events: list[tuple[str, int, float]], watermark_s: float) -> dict[tuple[str, str], tuple[int, int]]:
    """(window start, user) -> (clicks, sum of n) of each 1-minute window the watermark has closed."""
    watermark = max(t for _, _, t in events) - watermark_s
    windows: dict = defaultdict(lambda: [0, 0])
    for user, n, t in events:
        start = 60 * (t // 60)
        windows[(start, user)][0] += 1
        windows[(start, user)][1] += n
    iso = "%Y-%m-%dT%H:%M:%S.000Z"
    return {((BASE + timedelta(seconds=start)).strftime(iso), user): tuple(v)
            for (start, user), v in windows.items() if start + 60 <= watermark}


@pytest.mark.slow
def test_an_app_counts_protobuf_clicks_in_windows_across_a_new_writer_schema_and_dead_letters_the_rest(
        kafka, schema_registry, spark, names, tmp_path):
    """`streamapp run`'s way: format protobuf through spec.kafka.schemaRegistry, a 1-minute window to a
    Kafka sink, compared with the same windows counted in plain Python. Run 1 reads v1's records; v2
    is registered after it and run 2 (same checkpoint) reads v2's too. Unreadable records reach the
    dead-letter topic untouched, with the reason in a header."""
    import random

    from streamapp_testkit.runtime import app, consume, run_available_now

    topic, out, dlq = names("clicks"), names("out"), names("dlq")
    for name in (topic, out, dlq):
        create_topic(kafka.bootstrap, name, partitions=1)
    rng = random.Random(37)
    # In event-time order on one partition: nothing is late, so every closed window is exact.
    events = [(f"u{rng.randrange(4)}", rng.randrange(1, 100), t) for t in sorted(rng.uniform(0, 600) for _ in range(240))]
    first, second = events[:120], events[120:]
    v1_class, v1 = _writer(schema_registry, CLICK, topic)
    produce(kafka.bootstrap, topic, [(u.encode(), v1(_click(v1_class, u, n, t))) for u, n, t in first])
    the_app = app(names("app"), {
        "kafka": {"bootstrapServers": "kafka:9092", "schemaRegistry": {"url": schema_registry.url}},
        "sources": [{"name": "clicks", "topic": topic, "format": "protobuf",
                     "schema": {"user": "string", "n": "long", "at": "timestamp"}, "eventTime": "at", "watermark": "30s"}],
        "streams": [{"name": "per-minute", "from": "clicks", "emit": "final", "steps": [
            {"window": {"type": "tumbling", "size": "1m"}},
            {"aggregate": {"groupBy": ["user"], "columns": {"clicks": "count(*)", "total": "sum(n)"}}}]}],
        "sinks": [{"from": "per-minute", "kafka": {"topic": out, "key": "user"}}],
        "deadLetter": {"topic": dlq},
    })
    run_available_now(spark, the_app, kafka, tmp_path)

    v2_class, v2 = _writer(schema_registry, CLICK_V2, topic)
    produce(kafka.bootstrap, topic, [(u.encode(), v2(_click(v2_class, u, n, t, page=f"/p{n}"))) for u, n, t in second]
            + [(b"x", UNKNOWN_ID), (b"g", b"\x00garbage")])
    run_available_now(spark, the_app, kafka, tmp_path)

    want = _closed_windows(events, 30)
    assert len(want) >= 30
    rows = consume(kafka.bootstrap, out, to_end=True)
    got = {(r["value"]["window_start"], r["key"]): (r["value"]["clicks"], r["value"]["total"]) for r in rows}
    assert got == want and len(rows) == len(want)  # each window written once
    letters = {r["key"]: r["headers"]["streamapp.error"] for r in consume(kafka.bootstrap, dlq, to_end=True)}
    assert letters == {"x": "unknown schema id 987654: the registry has no Protobuf schema of that id",
                       "g": f"unknown schema id {int.from_bytes(b'garb')}: the registry has no Protobuf schema of that id"}


@pytest.mark.slow
def test_an_app_reads_plain_protobuf_payloads_by_a_descriptor_set(kafka, spark, names, tmp_path, monkeypatch):
    """No registry: the records are bare payloads of shop.v1.Order, described by a FileDescriptorSet
    that a ConfigMap holds (here: its directory, as mounted in the driver)."""
    from streamapp_api import contract
    from streamapp_testkit.runtime import app, consume, run_available_now

    file = proto3_file("order.proto", "shop.v1", {
        "Order": [("id", 1, "string"), ("amount", 2, "double"), ("placed", 3, "google.protobuf.Timestamp"),
                  ("tier", 4, "Tier"), ("lines", 5, "Line", "repeated"), ("tags", 6, "map<string,string>"),
                  ("note", 7, "string", "optional")],
        "Line": [("sku", 1, "string"), ("qty", 2, "int32")]}, enums={"Tier": ["FREE", "GOLD"]})
    (tmp_path / "sets" / "shop-protos").mkdir(parents=True)
    (tmp_path / "sets" / "shop-protos" / "shop.desc").write_bytes(descriptor_set(file))
    monkeypatch.setenv(contract.ENV_DESCRIPTOR_SET_DIR, str(tmp_path / "sets"))
    classes = message_classes(file)
    order, line = classes["Order"], classes["Line"]
    orders = [order(id=f"o{i}", amount=i * 1.5, tier=i % 2, lines=[line(sku="s1", qty=i), line(sku="s2", qty=1)],
                    tags={"channel": "web"} if i % 2 else {}, **({"note": "gift"} if i == 3 else {}))
              for i in range(5)]
    for i, o in enumerate(orders):
        o.placed.FromDatetime(BASE + timedelta(seconds=i))
    topic, out, dlq = names("orders"), names("out"), names("dlq")
    for name in (topic, out, dlq):
        create_topic(kafka.bootstrap, name, partitions=1)
    truncated = b"\x0a\x05ab"  # field 1, a string of 5 bytes, 2 there
    produce(kafka.bootstrap, topic, [(o.id, o.SerializeToString()) for o in orders] + [("bad", truncated)])
    the_app = app(names("app"), {
        "sources": [{"name": "orders", "topic": topic, "format": "protobuf",
                     "protobuf": {"message": "shop.v1.Order", "descriptorSet": {"configMap": "shop-protos", "key": "shop.desc"}},
                     "schema": {"id": "string", "amount": "double", "placed": "timestamp", "tier": "string",
                                "lines": "array<struct<sku:string,qty:int>>", "tags": "map<string,string>", "note": "string"},
                     "eventTime": "placed"}],
        "sinks": [{"from": "orders", "kafka": {"topic": out, "key": "id"}}],
        "deadLetter": {"topic": dlq},
    })

    run_available_now(spark, the_app, kafka, tmp_path / "checkpoint")

    got = {r["key"]: r["value"] for r in consume(kafka.bootstrap, out, expect=5)}
    # Plain Python's reading of the same messages, in the columns' terms.
    want = {o.id: {"id": o.id, "amount": o.amount, "tier": ["FREE", "GOLD"][o.tier],
                   "lines": [{"sku": x.sku, "qty": x.qty} for x in o.lines], "tags": dict(o.tags),
                   "note": o.note if o.HasField("note") else None} for o in orders}
    assert {k: {c: v.get(c) for c in want[k]} for k, v in got.items()} == want
    assert [got[f"o{i}"]["placed"][:19] for i in range(5)] == [f"2026-01-01T00:00:0{i}" for i in range(5)]
    letters = consume(kafka.bootstrap, dlq, expect=1)
    assert letters[0]["key"] == "bad"
    assert letters[0]["headers"]["streamapp.error"].startswith("malformed Protobuf for shop.v1.Order: ")


@pytest.mark.slow
def test_a_table_of_protobuf_values_is_joined_and_its_tombstones_delete(kafka, schema_registry, spark, names, tmp_path):
    """A table of format protobuf through the registry, keyed by a field of its Protobuf keys (keyFormat
    protobuf): the latest message per key, a null value (tombstone) deleting its key rather than being an
    unreadable record."""
    from streamapp_testkit.runtime import app, consume, run_available_now
    from streamapp_testkit.runtime import produce as produce_json

    orders, profiles, out = names("orders"), names("profiles"), names("out")
    for topic in (orders, profiles, out):
        create_topic(kafka.bootstrap, topic, partitions=1)
    profile, write = _writer(schema_registry, {"Profile": [("tier", 2, "string")]}, profiles, "Profile")
    user, key = _writer(schema_registry, {"UserKey": [("user_id", 1, "string")]}, profiles, "UserKey", part="key")
    produce(kafka.bootstrap, profiles, [(key(user(user_id="u1")), write(profile(tier="gold"))),
                                        (key(user(user_id="u2")), write(profile(tier="silver"))),
                                        (key(user(user_id="u2")), None)])
    produce_json(kafka.bootstrap, orders, [(f"o{i}", {"order_id": f"o{i}", "user_id": u}) for i, u in enumerate(["u1", "u2"])])
    the_app = app(names("app"), {
        "kafka": {"bootstrapServers": "kafka:9092", "schemaRegistry": {"url": schema_registry.url}},
        # not "orders": test_cleanup lists every group of a source of that name on the shared broker
        "sources": [{"name": "purchases", "topic": orders, "schema": {"order_id": "string", "user_id": "string"}}],
        "tables": [{"name": "profiles", "topic": profiles, "key": "user_id", "format": "protobuf",
                    "schema": {"tier": "string"}, "keyFormat": "protobuf", "keySchema": {"user_id": "string"}}],
        "streams": [{"name": "enriched", "from": "purchases",
                     "steps": [{"join": {"table": "profiles", "key": "user_id", "type": "left"}}]}],
        "sinks": [{"from": "enriched", "kafka": {"topic": out, "key": "order_id"}}],
    })

    run_available_now(spark, the_app, kafka, tmp_path)

    got = {r["key"]: r["value"].get("tier") for r in consume(kafka.bootstrap, out, expect=2)}
    assert got == {"o0": "gold", "o1": None}
