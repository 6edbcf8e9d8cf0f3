"""Avro values of a Kafka sink in the Confluent wire format: the writer schema registered (or looked up)
under its subject when the query starts, then each row encoded with it.

A value is a zero byte, the schema id (4 bytes, big-endian) and the record (compile/avro_values.py
reads the same format). Rows are encoded in Python with fastavro, in an Arrow UDF: a batch of rows to
each call on the executors. The same row gives the same bytes, so both deliveries write what the
other would: Spark's Kafka sink takes the binary column, and the exactly-once writer hashes and
produces it as it is (sinks/kafka_transactions.py).
"""

from __future__ import annotations

import io
import json
import logging
import urllib.parse
from dataclasses import dataclass

# At module level: arrow_udf reads the encoder's type hints (pa.Array -> pa.Array) in this module's globals.
import pyarrow as pa

from streamapp_api.schema_registry import Registry

from streamapp_runtime.compile.avro_values import HEADER, MAGIC

log = logging.getLogger("streamapp.runtime")


class SchemaRefused(RuntimeError):
    """The registry would not give the sink's schema an id: the query does not start."""


@dataclass(frozen=True)
class SchemaTarget:
    """Where a sink's key or value schema goes: the registry, the subject, and whether to register it
    there (else only look it up); ``sink`` names the sink in messages, ``part`` is "key" or "value"."""

    registry: Registry
    subject: str
    register: bool
    sink: str
    part: str = "value"


def refusal(target: SchemaTarget, status: int, answer: dict) -> str:
    """Why the registry gave the schema no id: what, the registry's own words, what to do; a line each,
    so that the driver's termination message (each line cut at 400 characters) keeps all three. Pure."""
    code = answer.get("error_code")
    http = f"HTTP {status}" + (f", error {code}" if code is not None else "")
    if status in (401, 403):
        what, todo = f"the registry refused the credentials ({http})", "check spec.kafka.schemaRegistry.secretRef"
    elif not target.register:
        what = f"not there ({http}; registerSchema: false looks it up only)"
        todo = "register that schema (the driver's log shows it), or set registerSchema: true"
    elif status == 409:
        what = f"incompatible with the subject's versions ({http})"
        todo = "make the stream's columns compatible, change the subject's compatibility level, or write to another subject"
    else:
        what, todo = f"refused ({http})", "see the registry's answer"
    return "\n".join([f"{target.sink}: the {target.part} schema under subject {target.subject!r}: {what}",
                      f"the registry's answer: {answer.get('message') or 'none'}",
                      f"{todo} (registry {target.registry.url})"])


def schema_id(target: SchemaTarget, schema: object) -> int:
    """The id of ``schema`` under the subject: registered (the registry answers with the id of an equal
    schema already there), or looked up. SchemaRefused otherwise; RegistryError when it does not answer."""
    subject = urllib.parse.quote(target.subject, safe="")
    path = f"/subjects/{subject}/versions" if target.register else f"/subjects/{subject}"
    status, answer = target.registry.post(path, {"schema": json.dumps(schema)})  # no schemaType: AVRO
    if status == 200 and isinstance(answer.get("id"), int):
        log.info("%s: %s schema id %d under subject %s: %s", target.sink, target.part, answer["id"], target.subject,
                 json.dumps(schema))
        return answer["id"]
    why = refusal(target, status, answer)
    log.error("%s\nthe %s schema: %s", why, target.part, json.dumps(schema))
    raise SchemaRefused(why)


# Parsed schemas by their text, in each Python worker: parsed once per process, not once per batch.
_PARSED: dict[str, object] = {}


def encode_records(schema_text: str, header: bytes, records: list) -> list[bytes | None]:
    """Each record (a dict of the schema's fields, or a key's value) as ``header`` and its Avro body; a
    null one as null (a key: no key, as the serializers write None)."""
    from fastavro import parse_schema, schemaless_writer

    if schema_text not in _PARSED:
        _PARSED[schema_text] = parse_schema(json.loads(schema_text))
    parsed = _PARSED[schema_text]
    encoded: list[bytes | None] = []
    for record in records:
        if record is None:
            encoded.append(None)
            continue
        buffer = io.BytesIO()
        buffer.write(header)
        schemaless_writer(buffer, parsed, record)
        encoded.append(buffer.getvalue())
    return encoded


def wire_format_header(schema_id: int) -> bytes:
    return HEADER.pack(MAGIC, schema_id)


def avro_column(value, schema: object, schema_id: int):
    """A binary column of wire-format values from a column of the schema's type (a struct for a record)."""
    from pyspark.sql.functions import arrow_udf

    schema_text, header = json.dumps(schema, sort_keys=True), wire_format_header(schema_id)

    @arrow_udf("binary")  # type: ignore[call-overload]
    def encode(values: pa.Array) -> pa.Array:
        # Maps as dicts, as fastavro writes them; timestamps come as datetimes with their time zone.
        records = values.to_pylist(maps_as_pydicts="strict")
        return pa.array(encode_records(schema_text, header, records), pa.binary())

    return encode(value)
