"""Where results go: Kafka topics and Postgres tables. Each sink is one streaming query.

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


class KafkaSink(SinkTarget):
    """Write each row as a JSON object (column name -> value, timestamps ISO-8601 UTC) to a topic."""

    topic: Topic = Field(description="The Kafka topic to write to.")
    key: Column | None = Field(
        default=None,
        description="Column written as the message key. Default: the record key (_key) when the "
        "stream has one, else no key.",
    )
    delivery: Delivery = Field(default="at-least-once", description=DELIVERY_DESCRIPTION)

    def target_name(self) -> str:
        return self.topic

    def topic_written(self) -> str | None:
        return self.topic

    def stream_findings(self, columns: Collection[str], group_columns: Collection[str] | None,
                        missing: Callable[[str], str]) -> list[SinkFinding]:
        return [SinkFinding(".key", missing(self.key))] if self.key and self.key not in columns else []

    def realtime_findings(self) -> list[SinkFinding]:
        if self.delivery == "exactly-once":
            return [SinkFinding(".delivery", "exactly-once commits a Kafka transaction per micro-batch, and "
                                "real-time mode has none; use at-least-once, ")]
        return []


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


# The sink kinds: each a SinkTarget model, held in the Sink field of the same name.
SINK_KINDS: dict[str, type[SinkTarget]] = {"kafka": KafkaSink, "postgres": PostgresSink}
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
        "restarts the sink from startingOffsets. Default: '<from>-<topic or table>'.",
    )
    # Its other fields are compared together: StreamAppSpec.sinks declares how.
    from_: Annotated[Name, ChangeClass("incompatible", "the sink's query state was built from another input")] = Field(
        alias="from", description="Name of the source or stream to write."
    )
    kafka: KafkaSink | None = Field(default=None, description=KafkaSink.__doc__)
    postgres: PostgresSink | None = Field(default=None, description=PostgresSink.__doc__)

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
