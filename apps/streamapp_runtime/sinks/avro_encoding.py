"""Avro values of a Kafka sink in the Confluent wire format: the writer schema registered (or looked up)
under its subject when the query starts (sinks/schema_registration.py), then each row encoded with it.

A value is a zero byte, the schema id (4 bytes, big-endian) and the record (compile/avro_values.py
reads the same format). Rows are encoded in Python with fastavro, in an Arrow UDF: a batch of rows to
each call on the executors. The same row gives the same bytes, so both deliveries write what the
other would: Spark's Kafka sink takes the binary column, and the exactly-once writer hashes and
produces it as it is (sinks/kafka_transactions.py).
"""

from __future__ import annotations

import io
import json

# At module level: arrow_udf reads the encoder's type hints (pa.Array -> pa.Array) in this module's globals.
import pyarrow as pa

from streamapp_runtime.compile.avro_values import HEADER, MAGIC

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
