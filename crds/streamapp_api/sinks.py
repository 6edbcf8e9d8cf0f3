"""Where results go: Kafka topics, Postgres tables, Parquet and Delta Lake tables. Each sink is one
streaming query.

Each sink kind is a ``SinkTarget`` model and a field of ``Sink`` named after the kind; it declares what
the checks, the operator and the runtime ask of it (its target's name, the Secrets the driver needs,
the columns it reads, real-time and delivery support). Nothing else branches on a kind's name: a new
sink is a model here, a field of ``Sink``, and a writer in the runtime's ``sinks.WRITERS``
(DEVELOPMENT.md, "Adding things").
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from .base import ApiModel, Column, Name, SecretRef, Topic, api_config, cel
from .changes import ChangeClass
from .contract import postgres_uri_env

# How a Kafka sink writes: Spark's own sink (a batch replayed after a crash is written again), or one
# Kafka transaction per batch partition with a marker of the batch (docs/runtime.md, "Sinks and delivery").
Delivery = Literal["at-least-once", "exactly-once"]
DELIVERY_DESCRIPTION = (
    "at-least-once: a micro-batch replayed after a crash is written again. exactly-once: each batch "
    "partition is written in one Kafka transaction together with a marker of the batch, so a replay "
    "writes nothing twice and readers with isolation.level=read_committed see every row once; "
    "costs a transaction per partition and batch (README, benchmark figures).")

_PG_IDENT = r"^[a-z_][a-z0-9_]{0,62}(\.[a-z_][a-z0-9_]{0,62})?$"

# A table's path: s3a://bucket/path, or a path relative to the app's own storage (its checkpoint volume,
# or its object-store location), where the runtime puts it under tables/. Canonical by its pattern:
# segments of ASCII letters, digits, '.', '_', '-', '=', '+', none starting with '.' (so no '.', '..' or
# hidden folder), no empty segment, no %-encoding, no absolute path and no other scheme; the policy
# (policy.places.table_refusal) decides which s3a:// locations a cluster allows.
_TABLE_SEGMENT = r"[A-Za-z0-9_=+-][A-Za-z0-9._=+-]{0,127}"
TABLE_PATH_PATTERN = rf"^(s3a://[a-z0-9][a-z0-9.-]{{1,61}}[a-z0-9]|{_TABLE_SEGMENT})(/{_TABLE_SEGMENT})*$"
TABLES_FOLDER = "tables"  # under the app's own storage: where a relative table path is
TABLE_PATH_DESCRIPTION = (
    "Where the table is: s3a://bucket/path (on the object store the app's state.checkpoint.s3 reaches; "
    "the operator policy 'tables.locations' may confine it), or a relative path such as clicks/daily, kept "
    "under the app's own storage (tables/<path> beside its checkpoints: on its volume, or under its "
    "object-store location). Path segments: ASCII letters, digits, '.', '_', '-', '=', '+', none starting "
    "with '.'.")
_FILE_SINK_APPEND = (
    "appends each row once and never changes it: the stream must emit final rows (emit: final on a "
    "windowed aggregation, or no aggregation)")


@dataclass(frozen=True)
class SecretEnv:
    """A Secret key the driver receives as an environment variable (a connection URI, say)."""

    field: str  # the field naming the Secret, relative to the sink kind's field (".secretRef")
    secret: str
    key: str
    env: str  # the variable's name: one per Secret, so two keys of one Secret would collide


@dataclass(frozen=True)
class SinkFinding:
    """What a sink kind finds wrong with itself: field relative to the kind's field, message, severity."""

    field: str
    message: str
    severity: Literal["error", "warning"] = "error"


class SinkTarget(ApiModel):
    """What every sink kind declares. The defaults are those of a kind with nothing to say."""

    # Why a real-time app may not write to this kind (None: it may).
    realtime_refused: ClassVar[str | None] = None

    def target_name(self) -> str:
        """The topic, table or path written to: the default query name is '<from>-<target name>'."""
        raise NotImplementedError

    def topic_written(self) -> str | None:
        """The Kafka topic this sink produces to, if any (checked against inputs and the policy)."""
        return None

    def secret_env(self) -> list[SecretEnv]:
        return []

    def stream_findings(self, columns: Collection[str], group_columns: Collection[str] | None,
                        missing: Callable[[str], str]) -> list[SinkFinding]:
        """Problems with the stream written: ``columns`` its columns, ``group_columns`` what an
        aggregation groups by (None: not aggregated), ``missing(column)`` the message for an absent one."""
        return []

    def realtime_findings(self) -> list[SinkFinding]:
        return [SinkFinding("", self.realtime_refused)] if self.realtime_refused else []

    def rule_findings(self) -> list[SinkFinding]:
        """The Python twins of the kind's own CEL rules (rules.check_objects runs them)."""
        return []

    def emit_findings(self, emit: str) -> list[SinkFinding]:
        """Problems with the query's emit mode ('final': append, 'updates': update) for this kind."""
        return []

    def table_path(self) -> str | None:
        """The path of the table written (s3a://, or relative to the app's storage), for a kind writing files."""
        return None

    def registry_fields(self) -> list[str]:
        """The fields (relative to the kind's) whose format reaches spec.kafka.schemaRegistry: the sink
        needs one."""
        return []


@dataclass(frozen=True)
class SinkFormatKind:
    """What a Kafka sink's value or key format declares; the checks and the runtime ask this, never its
    name.

    A new format: a row in SINK_VALUE_FORMATS and SinkValueFormat (or the key's) here, and an encoder in
    the runtime's ``sinks/kafka_values.VALUE_ENCODERS`` (or KEY_ENCODERS; DEVELOPMENT.md, "Adding things")."""

    # The schema is registered in (or looked up from) spec.kafka.schemaRegistry under a subject, and
    # every value (or key) carries its id (the Confluent wire format).
    needs_registry: bool = False
    # Why a real-time app may not write this format (None: it may).
    realtime_refused: str | None = None


# Spark's real-time mode refuses the Python UDF (ArrowEvalPythonExec) that encodes Avro and Protobuf.
def _encoded_in_python(name: str) -> SinkFormatKind:
    return SinkFormatKind(needs_registry=True, realtime_refused=(
        f"{name} is encoded in Python, which Spark's real-time mode does not run; use format json and keyFormat "
        "string, "))


_AVRO, _PROTOBUF = _encoded_in_python("avro"), _encoded_in_python("protobuf")
# How a Kafka sink writes record values, and keys. Kept apart from the sources' VALUE_FORMATS: a format
# may be read and not written, or the other way round.
SinkValueFormat = Literal["json", "avro", "protobuf"]
SINK_VALUE_FORMATS: dict[str, SinkFormatKind] = {"json": SinkFormatKind(), "avro": _AVRO, "protobuf": _PROTOBUF}
SinkKeyFormat = Literal["string", "avro", "protobuf"]
SINK_KEY_FORMATS: dict[str, SinkFormatKind] = {"string": SinkFormatKind(), "avro": _AVRO, "protobuf": _PROTOBUF}


def _registry_formats(formats: dict[str, SinkFormatKind]) -> list[str]:
    return [name for name, kind in formats.items() if kind.needs_registry]


def _cel_list(names: list[str]) -> str:
    return "[" + ", ".join(f"'{name}'" for name in names) + "]"


_VALUE_REGISTRY, _KEY_REGISTRY = _registry_formats(SINK_VALUE_FORMATS), _registry_formats(SINK_KEY_FORMATS)
_VALUE_REGISTRY_LIST, _KEY_REGISTRY_LIST = _cel_list(_VALUE_REGISTRY), _cel_list(_KEY_REGISTRY)
SINK_SUBJECT_RULE_MESSAGE = (f"subject names the registry subject of formats {', '.join(_VALUE_REGISTRY)}; "
                             "remove it, or set one of those formats")
SINK_FORMAT_NEEDS_A_REGISTRY = (f"a Kafka sink of format {' or '.join(_VALUE_REGISTRY)} or keyFormat "
                                f"{' or '.join(_KEY_REGISTRY)} registers its schema in a schema registry: set "
                                "spec.kafka.schemaRegistry")
# On the spec (StreamAppSpec), where spec.kafka is in sight; rules.check_settings is its Python twin.
SINKS_NEED_A_REGISTRY = cel(
    f"has(self.kafka.schemaRegistry) || self.sinks.all(s, !has(s.kafka) || "
    f"((!has(s.kafka.format) || !(s.kafka.format in {_VALUE_REGISTRY_LIST})) && "
    f"(!has(s.kafka.keyFormat) || !(s.kafka.keyFormat in {_KEY_REGISTRY_LIST}))))",
    SINK_FORMAT_NEEDS_A_REGISTRY, field_path=".sinks")


class KafkaSink(SinkTarget):
    """Write each row to a topic: a JSON object of its value columns, or an Avro or Protobuf message (format)."""

    model_config = api_config(cel(
        f"!has(self.subject) || (has(self.format) && self.format in {_VALUE_REGISTRY_LIST})",
        SINK_SUBJECT_RULE_MESSAGE, field_path=".subject"))

    topic: Topic = Field(description="The Kafka topic to write to.")
    key: Column | None = Field(
        default=None,
        description="Column written as the message key. Default: the record key (_key) when the "
        "stream has one, else no key.",
    )
    delivery: Delivery = Field(default="at-least-once", description=DELIVERY_DESCRIPTION)
    format: SinkValueFormat = Field(
        default="json",
        description="How values are written: 'json', a JSON object of the value columns (timestamps ISO-8601 "
        "UTC); 'avro', an Avro record of the value columns in the Confluent wire format (a zero byte, the "
        "schema id, the record); 'protobuf', a proto3 message of the value columns in the Confluent wire "
        "format (a zero byte, the schema id, a zero byte for the first message, the message). The schema is "
        "derived from the stream's columns and registered under subject in spec.kafka.schemaRegistry when "
        "the app starts.",
    )
    subject: str | None = Field(
        default=None, min_length=1, max_length=255,
        description="For format avro or protobuf: the registry subject of the value schema. Default "
        "'<topic>-value' "
        "(TopicNameStrategy, the serializers' default).",
    )
    key_format: SinkKeyFormat = Field(
        default="string",
        description="How keys are written: 'string', the key column as text; 'avro', the key column as Avro "
        "in the Confluent wire format (a struct column a record); 'protobuf', a message of the key column in "
        "the Confluent wire format (a struct column's fields, or one field named after the column). The schema "
        "is registered under the subject '<topic>-key' in spec.kafka.schemaRegistry when the app starts. A "
        "null key is written as no key.",
    )
    register_schema: bool = Field(
        default=True,
        description="For format or keyFormat avro or protobuf: register the schema under its subject when the app starts "
        "(the registry gives the id of an equal schema already there, and refuses one its compatibility "
        "rules do not allow). false: only look it up; the app does not start unless the subject holds "
        "exactly that schema (as the serializers' auto.register.schemas=false).",
    )

    def target_name(self) -> str:
        return self.topic

    def topic_written(self) -> str | None:
        return self.topic

    @property
    def value_format(self) -> SinkFormatKind:
        return SINK_VALUE_FORMATS[self.format]

    @property
    def key_format_kind(self) -> SinkFormatKind:
        return SINK_KEY_FORMATS[self.key_format]

    def value_subject(self) -> str:
        """The registry subject of the value schema (formats that need a registry)."""
        return self.subject or f"{self.topic}-value"

    def key_subject(self) -> str:
        """The registry subject of the key schema: TopicNameStrategy's."""
        return f"{self.topic}-key"

    def registry_fields(self) -> list[str]:
        return [field for field, kind in ((".format", self.value_format), (".keyFormat", self.key_format_kind))
                if kind.needs_registry]

    def rule_findings(self) -> list[SinkFinding]:
        if self.subject is not None and not self.value_format.needs_registry:
            return [SinkFinding(".subject", SINK_SUBJECT_RULE_MESSAGE)]
        return []

    def stream_findings(self, columns: Collection[str], group_columns: Collection[str] | None,
                        missing: Callable[[str], str]) -> list[SinkFinding]:
        return [SinkFinding(".key", missing(self.key))] if self.key and self.key not in columns else []

    def realtime_findings(self) -> list[SinkFinding]:
        found = []
        if self.delivery == "exactly-once":
            found.append(SinkFinding(".delivery", "exactly-once commits a Kafka transaction per micro-batch, and "
                                     "real-time mode has none; use at-least-once, "))
        for field, kind in ((".format", self.value_format), (".keyFormat", self.key_format_kind)):
            if kind.realtime_refused:
                found.append(SinkFinding(field, kind.realtime_refused))
        return found


class PostgresSecretRef(SecretRef):
    """A Secret holding a libpq connection URI (postgresql://user:password@host:5432/db)."""

    key: str = Field(
        default="uri",
        pattern=r"^[-._a-zA-Z0-9]{1,253}$",
        max_length=253,
        description="Key of the Secret holding the connection URI.",
    )


class PostgresSink(SinkTarget):
    """Upsert rows into a Postgres table by primary key (insert new keys, update existing ones)."""

    realtime_refused: ClassVar[str | None] = (
        "real-time mode writes to Kafka only (Spark has no real-time writer for a batch upsert); write to a "
        "Kafka topic, ")

    secret_ref: PostgresSecretRef = Field(description=PostgresSecretRef.__doc__)
    table: str = Field(
        pattern=_PG_IDENT,
        max_length=127,
        description="Target table, optionally schema-qualified (analytics.session_stats); lowercase identifiers.",
    )
    primary_key: list[Column] = Field(
        min_length=1,
        max_length=16,
        description="Columns of the stream forming the table's primary key; rows with an existing key "
        "update it. For windowed aggregates include window_start.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    create_table: bool = Field(
        default=True,
        description="Create the table (from the stream's columns) when it does not exist.",
    )

    def target_name(self) -> str:
        return self.table

    def secret_env(self) -> list[SecretEnv]:
        ref = self.secret_ref
        return [SecretEnv(".secretRef", ref.name, ref.key, postgres_uri_env(ref.name))]

    def stream_findings(self, columns: Collection[str], group_columns: Collection[str] | None,
                        missing: Callable[[str], str]) -> list[SinkFinding]:
        found = [SinkFinding(f".primaryKey[{j}]", missing(c)) for j, c in enumerate(self.primary_key)
                 if c not in columns]
        uncovered = [c for c in group_columns or () if c not in self.primary_key]
        if uncovered:
            found.append(SinkFinding(".primaryKey", f"does not include {', '.join(uncovered)}: rows of different "
                                     "groups would overwrite each other", "warning"))
        return found


def is_relative_table_path(path: str) -> bool:
    """A table path kept under the app's own storage (TABLES_FOLDER), as opposed to an s3a:// URI."""
    return not path.startswith("s3a://")


def _table_findings(partition_by: Collection[str], columns: Collection[str],
                    missing: Callable[[str], str]) -> list[SinkFinding]:
    found = [SinkFinding(f".partitionBy[{j}]", missing(c)) for j, c in enumerate(partition_by) if c not in columns]
    if columns and all(c in partition_by for c in columns if not c.startswith("_")):
        found.append(SinkFinding(".partitionBy", "names every column of the stream: its files would hold no "
                                 "data columns; partition by a few low-cardinality columns"))
    return found


def _partition_by() -> Any:
    return Field(
        default_factory=list,
        max_length=8,
        description="Columns whose values name the table's folders (column=value/...), in this order: a reader "
        "filtering on them skips the other folders. Pick a few low-cardinality columns (a date, a region): "
        "each distinct combination is a folder with files of its own in every micro-batch.",
    )


class ParquetSink(SinkTarget):
    """Append rows as Parquet files to a folder, exactly once: Spark's file sink records the files of each
    micro-batch in the folder's _spark_metadata log, and readers that read through it (Spark,
    streamapp's tests) see a batch replayed after a crash once."""

    realtime_refused: ClassVar[str | None] = (
        "real-time mode writes to Kafka only (Spark's file sink runs micro-batches); write to a Kafka topic, ")

    path: str = Field(pattern=TABLE_PATH_PATTERN, max_length=1024, description=TABLE_PATH_DESCRIPTION)
    partition_by: list[Column] = _partition_by()

    def target_name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def table_path(self) -> str | None:
        return self.path

    def stream_findings(self, columns: Collection[str], group_columns: Collection[str] | None,
                        missing: Callable[[str], str]) -> list[SinkFinding]:
        return _table_findings(self.partition_by, columns, missing)

    def emit_findings(self, emit: str) -> list[SinkFinding]:
        return [SinkFinding("", f"a parquet sink {_FILE_SINK_APPEND}")] if emit != "final" else []


DeltaMode = Literal["append", "upsert"]
DELTA_KEY_RULE = "mode: upsert needs key (the columns a row is merged on), and key is only read by mode: upsert"


class DeltaSink(SinkTarget):
    """Write rows to a Delta Lake table, exactly once. append: Spark's Delta sink, which records each
    micro-batch's id in the table's transaction log with the query's id, so a replayed batch is not
    added again. upsert: a MERGE by key per micro-batch (insert new keys, update existing ones), tagged
    with the query's id and the batch id in the same log, so a replayed batch changes nothing."""

    model_config = api_config(cel("(self.mode == 'upsert') == has(self.key)", DELTA_KEY_RULE, field_path=".key"))

    realtime_refused: ClassVar[str | None] = (
        "real-time mode writes to Kafka only (Spark has no real-time writer for Delta); write to a Kafka topic, ")

    path: str = Field(pattern=TABLE_PATH_PATTERN, max_length=1024, description=TABLE_PATH_DESCRIPTION)
    partition_by: list[Column] = _partition_by()
    mode: DeltaMode = Field(
        default="append",
        description="append: every row is added (the stream must emit final rows). upsert: rows are merged "
        "into the table by key, a row with an existing key replacing it (any emit mode; emit: updates "
        "keeps a window's row current as it changes).")
    key: list[Column] | None = Field(
        default=None,
        min_length=1,
        max_length=16,
        description="With mode: upsert, the columns identifying a row (for windowed aggregates include "
        "window_start). A micro-batch holding several rows of one key merges one of them, which one "
        "undefined: an aggregation emits one row per key and batch, a stateless stream may not.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )

    def target_name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def table_path(self) -> str | None:
        return self.path

    def rule_findings(self) -> list[SinkFinding]:
        return [] if (self.mode == "upsert") == (self.key is not None) else [SinkFinding(".key", DELTA_KEY_RULE)]

    def stream_findings(self, columns: Collection[str], group_columns: Collection[str] | None,
                        missing: Callable[[str], str]) -> list[SinkFinding]:
        found = _table_findings(self.partition_by, columns, missing)
        key = self.key or []
        found += [SinkFinding(f".key[{j}]", missing(c)) for j, c in enumerate(key) if c not in columns]
        uncovered = [c for c in group_columns or () if key and c not in key]
        if uncovered:
            found.append(SinkFinding(".key", f"does not include {', '.join(uncovered)}: rows of different groups "
                                     "would overwrite each other", "warning"))
        if key and self.partition_by and not set(self.partition_by) <= set(key):
            found.append(SinkFinding(".partitionBy", "upsert merges rows by key: a partition column outside the "
                                     "key would move a row to another folder when it changes, and MERGE "
                                     "matches it only within its own; put the partition columns in key"))
        return found

    def emit_findings(self, emit: str) -> list[SinkFinding]:
        if self.mode == "append" and emit != "final":
            return [SinkFinding(".mode", f"a delta sink in mode append {_FILE_SINK_APPEND}; or use mode: upsert "
                                "with a key, which keeps each key's latest row")]
        return []


# The sink kinds: each a SinkTarget model, held in the Sink field of the same name.
SINK_KINDS: dict[str, type[SinkTarget]] = {"kafka": KafkaSink, "postgres": PostgresSink,
                                           "parquet": ParquetSink, "delta": DeltaSink}
ONE_TARGET_MESSAGE = f"a sink writes to exactly one of {' or '.join(SINK_KINDS)}"
_ONE_TARGET = cel(" + ".join(f"(has(self.{kind}) ? 1 : 0)" for kind in SINK_KINDS) + " == 1", ONE_TARGET_MESSAGE)


def default_query_name(from_: str, target_name: str) -> str:
    return f"{from_}-{target_name}".lower().replace(".", "-")[:63].rstrip("-_")


def query_name_of(item: dict[str, Any]) -> str:
    """``Sink.query_name`` of a sink held as the spec's mapping (the operator compares specs so)."""
    if item.get("name"):
        return str(item["name"])
    kind = next((k for k in SINK_KINDS if item.get(k)), None)
    try:
        target = SINK_KINDS[kind].model_validate(item[kind]).target_name() if kind else ""
    except ValueError:  # a spec admitted by an older operator: paired by what can be read
        target = ""
    return default_query_name(item.get("from", ""), target)


class Sink(ApiModel):
    """Write a source or stream out (Kafka Streams: to()). Several sinks may read the same stream."""

    model_config = api_config(_ONE_TARGET)

    name: Name | None = Field(
        default=None,
        description="Stable name of this sink's query; its checkpoint is kept under it, so renaming "
        "restarts the sink from startingOffsets. Default: '<from>-<topic, table or path's last segment>'.",
    )
    # Its other fields are compared together: StreamAppSpec.sinks declares how.
    from_: Annotated[Name, ChangeClass("incompatible", "the sink's query state was built from another input")] = Field(
        alias="from", description="Name of the source or stream to write."
    )
    kafka: KafkaSink | None = Field(default=None, description=KafkaSink.__doc__)
    postgres: PostgresSink | None = Field(default=None, description=PostgresSink.__doc__)
    parquet: ParquetSink | None = Field(default=None, description=ParquetSink.__doc__)
    delta: DeltaSink | None = Field(default=None, description=DeltaSink.__doc__)

    def targets(self) -> list[tuple[str, SinkTarget]]:
        """(kind, target) of every kind set: exactly one in a valid sink."""
        return [(kind, getattr(self, kind)) for kind in SINK_KINDS if getattr(self, kind) is not None]

    @property
    def kind(self) -> str:
        return self.targets()[0][0]

    @property
    def target(self) -> SinkTarget:
        return self.targets()[0][1]

    @property
    def query_name(self) -> str:
        """The name used for the streaming query and its checkpoint directory."""
        return self.name or default_query_name(self.from_, self.target.target_name())
