"""Where records come from: the Kafka connection, sources (KStream) and tables (KTable)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from .base import (
    COLUMN_PATTERN,
    MAX_COLUMNS,
    MAX_LIST,
    ApiModel,
    Column,
    K8sName,
    Name,
    SecretRef,
    Topic,
    api_config,
    cel,
)
from .changes import RESTART, ChangeClass
from .durations import Duration

# Columns every source and table row carries besides its value columns. Names starting with '_'
# are metadata: usable in expressions, never written into sink values.
METADATA_COLUMNS = ("_key", "_timestamp", "_topic", "_partition", "_offset")
# Kafka consumer/producer options Spark manages itself and refuses when set by the user.
SPARK_MANAGED_KAFKA_OPTIONS = (
    "group.id", "auto.offset.reset", "key.deserializer", "value.deserializer",
    "key.serializer", "value.serializer", "enable.auto.commit", "interceptor.classes",
)
# What to write instead of a managed option (the ones a Kafka user reaches for first).
KAFKA_OPTION_HINTS = {
    "group.id": "each query commits its offsets to the consumer group streamapp.<namespace>.<app>.<query>, "
                "which lag tools read (docs/runtime.md)",
    "auto.offset.reset": "set startingOffsets (earliest | latest) on the source",
    "enable.auto.commit": "offsets are kept in the checkpoint and committed to the app's consumer group",
    "key.deserializer": "set the source's format", "value.deserializer": "set the source's format",
}

_PRIMITIVE_TYPES = {
    "string", "boolean", "int", "integer", "long", "bigint", "short", "smallint", "byte",
    "tinyint", "float", "real", "double", "date", "timestamp", "timestamp_ntz", "binary",
}
SCHEMA_TYPE_HELP = (
    "a Spark SQL type: string, boolean, int, long, double, float, date, timestamp, binary, "
    "decimal(p,s), array<T>, map<K,V> or struct<name:T,...>"
)
_SCHEMA_KEYS_RULE = cel(
    f"self.all(k, k.matches('{COLUMN_PATTERN}'))",
    "schema column names must be SQL identifiers: letters, digits and '_', not starting with a digit",
)
SchemaMap = dict[str, str]
BOOTSTRAP_PATTERN = r"^[A-Za-z0-9._-]+:[0-9]{1,5}(,[A-Za-z0-9._-]+:[0-9]{1,5})*$"


def _schema_field(description: str, alias: str = "schema") -> Any:
    return Field(
        default=None,
        alias=alias,
        description=description,
        max_length=MAX_COLUMNS,
        json_schema_extra={
            "x-kubernetes-validations": [_SCHEMA_KEYS_RULE],
            "additionalProperties": {"type": "string", "maxLength": 1024},
        },
    )


# Spark SQL's other names of one type, as a spec may write them.
_SAME_TYPE = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint", "real": "float"}


def canonical_spark_type(type_text: str) -> str:
    """One name per Spark SQL type ('long' and 'BIGINT' are 'bigint'), spaces and backticks dropped. Pure."""
    text = "".join(type_text.lower().split()).replace("`", "")
    return _SAME_TYPE.get(text, text)


class SparkTypeError(ValueError):
    pass


def parse_spark_type(text: str) -> str:
    """Check a Spark SQL type string; return it normalised (lowercase) or raise SparkTypeError."""
    tokens = re.findall(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[<>(),:]|\S", text)
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take(expected: str | None = None) -> str:
        nonlocal pos
        token = peek()
        if token is None or (expected is not None and token.lower() != expected):
            raise SparkTypeError(f"expected {expected or 'a type'} at {token or 'the end'!r}")
        pos += 1
        return token

    def parse() -> str:
        word = take().lower()
        if word in _PRIMITIVE_TYPES:
            return word
        if word == "decimal":
            if peek() == "(":
                take("(")
                precision = take()
                take(",")
                scale = take()
                take(")")
                if not (precision.isdigit() and scale.isdigit()):
                    raise SparkTypeError("decimal needs decimal(precision,scale)")
                return f"decimal({precision},{scale})"
            return "decimal"
        if word == "array":
            take("<")
            inner = parse()
            take(">")
            return f"array<{inner}>"
        if word == "map":
            take("<")
            key = parse()
            take(",")
            value = parse()
            take(">")
            return f"map<{key},{value}>"
        if word == "struct":
            take("<")
            fields = []
            while True:
                name = take()
                if not re.match(COLUMN_PATTERN, name):
                    raise SparkTypeError(f"{name!r} is not a field name")
                take(":")
                fields.append(f"{name}:{parse()}")
                if peek() == ",":
                    take(",")
                    continue
                take(">")
                return f"struct<{','.join(fields)}>"
        raise SparkTypeError(f"unknown type {word!r}")

    result = parse()
    if peek() is not None:
        raise SparkTypeError(f"unexpected {peek()!r} after the type")
    return result


class SchemaRegistry(ApiModel):
    """A schema registry of the Confluent REST API: where sources and tables of format avro or protobuf
    find the schema of each record by the id it carries (subjects by TopicNameStrategy: <topic>-value)."""

    url: str = Field(
        description="The registry's base URL, e.g. 'http://schema-registry:8081'.",
        pattern=r"^https?://[^\s/]+(/\S*)?$",
        max_length=1024,
    )
    secret_ref: SecretRef | None = Field(
        default=None,
        description="A Secret whose key 'basic.auth.user.info' ('user:password') the runtime sends as "
        "HTTP Basic credentials. Unset: the registry asks for none.",
    )


class Kafka(ApiModel):
    """How to reach the Kafka cluster all sources, tables and Kafka sinks use."""

    bootstrap_servers: str = Field(
        description="Comma-separated host:port list of Kafka brokers, e.g. 'kafka:9092'.",
        pattern=BOOTSTRAP_PATTERN,
        max_length=1024,
    )
    options: dict[str, str] | None = Field(
        default=None,
        max_length=64,
        description="Extra Kafka client options (e.g. 'security.protocol: SASL_SSL'), passed to "
        "consumers and producers. Options Spark manages (group.id, auto.offset.reset, "
        "(de)serializers, enable.auto.commit, interceptor.classes) are refused. Readers default to "
        "isolation.level read_committed and, outside real-time mode, fetch.max.wait.ms 50; set "
        "either here to override it.",
    )
    secret_ref: SecretRef | None = Field(
        default=None,
        description="A Secret whose keys are Kafka client options (e.g. 'sasl.jaas.config'); "
        "merged over options, kept out of the spec so credentials stay secret.",
    )
    schema_registry: SchemaRegistry | None = Field(
        default=None,
        description="The schema registry sources and tables of format avro or protobuf read schemas from. "
        "Required when one has format avro without avro.writerSchema, or format protobuf without "
        "protobuf.descriptorSet.",
    )


_ONE_TOPIC = cel(
    "has(self.topic) != has(self.topics)",
    "set exactly one of topic or topics",
    field_path=".topic",
)
@dataclass(frozen=True)
class ValueFormatKind:
    """What a value format declares; the checks, the operator and the runtime ask this, never its name.

    A new format: a row in VALUE_FORMATS and ValueFormat here, and a parse function in the runtime's
    ``compile/sources.FORMATS`` (DEVELOPMENT.md, "Adding things").
    """

    # The value's columns come from the spec's schema (True), or are always ``columns`` (False).
    needs_schema: bool
    # A record can fail to decode: such records go to the dead-letter topic, counted.
    can_be_malformed: bool
    columns: dict[str, str] = field(default_factory=dict)
    # Records name their schema by an id the app's schema registry (spec.kafka.schemaRegistry) knows.
    needs_registry: bool = False
    # The registry's type of the schemas this format reads ("AVRO"): the columns a registered schema gives
    # come from registry_columns.COLUMNS_OF by it (when reads_registry). None: the format reads no registry.
    registry_type: str | None = None
    # The source's or table's field of this format's own settings (its name in the spec), valid with
    # this format only; set, it describes the records itself and no registry is needed.
    options_field: str | None = None
    # Records are decoded in Python workers (a pandas UDF), which Spark's real-time mode does not run.
    decoded_in_python: bool = False

    def schema_problem(self, name: str, has_schema: bool) -> str | None:
        """Why the schema may not be (un)set for this format, or None."""
        if self.needs_schema and not has_schema:
            return f"format {name} needs a schema (column name -> Spark SQL type)"
        if not self.needs_schema and has_schema:
            listed = ", ".join(repr(c) for c in self.columns)
            what = f"the single column {listed}" if len(self.columns) == 1 else f"the columns {listed}"
            return f"format {name} has {what}; remove schema"
        return None

    def value_columns(self, schema: dict[str, str] | None) -> dict[str, str]:
        """Column name -> Spark SQL type of a record's value."""
        return dict(schema or {}) if self.needs_schema else dict(self.columns)

    def options_of(self, item: Any) -> Any:
        """A source's or table's settings of this format (its options_field), or None."""
        return getattr(item, self.options_field) if self.options_field is not None else None

    def reads_registry(self, item: Any) -> bool:
        """Whether a source's or table's records are read through the registry: a format needing one
        whose own settings do not describe the records."""
        return self.needs_registry and self.options_of(item) is None


# How record values are read, for sources and tables alike.
ValueFormat = Literal["json", "string", "avro", "protobuf"]
VALUE_FORMATS: dict[str, ValueFormatKind] = {
    "json": ValueFormatKind(needs_schema=True, can_be_malformed=True),
    # The schema names the columns read of the subject's Avro record (its latest version at start), or,
    # with `avro`, of the one writer schema of plain Avro values.
    "avro": ValueFormatKind(needs_schema=True, can_be_malformed=True, needs_registry=True, registry_type="AVRO",
                            options_field="avro", decoded_in_python=True),
    # The schema names the fields read of each record's message: the one its wire format names in the
    # registry's schema, or, with `protobuf`, the one message of a descriptor set (plain payloads).
    "protobuf": ValueFormatKind(needs_schema=True, can_be_malformed=True, needs_registry=True,
                                registry_type="PROTOBUF", options_field="protobuf", decoded_in_python=True),
    "string": ValueFormatKind(needs_schema=False, can_be_malformed=False, columns={"value": "string"}),
}


def _schema_rule(name: str, kind: ValueFormatKind) -> dict[str, Any]:
    if kind.needs_schema:
        return cel(f"self.format != '{name}' || has(self.schema)", kind.schema_problem(name, False) or "",
                   field_path=".schema", reason="FieldValueRequired")
    return cel(f"self.format != '{name}' || !has(self.schema)", kind.schema_problem(name, True) or "",
               field_path=".schema")


_SCHEMA_RULES = [_schema_rule(name, kind) for name, kind in VALUE_FORMATS.items()]
_REGISTRY_FORMATS = [name for name, kind in VALUE_FORMATS.items() if kind.needs_registry]
SUBJECT_NEEDS_A_REGISTRY_FORMAT = f"subject names the registry's subject of formats {', '.join(_REGISTRY_FORMATS)}; " \
    "remove it, or set one of those formats"
_SUBJECT_RULE = cel(
    "!has(self.subject) || (has(self.format) && self.format in [" + ", ".join(f"'{n}'" for n in _REGISTRY_FORMATS) + "])",
    SUBJECT_NEEDS_A_REGISTRY_FORMAT, field_path=".subject")




def _options_rules(name: str, kind: ValueFormatKind) -> list[dict[str, Any]]:
    """A format's own settings are valid with that format only, and without a subject when they
    replace the registry."""
    if kind.options_field is None:
        return []
    key = kind.options_field
    return [
        cel(f"!has(self.{key}) || (has(self.format) && self.format == '{name}')",
            options_need_their_format(name, key), field_path=f".{key}"),
        cel(f"!has(self.{key}) || !has(self.subject)", subject_without_a_registry(key), field_path=".subject"),
    ]


def options_need_their_format(name: str, key: str) -> str:
    return f"{key} describes records of format {name}: remove it, or set format {name}"


def subject_without_a_registry(key: str) -> str:
    return f"records described by {key} are read without a registry: remove subject"


def reads_registry_cel(item: str) -> str:
    """CEL: the source or table ``item`` reads its records through the registry (the twin of
    ValueFormatKind.reads_registry)."""
    cases = [f"{item}.format == '{name}'" + (f" && !has({item}.{kind.options_field})" if kind.options_field else "")
             for name, kind in VALUE_FORMATS.items() if kind.needs_registry]
    return f"(has({item}.format) && (" + " || ".join(f"({c})" for c in cases) + "))"


_OPTIONS_RULES = [rule for name, kind in VALUE_FORMATS.items() for rule in _options_rules(name, kind)]


def _subject_field() -> Any:
    return Field(
        default=None, min_length=1, max_length=255,
        description="For formats avro and protobuf: the registry subject whose latest version, when the app "
        "starts, the schema's columns are checked against. Default '<topic>-value' (TopicNameStrategy, "
        "the serializers' default); the record's full name under RecordNameStrategy, "
        "'<topic>-<full name>' under TopicRecordNameStrategy.",
    )


# Not base.MODULE_PATTERN, though the same names match: a pattern has one help text (errors.py).
PROTOBUF_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*([.][A-Za-z_][A-Za-z0-9_]*)*$"
PROTOBUF_NAME_HELP = "a Protobuf message's full name: its package, a dot and its name, e.g. shop.v1.Order"
CONFIG_MAP_KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"
CONFIG_MAP_KEY_HELP = "a ConfigMap key: letters, digits, '-', '_' and '.'"


class ConfigMapKey(ApiModel):
    """A key of a ConfigMap in the StreamApp's namespace."""

    config_map: K8sName = Field(description="Name of the ConfigMap.")
    key: str = Field(pattern=CONFIG_MAP_KEY_PATTERN, max_length=253, description="The key holding the file.")


class ProtobufDescriptors(ApiModel):
    """Protobuf records without a schema registry: each value is a plain protobuf payload (no wire-format
    header) of one message type, described by a descriptor set."""

    message: str = Field(
        pattern=PROTOBUF_NAME_PATTERN, max_length=512,
        description="The full name of the records' message type, e.g. 'shop.v1.Order'.",
    )
    descriptor_set: ConfigMapKey = Field(
        description="The ConfigMap key holding a FileDescriptorSet with the message and everything it "
        "imports: the output of 'protoc --include_imports --descriptor_set_out=FILE', stored with "
        "'kubectl create configmap NAME --from-file=KEY=FILE' (binary data). Read once when the app starts."
    )


# Characters of an Avro writer schema's JSON: room for records of a few hundred fields, far below what
# takes the admission check long to read (limits.py lets this field, and SQL, be longer than other text).
MAX_WRITER_SCHEMA = 64 * 1024


class AvroWriterSchema(ApiModel):
    """Avro records without a schema registry: each value is plain Avro binary of one writer schema, with
    no header (as Flink's avro format and fixed-schema producers write them)."""

    writer_schema: str = Field(
        min_length=1, max_length=MAX_WRITER_SCHEMA,
        description="The Avro schema (JSON) of an Avro record every value is written with, e.g. "
        "'{\"type\": \"record\", \"name\": \"Click\", \"fields\": [{\"name\": \"user\", \"type\": \"string\"}]}'. "
        "Each column of schema must be a field of it. At most 64 KiB; it may span lines.",
    )


def _avro_field() -> Any:
    return Field(default=None, description="For format avro: read plain Avro values of one writer schema, "
                 "with no header, instead of the Confluent wire format through spec.kafka.schemaRegistry. A "
                 "value that does not decode with it goes to the dead-letter topic with the reason.")


def _protobuf_field() -> Any:
    return Field(default=None, description="For format protobuf: read plain protobuf payloads of one message "
                 "type described by a descriptor set, instead of the Confluent wire format through "
                 "spec.kafka.schemaRegistry.")


@dataclass(frozen=True)
class KeyFormatKind:
    """How record keys are read (``keyFormat``); the checks and the runtime ask this, never its name.

    A new key format: a row in KEY_FORMATS and KeyFormat here, and a reader in the runtime's
    ``compile/sources.KEY_READERS``."""

    # The key's fields become columns, declared in keySchema (True); or the key is only _key (False).
    needs_schema: bool
    # The registry's type of the key schemas this format reads (ValueFormatKind.registry_type); None: none.
    registry_type: str | None = None
    # Keys are decoded in Python workers (ValueFormatKind.decoded_in_python).
    decoded_in_python: bool = False


# How record keys are read: 'string' keeps the key's bytes as text in _key (as Kafka Streams' string
# serde); 'avro' and 'protobuf' decode a key in the Confluent wire format through the registry.
KeyFormat = Literal["string", "avro", "protobuf"]
KEY_FORMATS: dict[str, KeyFormatKind] = {
    "string": KeyFormatKind(needs_schema=False),
    "avro": KeyFormatKind(needs_schema=True, registry_type="AVRO", decoded_in_python=True),
    "protobuf": KeyFormatKind(needs_schema=True, registry_type="PROTOBUF", decoded_in_python=True),
}


def _names(names: list[str] | tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{n}'" for n in names) + "]"


_KEY_SCHEMA_FORMATS = [name for name, kind in KEY_FORMATS.items() if kind.needs_schema]
_KEY_REGISTRY_FORMATS = [name for name, kind in KEY_FORMATS.items() if kind.registry_type]
KEY_SCHEMA_NEEDED = "keyFormat {} needs keySchema: the key's fields, column name -> Spark SQL type"
KEY_SCHEMA_UNUSED = f"keySchema declares the key's fields of keyFormat {', '.join(_KEY_SCHEMA_FORMATS)}; " \
    "remove it, or set one of those key formats"
KEY_SUBJECT_UNUSED = f"keySubject names the registry's subject of keyFormat {', '.join(_KEY_REGISTRY_FORMATS)}; " \
    "remove it, or set one of those key formats"
KEY_COLUMN_TAKEN = "a keySchema column may not also be a schema column or a metadata column " \
    f"({', '.join(METADATA_COLUMNS)}): each column of a record has one name"
_KEY_RULES = [
    *[cel(f"!has(self.keyFormat) || self.keyFormat != '{name}' || has(self.keySchema)",
          KEY_SCHEMA_NEEDED.format(name), field_path=".keySchema", reason="FieldValueRequired")
      for name in _KEY_SCHEMA_FORMATS],
    cel(f"!has(self.keySchema) || (has(self.keyFormat) && self.keyFormat in {_names(_KEY_SCHEMA_FORMATS)})",
        KEY_SCHEMA_UNUSED, field_path=".keySchema"),
    cel(f"!has(self.keySubject) || (has(self.keyFormat) && self.keyFormat in {_names(_KEY_REGISTRY_FORMATS)})",
        KEY_SUBJECT_UNUSED, field_path=".keySubject"),
    cel(f"!has(self.keySchema) || self.keySchema.all(k, !(k in {_names(METADATA_COLUMNS)}) "
        "&& (!has(self.schema) || !(k in self.schema)))", KEY_COLUMN_TAKEN, field_path=".keySchema"),
]


def _key_fields() -> dict[str, Any]:
    """The key format fields sources and tables share (their annotations are in each model)."""
    return {
        "format": Field(
            default="string",
            description="How record keys are read: 'string' keeps the key as text in _key; 'avro' reads Avro "
            "record keys, 'protobuf' Protobuf message keys, in the Confluent wire format through "
            "spec.kafka.schemaRegistry, checked against the latest version of the subject <topic>-key when "
            "the app starts: the fields keySchema declares become columns, and _key holds the key as JSON. "
            "A record whose key cannot be read goes to the dead-letter topic with the reason.",
        ),
        "schema": _schema_field("For keyFormat avro or protobuf: fields of the key's Avro record or Protobuf "
                                "message, column name -> Spark SQL type (checked against the registry at "
                                "start). Names other than the schema's and the metadata columns'.",
                                alias="keySchema"),
        "subject": Field(
            default=None, min_length=1, max_length=255,
            description="For keyFormat avro or protobuf: the registry subject of the keys. Default '<topic>-key' "
            "(TopicNameStrategy).",
        ),
    }


def record_columns(value_format: str, schema: dict[str, str] | None,
                   key_schema: dict[str, str] | None = None) -> set[str]:
    """The columns every row of a source or table has: the metadata, the key's fields, then the value's."""
    return set(METADATA_COLUMNS) | set(key_schema or {}) | set(VALUE_FORMATS[value_format].value_columns(schema))


class _ReadsRecords:
    """What sources and tables share about reading their records; each model declares the fields (not
    declared here at run time: pydantic would take them for fields of its own, first in the schema)."""

    if TYPE_CHECKING:
        format: str
        schema_: SchemaMap | None
        key_format: str
        key_schema: SchemaMap | None

    @property
    def value_format(self) -> ValueFormatKind:
        return VALUE_FORMATS[self.format]

    @property
    def key_format_kind(self) -> KeyFormatKind:
        return KEY_FORMATS[self.key_format]

    def key_columns(self) -> dict[str, str]:
        """Column name -> Spark SQL type of the key's fields (none for a key read as text)."""
        return dict(self.key_schema or {}) if self.key_format_kind.needs_schema else {}

    @property
    def reads_registry(self) -> bool:
        """Records are read through spec.kafka.schemaRegistry."""
        return self.value_format.reads_registry(self)

    def columns(self) -> set[str]:
        return record_columns(self.format, self.schema_, self.key_columns())


# What a source's checkpoint state is made of: a change to it leaves that state unusable.
_SOURCE_STATE = ChangeClass("incompatible", "the checkpoint records offsets per topic and state per event time")


class Source(_ReadsRecords, ApiModel):
    """A stream of records read from Kafka (Kafka Streams: KStream). Every record is an event."""

    model_config = api_config(_ONE_TOPIC, *_SCHEMA_RULES, _SUBJECT_RULE, *_KEY_RULES, *_OPTIONS_RULES)

    name: Name = Field(description="Name other streams and sinks use to read this source.")
    topic: Annotated[Topic | None, _SOURCE_STATE] = Field(
        default=None, description="The Kafka topic to read. Exclusive with topics."
    )
    topics: Annotated[list[Topic] | None, _SOURCE_STATE] = Field(
        default=None,
        min_length=1,
        max_length=MAX_LIST,
        description="Several Kafka topics read as one stream. Exclusive with topic.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    format: Annotated[ValueFormat, RESTART] = Field(
        default="json",
        description="How record values are read: 'json' parses a JSON object into the schema's "
        "columns; 'string' gives one string column named 'value'; 'avro' reads Avro records in the "
        "Confluent wire format through spec.kafka.schemaRegistry, each with its writer schema, as the "
        "latest version of the subject <topic>-value when the app starts, into the schema's columns; "
        "'protobuf' reads Protobuf messages in the Confluent wire format through "
        "spec.kafka.schemaRegistry, each with its writer schema, or plain payloads described by "
        "protobuf.descriptorSet, into the schema's columns (fields by name).",
    )
    schema_: Annotated[SchemaMap | None, RESTART] = _schema_field(
        "Columns of a JSON value: column name -> Spark SQL type (string, long, double, boolean, "
        "timestamp, array<...>, struct<...>). Required for format json; for format avro, fields of "
        "the Avro record with their Spark SQL types (checked against the registry at start, "
        "or against avro.writerSchema); for "
        "format protobuf, fields of the message (a message is a struct, a repeated field an array, "
        "google.protobuf.Timestamp a timestamp, an enum a string). Every "
        "row also carries the metadata columns _key, _timestamp, _topic, _partition and _offset."
    )
    subject: Annotated[str | None, RESTART] = _subject_field()
    key_format: Annotated[KeyFormat, RESTART] = _key_fields()["format"]
    key_schema: Annotated[SchemaMap | None, RESTART] = _key_fields()["schema"]
    key_subject: Annotated[str | None, RESTART] = _key_fields()["subject"]
    avro: Annotated[AvroWriterSchema | None, RESTART] = _avro_field()
    protobuf: Annotated[ProtobufDescriptors | None, RESTART] = _protobuf_field()
    event_time: Annotated[Column | None, _SOURCE_STATE] = Field(
        default=None,
        description="Column holding the event time (type timestamp). Windows, watermarks and "
        "stream joins use it. Default: the Kafka record timestamp (_timestamp).",
    )
    watermark: Annotated[Duration | None, RESTART] = Field(
        default=None,
        description="How late an event may arrive (relative to the newest event time seen) and still "
        "count. Required for emit: final on windowed aggregations, for stream-stream joins and "
        "for dedupe. Unset: no lateness bound and no event-time state cleanup.",
    )
    starting_offsets: Annotated[Literal["earliest", "latest"], RESTART] = Field(
        default="earliest",
        description="Where a new application starts reading: earliest (the whole topic) or latest "
        "(only new records). Ignored once a checkpoint exists.",
    )
    max_offsets_per_trigger: Annotated[int | None, RESTART] = Field(
        default=None,
        ge=1,
        description="Upper bound on records read per micro-batch across all partitions (rate limit). "
        "Default: no bound.",
    )

    @property
    def topic_list(self) -> list[str]:
        return [self.topic] if self.topic else list(self.topics or [])

    @property
    def event_time_column(self) -> str:
        return self.event_time or "_timestamp"


# What a table's join state is keyed by: a change to it leaves that state unusable.
_TABLE_STATE = ChangeClass("incompatible", "the join state is keyed by the table's topic and key")
# A ttl needs a processing-time clock in the join's state operator, which the checkpoint fixes: Spark
# refuses to restore the state when one is set or removed (compile/steps/keyed_state.py).
_TTL = ChangeClass("restart", set_or_unset=ChangeClass(
    "incompatible", "setting or removing a ttl changes the join state's timeout, which the checkpoint fixes"))


class Table(_ReadsRecords, ApiModel):
    """A changelog topic read as a table (Kafka Streams: KTable): the latest value per key.

    A record with a null value (tombstone) deletes its key. Tables are always read from the
    beginning of the topic so the table is complete; streams look rows up in it with a join step.
    """

    model_config = api_config(*_SCHEMA_RULES, _SUBJECT_RULE, *_KEY_RULES, *_OPTIONS_RULES)

    name: Name = Field(description="Name join steps use to look rows up in this table.")
    topic: Annotated[Topic, _TABLE_STATE] = Field(
        description="The Kafka topic holding the changelog (ideally compacted)."
    )
    key: Annotated[Column, _TABLE_STATE] = Field(
        default="_key",
        description="Column holding the table's primary key. Default: the Kafka record key (_key).",
    )
    format: Annotated[ValueFormat, RESTART] = Field(
        default="json",
        description="How record values are read: 'json' (schema required), 'string' (one column "
        "'value'), 'avro' or 'protobuf' (schema required; as for sources).",
    )
    schema_: Annotated[SchemaMap | None, RESTART] = _schema_field(
        "Columns of a JSON value, or fields of an Avro record or Protobuf message: column name -> "
        "Spark SQL type. Required for formats json, avro and protobuf."
    )
    subject: Annotated[str | None, RESTART] = _subject_field()
    key_format: Annotated[KeyFormat, _TABLE_STATE] = _key_fields()["format"]
    key_schema: Annotated[SchemaMap | None, _TABLE_STATE] = _key_fields()["schema"]
    key_subject: Annotated[str | None, RESTART] = _key_fields()["subject"]
    avro: Annotated[AvroWriterSchema | None, RESTART] = _avro_field()
    protobuf: Annotated[ProtobufDescriptors | None, RESTART] = _protobuf_field()
    ttl: Annotated[Duration | None, _TTL] = Field(
        default=None,
        description="Forget keys not updated for this long (bounds state size). Default: keep forever.",
    )

    def value_columns(self) -> set[str]:
        """The columns a join brings into the stream (metadata and the key stay behind)."""
        return {c for c in self.columns() if not c.startswith("_") and c != self.key}
