"""The JSON fast path (FlatJson, built by `streamapp jars`) reads every record exactly as Spark's
from_json does: the same columns and the same ``__error`` for good records, records of the wrong
shape and Spark's lenient forms alike; and it answers the plain records itself, so it is in use."""

from __future__ import annotations

import datetime as dt

import pytest

from streamapp_api import Source
from streamapp_runtime.compile import sources

pytestmark = [pytest.mark.integration]

SCHEMA = {"uuid": "string", "n": "long", "i": "int", "x": "double", "ok": "boolean", "ts": "timestamp"}
PLAIN = [
    b'{"uuid":"u1","n":5,"i":7,"x":1.5,"ok":true,"ts":"2026-01-01T12:00:00.123Z"}',
    b' { "uuid" : "caf\xc3\xa9 \\"q\\" \\u00e9", "n": -3, "x": 2, "ok": false, "ts": "2026-01-01T12:00:00Z" } ',
    b'{"ts":"2026-03-01T00:00:01.999Z","extra":{"a":[1,{"b":2}]},"more":[1,2],"uuid":null}',
    b'{"\\u0075uid":"escaped name","x":-0.0}',
    b"{}",
    b'{"x":1e400,"n":9223372036854775807,"i":-2147483648}',
    b'{"uuid":"\xf0\x9f\x99\x82"}',
]
ODD = [
    b'{"n":"5"}', b'{"n":5.0}', b'{"n":9223372036854775808}', b'{"i":2147483648}', b'{"i":1.0}',
    b'{"uuid":5}', b'{"uuid":{"a":1}}', b'{"uuid":[1]}', b'{"ok":"true"}', b'{"ok":1}', b'{"x":"NaN"}',
    b'{"x":NaN}', b'{"ts":1767268800}', b'{"ts":"2026-01-01 12:00:00"}', b'{"ts":"2026-01-01T12:00:00+02:00"}',
    b'{"ts":"2026-01-01T12:00:00.5Z"}', b'{"ts":"2026-02-30T00:00:00Z"}', b'{"ts":"0999-01-01T00:00:00Z"}',
    b'{"ts":"2026-01-01T24:00:00Z"}', b'{"ts":"2026-01-01"}', b"{'uuid':'single quotes'}", b'{uuid:"bare"}',
    b'{"n":1,"n":2}', b'{"n":1} trailing', b'{"n":1}{"n":2}', b'[{"n":1}]', b"", b"   ", b"null", b"42",
    b'"text"', b'{"uuid":"bad \xff utf8"}', b'\xef\xbb\xbf{"uuid":"bom"}', b'{"n":1,}', b'{"n":01}',
    b'{"uuid":"a"} // comment', b"{", b'{"x":.5}', None,
    '{"uuid":"utf-16"}'.encode("utf-16-le"), '{"uuid":"utf-16"}'.encode("utf-16-be"), '{"uuid":"u16"}'.encode("utf-16"),
    '{"uuid":"utf-32"}'.encode("utf-32-le"), b'{\x00"n":1}', b'\x00{"n":1}',
]


def _kafka_rows(spark, values):
    at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    rows = [(b"k", value, "t", 0, offset, at) for offset, value in enumerate(values)]
    return spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset long, timestamp timestamp")


def _parsed(spark, values, fast: bool):
    spark.conf.set(sources.FAST_JSON_CONF, str(fast).lower())
    try:
        source = Source.model_validate({"name": "clicks", "topic": "t", "format": "json", "schema": SCHEMA})
        frame = sources.parse(_kafka_rows(spark, values), source, {})
        return [tuple(row) for row in frame.orderBy("_offset").collect()]
    finally:
        spark.conf.unset(sources.FAST_JSON_CONF)


def test_the_fast_path_reads_every_record_as_from_json_does(spark):
    values = PLAIN + ODD
    with_fast, from_json_only = _parsed(spark, values, True), _parsed(spark, values, False)
    assert len(with_fast) == len(values)
    for value, fast_row, spark_row in zip(values, with_fast, from_json_only):
        assert repr(fast_row) == repr(spark_row), value  # repr: NaN equals NaN
    errors = {value: row[-1] for value, row in zip(values, from_json_only)}
    assert all(errors[value] is None for value in PLAIN)
    assert errors[b'{"n":"5"}'] == "malformed" and errors[None] is not None


def test_the_fast_path_answers_plain_records_and_leaves_the_rest_to_from_json(spark):
    layout = sources.flat_json_layout(SCHEMA)
    column = sources._fast_json(spark, SCHEMA, sources.schema_ddl(SCHEMA, corrupt=True))
    assert column is not None, "FlatJson is not on the classpath: `streamapp jars` builds it"
    rows = _kafka_rows(spark, PLAIN + ODD).orderBy("offset").select(column.alias("p")).collect()
    answered = [row["p"] is not None for row in rows]
    assert answered == [True] * len(PLAIN) + [False] * len(ODD), layout
    first = rows[0]["p"]
    assert (first["uuid"], first["n"], first["i"], first["x"], first["ok"]) == ("u1", 5, 7, 1.5, True)
