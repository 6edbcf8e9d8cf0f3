"""Kafka sink: the value columns and the key (the sink's key column or the record key), each in the
sink's format (sinks/kafka_values.py).

Delivery is at-least-once: a batch replayed after a crash is written again. Keys are deterministic
(the same record gives the same key and value), so a compacted topic or a consumer keyed on them
converges to the same content.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamapp_api.sinks import KafkaSink

from streamapp_runtime.compile.avro_values import Registry
from streamapp_runtime.compile.frame import INTERNAL_PREFIX, value_columns
from streamapp_runtime.sinks import avro_schema, protobuf_schema
from streamapp_runtime.sinks.schema_registration import SchemaTarget
from streamapp_runtime.sinks.kafka_values import KEY_ENCODERS, VALUE_ENCODERS, ColumnTarget

NO_KEY = "streamapp.noKey"  # metadata of the key column of a sink that writes no key


@dataclass(frozen=True)
class Formats:
    """The sink's value and key formats (rows of VALUE_ENCODERS and KEY_ENCODERS), each with its target."""

    value: str
    key: str
    value_target: ColumnTarget
    key_target: ColumnTarget


def formats(sink: KafkaSink, where: str, query: str, registry: Registry | None = None) -> Formats:
    """The sink's formats with their targets; ``registry`` the app's (None: the pure half, none reached)."""
    def schemas(subject: str, part: str) -> SchemaTarget | None:
        return None if registry is None else \
            SchemaTarget(registry, subject, sink.register_schema, f"{where}.kafka ({query})", part)

    # The record and message names follow the subject, not the sink's name: renaming the sink keeps the
    # schema the subject holds (a renamed record is an incompatible schema to the registry).
    key_name, value_name, topic = sink.key or "_key", sink.value_subject(), sink.topic
    value = ColumnTarget(f"{where}.kafka.format", lambda t: avro_schema.writer_schema(value_name, t),
                         lambda t: protobuf_schema.value_schema(value_name, t), schemas(sink.value_subject(), "value"))
    key = ColumnTarget(f"{where}.kafka.keyFormat", lambda t: avro_schema.key_schema(topic, key_name, t),
                       lambda t: protobuf_schema.key_schema(topic, key_name, t), schemas(sink.key_subject(), "key"))
    return Formats(sink.format, sink.key_format, value, key)


def key_column(df: DataFrame, key: str | None, where: str) -> str | None:
    if key is not None:
        if key not in df.columns:
            shown = ", ".join(c for c in df.columns if not c.startswith(INTERNAL_PREFIX))
            raise ValueError(f"{where}.kafka.key: column {key!r} is not in the stream; its columns are {shown}")
        return key
    return "_key" if "_key" in df.columns else None


def kafka_rows(df: DataFrame, key: str | None, formats: Formats) -> DataFrame:
    """(key, value), each in its format, before the formats' side effects (``encoded``). No key column:
    a null key."""
    values = df.select(*[F.col(f"`{c}`") for c in value_columns(df.columns)])
    value = VALUE_ENCODERS[formats.value].column(values, formats.value_target)
    if key:
        key_col = KEY_ENCODERS[formats.key].column(df.select(F.col(f"`{key}`")), formats.key_target).alias("key")
    else:  # marked, so that no key format encodes it (or registers a schema for keys never written)
        key_col = F.lit(None).cast("string").alias("key", metadata={NO_KEY: True})
    return df.select(key_col, value.alias("value"))


def encoded(df: DataFrame, formats: Formats) -> DataFrame:
    """The frame of ``kafka_rows`` as the query writes it (the formats' schemas registered, say)."""
    for name, encoder, target in (("key", KEY_ENCODERS[formats.key], formats.key_target),
                                  ("value", VALUE_ENCODERS[formats.value], formats.value_target)):
        if encoder.encode is not None and not df.schema[name].metadata.get(NO_KEY):
            df = encoder.encode(df, name, target)
    return df
