"""The pipeline resolved once: names and references, the order of streams, and per source and stream
its columns, event time, watermark, emit mode and lineage (``Resolved``). ``streamapp validate``
reports the issues found on the way (with the checks in ``semantic``); the runtime compiles from the
same resolution, so neither restates the other's rules. Pure, no I/O.

Each sink is one Spark streaming query over the whole lineage of the stream it writes, and a query
has one output mode, so emit modes are decided per lineage:

* ``final`` (Spark append mode): every aggregation must be windowed over a watermarked event time;
  stream-stream joins and several stateful steps may be chained.
* ``updates`` (Spark update mode): no stream-stream join anywhere upstream, and at most one
  aggregation (aggregate or accumulate) per query.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .errors import Issue
from .flow import Flow, Lineage, walk_steps
from .spec import StreamApp
from .suggest import did_you_mean

RESERVED_NAMES = ("input",)


@dataclass
class Graph:
    sources: dict[str, int] = field(default_factory=dict)
    tables: dict[str, int] = field(default_factory=dict)
    streams: dict[str, int] = field(default_factory=dict)

    def kind_of(self, name: str) -> str | None:
        for kind in ("sources", "tables", "streams"):
            if name in getattr(self, kind):
                return kind
        return None


def _names(app: StreamApp, issues: list[Issue]) -> Graph:
    graph = Graph()
    seen: dict[str, str] = {}
    for kind in ("sources", "tables", "streams"):
        for i, item in enumerate(getattr(app.spec, kind)):
            path = f"spec.{kind}[{i}].name"
            if item.name in RESERVED_NAMES:
                issues.append(Issue(path, f"{item.name!r} is reserved (sql steps read their input as 'input'); pick another name"))
            if item.name in seen:
                issues.append(Issue(path, f"{item.name!r} is already used by {seen[item.name]}; sources, "
                                    "tables and streams share one namespace, names must be unique"))
                continue
            seen[item.name] = f"spec.{kind}[{i}]"
            getattr(graph, kind)[item.name] = i
    return graph


def _readable(graph: Graph, name: str, path: str, what: str) -> Issue | None:
    """An Issue unless ``name`` is a source or stream."""
    kind = graph.kind_of(name)
    if kind in ("sources", "streams"):
        return None
    if kind == "tables":
        return Issue(path, f"{name!r} is a table; {what} reads a source or a stream (join a table with a join step, "
                     "or declare the topic as a source to read it as a stream)")
    known = sorted(set(graph.sources) | set(graph.streams))
    hint = did_you_mean(name, known)
    return Issue(path, f"{name!r} is not defined{hint}; {what} reads one of: {', '.join(known) or '(none)'}")


def _references(app: StreamApp, graph: Graph, issues: list[Issue]) -> dict[str, list[tuple[str, str]]]:
    """Check every from/table/stream name; return each stream's upstream streams with the referring path."""
    deps: dict[str, list[tuple[str, str]]] = {}
    for i, stream in enumerate(app.spec.streams):
        if graph.streams.get(stream.name) != i:
            continue
        base = f"spec.streams[{i}]"
        deps[stream.name] = []
        problem = _readable(graph, stream.from_, f"{base}.from", "a stream")
        if problem:
            issues.append(problem)
        elif stream.from_ in graph.streams:
            deps[stream.name].append((stream.from_, f"{base}.from"))
        for j, step in enumerate(stream.steps):
            join = step.join
            if join is None or len(step.set_keys()) != 1:
                continue
            path = f"{base}.steps[{j}].join"
            if join.table is not None and join.table not in graph.tables:
                kind = graph.kind_of(join.table)
                hint = f"it is a {kind[:-1]}; use 'stream:' to join it" if kind else \
                    f"tables: {', '.join(sorted(graph.tables)) or '(none, declare it under spec.tables)'}" + \
                    did_you_mean(join.table, graph.tables)
                issues.append(Issue(f"{path}.table", f"{join.table!r} is not a table; {hint}"))
            if join.stream is not None:
                problem = _readable(graph, join.stream, f"{path}.stream", "a stream join")
                if problem:
                    issues.append(problem)
                elif join.stream == stream.name:
                    issues.append(Issue(f"{path}.stream", f"stream {stream.name!r} cannot join itself"))
                elif join.stream in graph.streams:
                    deps[stream.name].append((join.stream, f"{path}.stream"))
    for i, sink in enumerate(app.spec.sinks):
        problem = _readable(graph, sink.from_, f"spec.sinks[{i}].from", "a sink")
        if problem:
            issues.append(problem)
    return deps


def _order(deps: dict[str, list[tuple[str, str]]], issues: list[Issue]) -> list[str]:
    """Streams in dependency order; streams on a cycle are reported and left out."""
    order: list[str] = []
    state: dict[str, str] = {}
    bad: set[str] = set()

    def visit(name: str, trail: list[tuple[str, str]]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "active":
            names = [n for n, _ in trail]
            cycle = names[names.index(name):] + [name]
            issues.append(Issue(trail[-1][1], "cycle: " + " -> ".join(cycle) + " (each reads the next); streams must not depend on themselves"))
            bad.update(cycle)
            return
        state[name] = "active"
        for dep, path in deps.get(name, []):
            visit(dep, trail + [(name, path)])
        state[name] = "done"
        order.append(name)

    for name in deps:
        visit(name, [])
    return [n for n in order if n not in bad]


def _emit_issues(lineage: Lineage, stream_path: str) -> tuple[str, list[Issue]]:
    """The effective emit mode of a stream's query, and what Spark would refuse about it."""
    issues: list[Issue] = []
    own = [e for e in lineage.emits if e[0] == f"{stream_path}.emit"]
    if len({value for _, value, _ in lineage.emits}) > 1:
        path, value, _ = own[0] if own else lineage.emits[-1]
        others = sorted({f"{name} ({v})" for _, v, name in lineage.emits if v != value})
        issues.append(Issue(path, f"emit: {value} conflicts with {', '.join(others)} upstream; one query has one "
                            "output mode, so every stream in a lineage must emit the same way"))
        return value, issues
    if lineage.emits:
        emit_path, mode, _ = (own or list(lineage.emits))[0]
    else:
        emit_path = None
        windowed = all(w and m for _, w, m in lineage.aggregations)
        mode = "final" if windowed or lineage.stream_joins else "updates"
    if mode == "final":
        for k, (path, windowed, watermarked) in enumerate(lineage.aggregations):
            if not windowed:
                # Append mode writes an aggregate row once the watermark passes its window's end; without a
                # window nothing ever closes. A window step over the rows of an earlier windowed aggregate
                # uses their window as event time (Spark's chained stateful operators).
                again = any(w for _, w, _ in lineage.aggregations[:k])
                message = ("emit: final needs a window before this aggregate (a running total never closes); add a "
                           "window step or use emit: updates")
                if again:
                    message += ("; to aggregate the rows of an earlier windowed aggregate again, put a window step "
                                "before this aggregate (one of the same size keeps the same windows)")
                issues.append(Issue(path, message))
            elif not watermarked:
                issues.append(Issue(emit_path or path, "emit: final needs a watermark on the windowed aggregation's "
                                    f"event time ({path}); set watermark on the source or use emit: updates"))
        return mode, issues
    for path in lineage.stream_joins:
        issues.append(Issue(emit_path or path, f"emit: updates is not possible after a stream-stream join ({path}); "
                            "Spark joins streams in append mode only: use emit: final with windowed, watermarked "
                            "aggregations"))
    stateful = sorted([p for p, _, _ in lineage.aggregations] + list(lineage.accumulates))
    if len(stateful) > 1:
        issues.append(Issue(stateful[-1], f"emit: updates allows one aggregation per query, this lineage has "
                            f"{len(stateful)} ({', '.join(stateful)}); use emit: final with windowed, watermarked "
                            "aggregations, or split the app"))
    return mode, issues


@dataclass(frozen=True)
class Resolved:
    """Every source and every stream that could be resolved, by name."""

    flows: dict[str, Flow]  # after the stream's last step; ``emit`` set for streams
    lineages: dict[str, Lineage]
    steps: dict[str, tuple[Flow, ...]]  # per stream: the flow after each of its steps
    graph: Graph
    issues: tuple[Issue, ...]

    def emit(self, name: str) -> str:
        """'final' or 'updates' for the query writing ``name`` (a source is written as it comes: final)."""
        return self.flows[name].emit or "final"

    def lineage(self, name: str) -> Lineage:
        return self.lineages[name]


def resolve(app: StreamApp) -> Resolved:
    """Resolve the pipeline of a parsed StreamApp; what cannot be resolved is left out and reported."""
    issues: list[Issue] = []
    graph = _names(app, issues)
    deps = _references(app, graph, issues)
    order = _order(deps, issues)
    flows: dict[str, Flow] = {}
    lineages: dict[str, Lineage] = {}
    steps: dict[str, tuple[Flow, ...]] = {}
    for name, i in graph.sources.items():
        flows[name] = Flow.of_source(app.spec.sources[i])
        lineages[name] = Lineage(sources=(name,))
    tables = {t.name: t for t in app.spec.tables}
    for name in order:
        i = graph.streams[name]
        stream = app.spec.streams[i]
        base = f"spec.streams[{i}]"
        if stream.from_ not in flows:
            continue
        flow, lineage, step_issues, steps[name] = walk_steps(stream, base, flows, lineages, tables,
                                                             lineages[stream.from_])
        issues.extend(step_issues)
        if stream.emit is not None:
            lineage = lineage.merge(Lineage(emits=((f"{base}.emit", stream.emit, name),)))
        mode, emit_issues = _emit_issues(lineage, base)
        issues.extend(emit_issues)
        flows[name] = replace(flow, emit=mode)
        lineages[name] = lineage
    return Resolved(flows, lineages, steps, graph, tuple(issues))
