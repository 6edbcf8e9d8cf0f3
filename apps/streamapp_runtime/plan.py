"""What queries a StreamApp becomes: pure decisions over the API models, no pyspark.

Each sink is one streaming query over the whole lineage of the stream it writes (Spark has no shared
sub-topologies); each JSON source with dead-lettering on adds one query writing its bad records.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from streamapp_api import Source, StreamApp, Table
from streamapp_api.spec import Stream

APPEND, UPDATE = "append", "update"


@dataclass(frozen=True)
class Lineage:
    sources: tuple[str, ...]
    tables: tuple[str, ...]
    streams: tuple[str, ...]  # in dependency order, the written stream last


@dataclass(frozen=True)
class QueryPlan:
    name: str
    kind: str  # kafka | postgres | console | dlq
    reads: str  # the source or stream written (the source for dlq)
    output_mode: str
    checkpoint: str
    index: int | None = None  # position in spec.sinks


def by_name(app: StreamApp) -> dict[str, Source | Table | Stream]:
    spec = app.spec
    return {item.name: item for item in [*spec.sources, *spec.tables, *spec.streams]}


def lineage(app: StreamApp, name: str) -> Lineage:
    """Sources, tables and streams a source or stream is computed from."""
    items = by_name(app)
    sources: list[str] = []
    tables: list[str] = []
    streams: list[str] = []

    def visit(current: str) -> None:
        item = items.get(current)
        if item is None:
            raise KeyError(f"{current!r} is not a source, table or stream of {app.metadata.name!r}")
        if isinstance(item, Source):
            if current not in sources:
                sources.append(current)
            return
        if isinstance(item, Table):
            if current not in tables:
                tables.append(current)
            return
        if current in streams:
            return
        visit(item.from_)
        for step in item.steps:
            if step.join is not None:
                visit(step.join.table or step.join.stream)
        streams.append(current)

    visit(name)
    return Lineage(tuple(sources), tuple(tables), tuple(streams))


def emit_mode(app: StreamApp, name: str) -> str:
    """'final' or 'updates' for the query writing ``name``; the same rule the API checker applies."""
    items = by_name(app)
    line = lineage(app, name)
    declared = [items[s].emit for s in line.streams if items[s].emit is not None]
    if declared:
        return declared[-1]
    watermarked = {s.name for s in app.spec.sources if s.watermark is not None}
    for stream_name in line.streams:
        stream = items[stream_name]
        for i, step in enumerate(stream.steps):
            if step.aggregate is None:
                continue
            windowed = i > 0 and stream.steps[i - 1].window is not None
            upstream = lineage(app, stream.from_).sources
            if not windowed or not all(s in watermarked for s in upstream):
                return "updates"
    return "final"


def output_mode(emit: str) -> str:
    return APPEND if emit == "final" else UPDATE


def dlq_topic(app: StreamApp) -> str:
    return app.spec.dead_letter.topic or f"{app.metadata.name}.dlq"


def checkpoint_dir(root: str, query: str) -> str:
    return str(Path(root) / query)


def query_plans(app: StreamApp, checkpoint_root: str, console: bool = False) -> list[QueryPlan]:
    plans = []
    for i, sink in enumerate(app.spec.sinks):
        kind = "console" if console else sink.kind
        name = sink.query_name + ("-console" if console else "")
        mode = output_mode(emit_mode(app, sink.from_))
        plans.append(QueryPlan(name, kind, sink.from_, mode, checkpoint_dir(checkpoint_root, name), i))
    if app.spec.dead_letter.enabled and not console:
        for source in app.spec.sources:
            if source.format == "json":
                name = f"dlq-{source.name}"
                plans.append(QueryPlan(name, "dlq", source.name, APPEND, checkpoint_dir(checkpoint_root, name)))
    return plans


def input_topics(app: StreamApp) -> list[str]:
    topics = [t for s in app.spec.sources for t in s.topic_list] + [t.topic for t in app.spec.tables]
    return sorted(set(topics))


def topic_sources(app: StreamApp) -> dict[str, str]:
    """Topic -> name of the source or table reading it (metric labels)."""
    found = {t: s.name for s in app.spec.sources for t in s.topic_list}
    found.update({t.topic: t.name for t in app.spec.tables})
    return found


def kafka_options(app: StreamApp, override: str | None, env_options: dict[str, str]) -> dict[str, str]:
    """Options of every Kafka reader and writer (``kafka.``-prefixed, as Spark takes them)."""
    options = {"kafka.bootstrap.servers": override or app.spec.kafka.bootstrap_servers}
    for key, value in {**(app.spec.kafka.options or {}), **env_options}.items():
        options[f"kafka.{key}"] = value
    return options
