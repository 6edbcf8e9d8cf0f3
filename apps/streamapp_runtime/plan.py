"""What queries a StreamApp becomes: pure decisions over the API models, no pyspark.

Each sink is one streaming query over the whole lineage of the stream it writes (Spark has no shared
sub-topologies). A source's malformed records are counted by the first sink query that reads it (its
*owner*), and the dead-letter writer (run.dead_letters) reads back only the batches that had some; in
real-time mode, or for a source no sink reads, a dead-letter query of its own reads every record again.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamapp_api import Source, StreamApp, Table, contract, realtime, resolve
from streamapp_api.checkpoint import query_checkpoint
from streamapp_api.durations import spark_interval, trigger_interval
from streamapp_api.kafka_credentials import java_options
from streamapp_api.spec import Stream

APPEND, UPDATE = "append", "update"
# The dead-letter query runs at most this often (seconds): it re-reads what the source read meanwhile.
DLQ_MIN_INTERVAL_S = 10


@dataclass(frozen=True)
class Trigger:
    """When a query runs its micro-batches: ``available-now`` (what is there, then stop),
    ``interval`` (every ``interval``, a Spark interval such as '10 seconds'), ``asap``, or ``realtime``
    (long-running tasks; ``interval`` is how often offsets are checkpointed: streamapp_api.realtime)."""

    kind: str
    interval: str | None = None


@dataclass(frozen=True)
class QueryPlan:
    name: str
    kind: str  # a sink writer of sinks.WRITERS: kafka | postgres | console | dlq
    reads: str  # the source or stream written (the source for dlq)
    output_mode: str
    checkpoint: str  # a path or a URI (streamapp_api.checkpoint.query_checkpoint)
    index: int | None = None  # position in spec.sinks
    trigger: Trigger = Trigger("asap")
    counts_bad: tuple[str, ...] = ()  # sources whose bad records this query counts (it owns their dead letters)


def by_name(app: StreamApp) -> dict[str, Source | Table | Stream]:
    spec = app.spec
    return {item.name: item for item in [*spec.sources, *spec.tables, *spec.streams]}


def output_mode(emit: str) -> str:
    return APPEND if emit == "final" else UPDATE


def trigger(app: StreamApp, available_now: bool, min_interval_s: float = 0) -> Trigger:
    if available_now:
        return Trigger("available-now")
    if app.spec.realtime:  # the dead-letter query too: a micro-batch query would wait for a free slot
        return Trigger("realtime", spark_interval(realtime.CHECKPOINT_INTERVAL))
    interval = trigger_interval(app.spec.trigger)
    trigger_s = interval.total_seconds() if interval else 0
    if min_interval_s > trigger_s:
        return Trigger("interval", f"{int(min_interval_s)} seconds")
    if app.spec.trigger:
        return Trigger("interval", spark_interval(app.spec.trigger))
    return Trigger("asap")


def output_mode_of(app: StreamApp, emit: str, available_now: bool) -> str:
    """Spark runs real-time queries in update mode only; for a stateless query it writes what append would."""
    return UPDATE if app.spec.realtime and not available_now else output_mode(emit)


def dead_letter_owners(app: StreamApp) -> dict[str, str]:
    """Source whose records can be malformed, dead letters on -> the sink query that counts its bad
    records: the first sink (in spec order) whose lineage reads it. In real-time mode none: a query reports its progress only
    per checkpoint interval (minutes), too late for dead letters. Pure."""
    if not app.spec.dead_letter.enabled or app.spec.realtime:
        return {}
    resolved = resolve(app)
    owners: dict[str, str] = {}
    for sink in app.spec.sinks:
        for source in resolved.lineage(sink.from_).sources:
            owners.setdefault(source, sink.query_name)
    return {s.name: owners[s.name] for s in app.spec.sources if s.value_format.can_be_malformed and s.name in owners}


def query_plans(app: StreamApp, checkpoint_root: str, console: bool = False,
                available_now: bool = False) -> list[QueryPlan]:
    resolved = resolve(app)
    owners = {} if console else dead_letter_owners(app)
    plans = []
    for i, sink in enumerate(app.spec.sinks):
        kind = "console" if console else sink.kind
        name = sink.query_name + ("-console" if console else "")
        mode = output_mode_of(app, resolved.emit(sink.from_), available_now)
        counts = tuple(source for source, owner in owners.items() if owner == name)
        plans.append(QueryPlan(name, kind, sink.from_, mode, query_checkpoint(checkpoint_root, name), i,
                               trigger(app, available_now), counts))
    if app.spec.dead_letter.enabled and not console:
        for source in app.spec.sources:
            if source.value_format.can_be_malformed and source.name not in owners:
                name = contract.dlq_query(source.name)
                plans.append(QueryPlan(name, "dlq", source.name, output_mode_of(app, "final", available_now),
                                       query_checkpoint(checkpoint_root, name),
                                       trigger=trigger(app, available_now, DLQ_MIN_INTERVAL_S)))
    return plans


# The schema registry among the readers' options (kafka_options); not Kafka's, never given to Spark.
REGISTRY_URL_OPTION = "streamapp.schemaRegistry.url"
REGISTRY_USER_INFO_OPTION = "streamapp.schemaRegistry.userInfo"


def spark_kafka_options(options: dict[str, str]) -> dict[str, str]:
    """The options Spark's Kafka source or sink is given: ``options`` (kafka_options) but the runtime's
    own (``streamapp.``: the schema registry's URL and credentials, which Spark would show). Pure."""
    return {k: v for k, v in options.items() if not k.startswith("streamapp.")}


def input_topics(app: StreamApp) -> list[str]:
    topics = [t for s in app.spec.sources for t in s.topic_list] + [t.topic for t in app.spec.tables]
    return sorted(set(topics))


def topic_sources(app: StreamApp) -> dict[str, str]:
    """Topic -> name of the source or table reading it (metric labels)."""
    found = {t: s.name for s in app.spec.sources for t in s.topic_list}
    found.update({t.topic: t.name for t in app.spec.tables})
    return found


def kafka_options(app: StreamApp, override: str | None, env_options: dict[str, str],
                  registry_user_info: str | None = None) -> dict[str, str]:
    """Options of every Kafka reader and writer (``kafka.``-prefixed, as Spark takes them): the spec's
    and the Secret's (``env_options``), credentials as the Java client takes them
    (``kafka_credentials.java_options``; ``connections.admin_config`` derives librdkafka's back).
    With them, under ``streamapp.``, the schema registry's URL and credentials (``registry_user_info``,
    from its Secret): the readers of format avro find them there, read_kafka leaves them out of Spark's."""
    options = {"kafka.bootstrap.servers": override or app.spec.kafka.bootstrap_servers}
    for key, value in java_options({**(app.spec.kafka.options or {}), **env_options}).items():
        options[f"kafka.{key}"] = value
    registry = app.spec.kafka.schema_registry
    if registry is not None:
        options[REGISTRY_URL_OPTION] = registry.url
        if registry_user_info:
            options[REGISTRY_USER_INFO_OPTION] = registry_user_info
    return options


# A micro-batch task reads its offset range with the consumer the last batch's task of that partition used.
# That consumer may have a prefetch at the broker for the offsets after the last range, and it sends no other
# fetch until that one returns. While records flow, they answer it at once. In the batch after the input
# stops, the broker holds it for fetch.max.wait.ms (Kafka's default is 500 ms), and each wave of that
# batch's tasks waits that long with next to no CPU: a batch several times as long (bench/README.md,
# "How the data-plane figures were reached"). Real-time mode is left out: its tasks poll without a break, so a short wait would only make idle
# consumers fetch more often.
FETCH_WAIT = "kafka.fetch.max.wait.ms"
MICRO_BATCH_FETCH_WAIT_MS = 50


def reader_options(app: StreamApp, options: dict[str, str]) -> dict[str, str]:
    """The options of the app's Kafka readers: ``options`` (kafka_options) over the runtime's fetch wait
    for micro-batch reads; a wait the app sets itself wins. Pure."""
    if app.spec.realtime:
        return options
    return {FETCH_WAIT: str(MICRO_BATCH_FETCH_WAIT_MS), **options}
