"""Where results go: Kafka topics and Postgres tables. Each sink is one streaming query."""

from __future__ import annotations


from typing import Annotated, Literal

from pydantic import Field

from .base import MAX_LIST, ApiModel, Column, Name, SecretRef, Topic, api_config, cel
from .changes import ChangeClass

# How a Kafka sink writes: Spark's own sink (a batch replayed after a crash is written again), or one
# Kafka transaction per batch partition with a marker of the batch (docs/runtime.md, "Sinks and delivery").
Delivery = Literal["at-least-once", "exactly-once"]
DELIVERY_DESCRIPTION = (
    "at-least-once: a micro-batch replayed after a crash is written again. exactly-once: each batch "
    "partition is written in one Kafka transaction together with a marker of the batch, so a replay "
    "writes nothing twice and readers with isolation.level=read_committed see every row once; "
    "costs a transaction per partition and batch (README, benchmark figures).")

_PG_IDENT = r"^[a-z_][a-z0-9_]{0,62}(\.[a-z_][a-z0-9_]{0,62})?$"


class KafkaSink(ApiModel):
    """Write each row as a JSON object (column name -> value, timestamps ISO-8601 UTC) to a topic."""

    topic: Topic = Field(description="The Kafka topic to write to.")
    key: Column | None = Field(
        default=None,
        description="Column written as the message key. Default: the record key (_key) when the "
        "stream has one, else no key.",
    )
    delivery: Delivery = Field(default="at-least-once", description=DELIVERY_DESCRIPTION)


class PostgresSecretRef(SecretRef):
    """A Secret holding a libpq connection URI (postgresql://user:password@host:5432/db)."""

    key: str = Field(
        default="uri",
        pattern=r"^[-._a-zA-Z0-9]{1,253}$",
        max_length=253,
        description="Key of the Secret holding the connection URI.",
    )


class PostgresSink(ApiModel):
    """Upsert rows into a Postgres table by primary key (insert new keys, update existing ones)."""

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


_ONE_TARGET = cel(
    "has(self.kafka) != has(self.postgres)",
    "a sink writes to exactly one of kafka or postgres",
)


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

    @property
    def kind(self) -> Literal["kafka", "postgres"]:
        return "kafka" if self.kafka is not None else "postgres"

    @property
    def query_name(self) -> str:
        """The name used for the streaming query and its checkpoint directory."""
        if self.name:
            return self.name
        target = self.kafka.topic if self.kafka is not None else self.postgres.table
        return f"{self.from_}-{target}".lower().replace(".", "-")[:63].rstrip("-_")


MAX_SINKS = MAX_LIST
