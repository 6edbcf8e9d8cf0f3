"""Kafka sources and their parsing: JSON with the declared schema, metadata columns, event time.

Every record gets ``__error``: null for a good record, else why it cannot be used (malformed JSON,
a value of the wrong type, no event time). The pipeline reads the good ones; ``dlq`` writes the rest.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from streamapp_api import Source, Table
from streamapp_api.durations import spark_interval
from streamapp_api.protobuf_schemas import top_level_messages
from streamapp_api.schema_registry import Registry, topic_subject

from streamapp_runtime import spark_compat
from streamapp_runtime.compile.avro_values import FixedSchema, ReaderSchema, avro_values
from streamapp_runtime.compile.frame import Frame
from streamapp_runtime.compile.protobuf_values import (DescriptorSetMessages, RegistryMessages, check_columns,
                                                       protobuf_values, read_descriptor_set)
from streamapp_runtime.plan import REGISTRY_URL_OPTION, REGISTRY_USER_INFO_OPTION, spark_kafka_options

log = logging.getLogger("streamapp.runtime")

CORRUPT = "__corrupt"
PARSED = "__parsed"
ERROR = "__error"
ISOLATION = "kafka.isolation.level"
RAW_KEY = "__raw_key"
RAW_VALUE = "__raw_value"
BAD_COUNT_PREFIX = "streamapp.bad."  # observed metrics: bad records per batch (bad_count_name)
# Timestamps keep microseconds through the JSON round trips the runtime makes internally (table joins,
# accumulate). Not used to read sources: a fixed pattern would refuse "...T10:00:00Z" without a fraction.
JSON_OPTIONS = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX", "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"}


def schema_ddl(schema: dict[str, str], corrupt: bool = False) -> str:
    """``{'a': 'long'}`` -> ``'`a` long'`` (a DDL string from_json accepts)."""
    fields = [f"`{name}` {type_text}" for name, type_text in schema.items()]
    if corrupt:
        fields.append(f"`{CORRUPT}` string")
    return ", ".join(fields)


# The JSON fast path (jvm/io/streamapp/runtime/FlatJson.java, built by `streamapp jars`): Jackson on
# the value's bytes for flat schemas, with from_json for every record it does not answer. Spark's
# from_json decodes each record through a new InputStreamReader, which the fast path skips (how much
# faster on the data-plane bench: bench/README.md, "How the data-plane figures were reached"). spark.streamapp.fastJson=false turns it off.
FAST_JSON_CLASS = "io.streamapp.runtime.FlatJson"
FAST_JSON_CONF = "spark.streamapp.fastJson"
_FAST_JSON_KINDS = {"string": "s", "long": "l", "bigint": "l", "int": "i", "integer": "i", "double": "d",
                    "boolean": "b", "timestamp": "t"}
_fast_json_failed: list[str] = []  # why the class could not be registered: logged once a process


def flat_json_layout(schema: dict[str, str]) -> str | None:
    """The fast path's layout of a schema, ``'name:kind,...'``; None when a type is not one it reads
    (then from_json reads every record). Pure."""
    kinds = [_FAST_JSON_KINDS.get(type_text.strip().lower()) for type_text in schema.values()]
    if not schema or None in kinds:
        return None
    return ",".join(f"{name}:{kind}" for name, kind in zip(schema, kinds))


def _fast_json(spark: SparkSession, schema: dict[str, str], ddl: str) -> Column | None:
    """``FlatJson(value, layout)`` registered for this schema's struct, or None (from_json alone)."""
    layout = flat_json_layout(schema)
    if layout is None or spark.conf.get(FAST_JSON_CONF, "true").strip().lower() == "false":
        return None
    name = "streamapp_json_" + hashlib.sha256(ddl.encode()).hexdigest()[:12]
    try:
        if not spark.catalog.functionExists(name):  # one registration a session: Spark warns on each replacement
            spark.udf.registerJavaFunction(name, FAST_JSON_CLASS, ddl)
    except Exception as exc:  # noqa: BLE001 - no runtime jar on the classpath: from_json reads every record
        if not _fast_json_failed:
            log.warning("JSON is read with Spark's from_json only (%s is not on the classpath: run `streamapp jars`): %s",
                        FAST_JSON_CLASS, str(exc).splitlines()[0])
            _fast_json_failed.append(str(exc))
        return None
    return F.call_udf(name, F.col("value"), F.lit(layout))


def spark_source_name(name: str) -> str:
    """A source's or table's name as Spark takes it (ASCII letters, digits and '_'): '-' becomes '_'.
    It keys the source's offsets in the checkpoint, so it must never change for a name. Pure."""
    return name.replace("-", "_")


def read_kafka(spark: SparkSession, topics: list[str], options: dict[str, str], starting: str,
               max_offsets: int | None = None, fail_on_data_loss: bool = True, *, name: str) -> DataFrame:
    """``name``: the name the query's checkpoint knows this source by (unique in the query), when the
    session names its sources (spark_compat.name_source)."""
    # Committed records only, unless the app's options say otherwise: an upstream app writing with
    # delivery exactly-once leaves aborted batches in the log that must not be read.
    reader = spark.readStream.format("kafka").options(**{ISOLATION: "read_committed", **spark_kafka_options(options)})
    reader = spark_compat.name_source(spark, reader, name)
    reader = reader.option("subscribe", ",".join(topics)).option("startingOffsets", starting)
    reader = reader.option("failOnDataLoss", str(fail_on_data_loss).lower())
    if max_offsets is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    return reader.load()


def _metadata(raw: DataFrame) -> list[Column]:
    return [
        F.col("key").cast("string").alias("_key"),
        F.col("timestamp").alias("_timestamp"),
        F.col("topic").alias("_topic"),
        F.col("partition").alias("_partition"),
        F.col("offset").alias("_offset"),
    ]


def parse(raw: DataFrame, item: Source | Table, options: dict[str, str]) -> DataFrame:
    """Kafka rows -> metadata, value columns, raw key/value and ``__error`` (null when usable).

    Each value is parsed once. ``from_json`` flags text that is not one JSON object, or has a value
    of the wrong type, in the corrupt-record column; timestamps are read with Spark's default
    ISO-8601 parsing (with or without fraction and offset, or epoch seconds).
    """
    keep = [*_metadata(raw), F.col("key").alias(RAW_KEY), F.col("value").alias(RAW_VALUE)]
    parsed = FORMATS[item.format].parse(raw, item, keep, options)
    read_key = KEY_READERS[item.key_format]
    return parsed if read_key is None else read_key(parsed, item, options)


def _parse_string(raw: DataFrame, item: Source | Table, keep: list[Column], options: dict[str, str]) -> DataFrame:
    """The value as text in one column ``value``; every record is usable."""
    return raw.select(*keep, F.col("value").cast("string").alias("value"), F.lit(None).cast("string").alias(ERROR))


def _parse_json(raw: DataFrame, item: Source | Table, keep: list[Column], options: dict[str, str]) -> DataFrame:
    """One JSON object per record, read with the declared schema; ``__error`` says what is wrong."""
    text = F.col("value").cast("string")
    schema = item.schema_ or {}
    ddl = schema_ddl(schema, corrupt=True)
    value = F.from_json(text, ddl, {"columnNameOfCorruptRecord": CORRUPT})
    fast = _fast_json(raw.sparkSession, schema, ddl)
    if fast is not None:  # from_json runs only for the records the fast path does not answer
        value = F.coalesce(fast, value)
    # A projection Spark sees as nondeterministic (spark_partition_id() is; the condition is always
    # true) is one filters are not pushed below. Without it Spark moves every later filter on the
    # parsed value under this projection, substituting the from_json call for each reference, and
    # parses each record three to five times. An explode of a one-element array did the same as a
    # Generate node, outside whole-stage code generation, and was slower than this (bench/README.md,
    # "How the data-plane figures were reached").
    parsed = raw.select(*keep, F.when(F.spark_partition_id() >= 0, value).alias(PARSED))
    columns = [F.col(f"{PARSED}.`{name}`").alias(name) for name in schema]
    event_time = getattr(item, "event_time", None)
    checks = [
        (F.col(RAW_VALUE).isNull(), F.lit("null value: a stream record needs a JSON object")),
        # A null struct: empty text. A corrupt record: not one JSON object, or a field of the wrong type.
        (F.col(PARSED).isNull() | F.col(f"{PARSED}.{CORRUPT}").isNotNull(), F.lit("malformed")),
    ]
    if event_time is not None:
        checks.append((F.col(f"{PARSED}.`{event_time}`").isNull(),
                       F.lit(f"missing event time: field {event_time!r} is absent or null")))
    error = F.when(checks[0][0], checks[0][1])
    for condition, reason in checks[1:]:
        error = error.when(condition, reason)
    metadata = [c for c in parsed.columns if c != PARSED]
    return parsed.select(*metadata, *columns, error.alias(ERROR))


def _json_malformed_reason(item: Source | Table) -> Column:
    """For records flagged malformed: which fields have the wrong type, else 'malformed JSON'."""
    schema = item.schema_ or {}
    raw = F.col(RAW_VALUE).cast("string")
    wrong = [
        F.when(F.get_json_object(raw, f"$.{name}").isNotNull() & F.col(name).isNull(),
               F.concat(F.lit(f"field {name!r}: expected {type_text}, got "),
                        F.substring(F.get_json_object(raw, f"$.{name}"), 1, 200)))
        for name, type_text in schema.items()
    ]
    listed = F.concat_ws("; ", *wrong) if wrong else F.lit("")
    return F.when(listed != "", F.concat(F.lit("wrong type: "), listed)).otherwise(
        F.lit("malformed JSON: not a JSON object"))


def _avro_column(item: Source | Table, column: str, topic_column: str, part: str, declared: dict[str, str],
                 options: dict[str, str]) -> Column:
    """A struct of the declared fields and __error from a column of Avro in the Confluent wire format, read
    as the latest version of each topic's subject (``part`` 'value' or 'key') when the app starts."""
    url = options.get(REGISTRY_URL_OPTION)
    if url is None:
        raise ValueError(f"{item.name}: Avro {part}s need spec.kafka.schemaRegistry")
    registry = Registry(url, options.get(REGISTRY_USER_INFO_OPTION))
    subject, field_name = (item.subject, "schema") if part == "value" else (item.key_subject, "keySchema")
    topics = item.topic_list if isinstance(item, Source) else [item.topic]
    decoded = None
    for topic in topics:
        reader = ReaderSchema.latest(registry, subject or topic_subject(topic, part))
        missing = sorted(set(declared) - set(reader.columns()))
        if missing:
            raise ValueError(f"{item.name}.{field_name}: {', '.join(map(repr, missing))} not a field of "
                             f"{reader.subject} version {reader.version} (fields: {', '.join(reader.columns())})")
        one = avro_values(F.col(column), registry, reader, ERROR)
        decoded = one if decoded is None else F.when(F.col(topic_column) == topic, one).otherwise(decoded)
    assert decoded is not None  # a source has a topic
    return decoded


def _parse_avro(raw: DataFrame, item: Source | Table, keep: list[Column], options: dict[str, str]) -> DataFrame:
    """Avro records (compile/avro_values.py): in the Confluent wire format, read as the latest version of
    the item's subject (default: each topic's value subject) when the app starts, or plain Avro values of
    the item's avro.writerSchema; ``__error`` says why a record cannot be read."""
    schema = item.schema_ or {}
    if item.avro is None:
        return _decoded(raw, item, keep, _avro_column(item, "value", "topic", "value", schema, options))
    fixed = FixedSchema(item.avro.writer_schema, f"{item.name}.avro.writerSchema")
    fixed.check()
    missing = sorted(set(schema) - set(fixed.columns()))
    if missing:  # the admission check refuses these; a spec that skipped it stops here, not in a task
        raise ValueError(f"{item.name}.schema: {', '.join(map(repr, missing))} not a field of {fixed.where} "
                         f"(fields: {', '.join(fixed.columns())})")
    return _decoded(raw, item, keep, avro_values(F.col("value"), None, fixed, ERROR))


def _decoded(raw: DataFrame, item: Source | Table, keep: list[Column], decoded: Column) -> DataFrame:
    """The kept columns, the schema's columns of ``decoded`` (a struct of them and __error, from a
    decoder that gives each unreadable record its reason) and __error, which a null event time sets."""
    schema = item.schema_ or {}
    parsed = raw.select(*keep, decoded.alias(PARSED))
    columns = [F.col(f"{PARSED}.`{name}`").cast(type_text).alias(name) for name, type_text in schema.items()]
    error = F.col(f"{PARSED}.{ERROR}")
    event_time = getattr(item, "event_time", None)
    if event_time is not None:
        error = F.when(error.isNull() & F.col(f"{PARSED}.`{event_time}`").isNull(),
                       F.lit(f"missing event time: field {event_time!r} is null")).otherwise(error)
    metadata = [c for c in parsed.columns if c != PARSED]
    return parsed.select(*metadata, *columns, error.alias(ERROR))


def _parse_protobuf(raw: DataFrame, item: Source | Table, keep: list[Column], options: dict[str, str]) -> DataFrame:
    """Protobuf messages (compile/protobuf_values.py): in the Confluent wire format, each with the
    writer schema its id names, or plain payloads of the message of the item's descriptor set. The
    schema's columns are checked at the start against that message, or against the latest version of
    the item's subject (default: each topic's value subject); ``__error`` says why a record cannot be
    read."""
    schema = item.schema_ or {}
    described = item.protobuf
    if described is None:
        return _decoded(raw, item, keep, _protobuf_column(item, "value", "topic", "value", schema, options))
    columns = _struct_of(schema)
    messages = DescriptorSetMessages(read_descriptor_set(described.descriptor_set.config_map,
                                                         described.descriptor_set.key), described.message)
    check_columns(messages.descriptor(), columns, f"{item.name}.schema: message {described.message}")
    return _decoded(raw, item, keep, protobuf_values(F.col("value"), messages, columns, ERROR))


def _struct_of(declared: dict[str, str]):
    from pyspark.sql.types import DataType

    return DataType.fromDDL(schema_ddl(declared))


def _protobuf_column(item: Source | Table, column: str, topic_column: str, part: str, declared: dict[str, str],
                     options: dict[str, str]) -> Column:
    """A struct of the declared fields and __error from a column of Protobuf in the Confluent wire format,
    each record read with the writer schema its id names; the declared fields are checked at the start
    against the latest version of each topic's subject (``part`` 'value' or 'key')."""
    url = options.get(REGISTRY_URL_OPTION)
    if url is None:
        raise ValueError(f"{item.name}: Protobuf {part}s need spec.kafka.schemaRegistry"
                         + (" or protobuf.descriptorSet" if part == "value" else ""))
    registry = Registry(url, options.get(REGISTRY_USER_INFO_OPTION))
    subject, field_name = (item.subject, "schema") if part == "value" else (item.key_subject, "keySchema")
    columns = _struct_of(declared)
    for topic in item.topic_list if isinstance(item, Source) else [item.topic]:
        name = subject or topic_subject(topic, part)
        _check_any_message(top_level_messages(registry, name), columns, f"{item.name}.{field_name}: subject {name}")
    return protobuf_values(F.col(column), RegistryMessages(registry), columns, ERROR)


def _check_any_message(descriptors: list, columns, where: str) -> None:
    """ValueError unless the columns fit one of the messages (which one a record is, its wire format says)."""
    problems = []
    for descriptor in descriptors:
        try:
            return check_columns(descriptor, columns, f"{where} message {descriptor.full_name}")
        except ValueError as exc:
            problems.append(str(exc))
    raise ValueError("; ".join(problems) or f"{where}: the schema has no message")


@dataclass(frozen=True)
class ValueReader:
    """How the runtime reads one value format (streamapp_api.sources.VALUE_FORMATS declares it)."""

    # Kafka rows, the columns kept, the readers' options -> metadata, value columns, raw key/value and
    # __error (null when usable).
    parse: Callable[[DataFrame, Source | Table, list[Column], dict[str, str]], DataFrame]
    # For a record __error flags "malformed": the reason the dead-letter topic gets. None for a format
    # whose records cannot be malformed.
    malformed_reason: Callable[[Source | Table], Column] | None = None


# Value formats of sources and tables (spec `format`), one row per VALUE_FORMATS entry.
FORMATS: dict[str, ValueReader] = {
    "string": ValueReader(_parse_string),
    "json": ValueReader(_parse_json, _json_malformed_reason),
    # __error holds each unreadable record's own reason (avro_values.AvroDecoder.decode), never "malformed".
    "avro": ValueReader(_parse_avro, lambda item: F.col(ERROR)),
    # As for avro (protobuf_values.ProtobufDecoder.decode).
    "protobuf": ValueReader(_parse_protobuf, lambda item: F.col(ERROR)),
}


KEY_PARSED = "__parsed_key"


RegistryColumn = Callable[[Source | Table, str, str, str, dict[str, str], dict[str, str]], Column]


def _key_reader(decode: RegistryColumn) -> Callable[[DataFrame, Source | Table, dict[str, str]], DataFrame]:
    """A key format's reader, from its decoder of a column through the registry (_avro_column,
    _protobuf_column): the key's declared fields as columns and ``_key`` as their JSON, read from each
    topic's key subject as values are from the value subject. A record whose key cannot be read gets
    the reason in ``__error``, unless its value had one already."""
    def read(parsed: DataFrame, item: Source | Table, options: dict[str, str]) -> DataFrame:
        declared = item.key_columns()
        decoded = decode(item, RAW_KEY, "_topic", "key", declared, options)
        fields = [F.col(f"{KEY_PARSED}.`{name}`").cast(type_text).alias(name) for name, type_text in declared.items()]
        problem = F.when(F.col(RAW_KEY).isNull(), F.lit(f"key: none, and keyFormat {item.key_format} needs one")).otherwise(
            F.concat(F.lit("key: "), F.col(f"{KEY_PARSED}.{ERROR}")))
        with_key = parsed.withColumn(KEY_PARSED, decoded)
        ok = F.col(RAW_KEY).isNotNull() & F.col(f"{KEY_PARSED}.{ERROR}").isNull()
        key_json = F.when(ok, F.to_json(F.struct(*[F.col(f"{KEY_PARSED}.`{n}`").alias(n) for n in declared]), JSON_OPTIONS))
        columns = [c for c in parsed.columns if c not in ("_key", ERROR)]
        return with_key.select(key_json.alias("_key"), *[F.col(f"`{c}`") for c in columns if c.startswith("_")], *fields,
                               *[F.col(f"`{c}`") for c in columns if not c.startswith("_")],
                               F.coalesce(F.col(ERROR), F.when(~ok, problem)).alias(ERROR))
    return read


# Key formats of sources and tables (spec `keyFormat`), one row per KEY_FORMATS entry: None keeps the key
# as text in _key (metadata), a function reads the key after the value (parse).
KEY_READERS: dict[str, Callable[[DataFrame, Source | Table, dict[str, str]], DataFrame] | None] = {
    "string": None,
    "avro": _key_reader(_avro_column),
    "protobuf": _key_reader(_protobuf_column),
}


def bad_count_name(source: str, read: str) -> str:
    """The name of the observed metric counting one read's bad records (run.dead_letters sums a
    source's). Pure."""
    return f"{BAD_COUNT_PREFIX}{source}#{read}"


def source_frame(spark: SparkSession, source: Source, options: dict[str, str], name: str,
                 count_bad: bool = False) -> Frame:
    """The good records of a source, metadata columns first, with its watermark; ``name``: read_kafka's.
    ``count_bad``: the query reports how many records of each batch could not be used (Spark's
    observed metrics), for the dead-letter writer to read back only the batches that had some."""
    raw = read_kafka(spark, source.topic_list, options, source.starting_offsets, source.max_offsets_per_trigger,
                     name=name)
    df = parse(raw, source, options)
    if count_bad:
        df = df.observe(bad_count_name(source.name, name), F.count_if(F.col(ERROR).isNotNull()).alias("bad"))
    good = df.where(F.col(ERROR).isNull()).drop(ERROR, RAW_KEY, RAW_VALUE)
    event_time = source.event_time_column
    if source.watermark is not None:
        good = good.withWatermark(event_time, spark_interval(source.watermark))
    return Frame(good, event_time, source.watermark, source.name)


def bad_records(spark: SparkSession, source: Source, options: dict[str, str],
                max_offsets: int | None = None) -> DataFrame:
    """The records of a source that cannot be used, with the reason spelled out (a stream)."""
    raw = read_kafka(spark, source.topic_list, options, source.starting_offsets, max_offsets,
                     name=spark_source_name(source.name))  # the dead-letter query reads this source only
    return bad_of(raw, source, options)


def read_kafka_range(spark: SparkSession, options: dict[str, str], start: dict[tuple[str, int], int],
                     end: dict[tuple[str, int], int]) -> DataFrame:
    """Kafka rows from ``start`` (inclusive; -2: the earliest) to ``end`` (exclusive) per partition,
    read once as a batch. Records deleted by retention meanwhile are skipped, not an error."""
    def by_topic(offsets: dict[tuple[str, int], int]) -> str:
        nested: dict[str, dict[str, int]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            nested.setdefault(topic, {})[str(partition)] = offset
        return json.dumps(nested)

    assign = {}
    for topic, partition in sorted(end):
        assign.setdefault(topic, []).append(partition)
    return (spark.read.format("kafka").options(**{ISOLATION: "read_committed", **spark_kafka_options(options)})
            .option("assign", json.dumps(assign)).option("startingOffsets", by_topic(start))
            .option("endingOffsets", by_topic(end)).option("failOnDataLoss", "false").load())


def bad_of(raw: DataFrame, source: Source, options: dict[str, str]) -> DataFrame:
    """The Kafka rows that cannot be used, parsed as the pipeline parses them, with the reason."""
    df = parse(raw, source, options)
    bad = df.where(F.col(ERROR).isNotNull())
    explain = FORMATS[source.format].malformed_reason
    reason = F.col(ERROR) if explain is None else \
        F.when(F.col(ERROR) == "malformed", explain(source)).otherwise(F.col(ERROR))
    return bad.select(RAW_KEY, RAW_VALUE, reason.alias("reason"), "_topic", "_partition", "_offset", "_timestamp")
