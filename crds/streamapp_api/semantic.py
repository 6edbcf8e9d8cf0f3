"""Checks across the pipeline: names and references, cycles, columns, event time, and Spark's output modes.

Pure functions, no I/O. Each sink is one Spark streaming query over the whole lineage of the stream it
writes, and a query has one output mode, so emit modes are checked per lineage:

* ``final`` (Spark append mode): every aggregation must be windowed over a watermarked event time;
  stream-stream joins and several stateful steps may be chained.
* ``updates`` (Spark update mode): no stream-stream join anywhere upstream, and at most one
  aggregation (aggregate or accumulate) per query.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .errors import Issue
from .flow import Flow, walk_steps
from .rules import check_objects
from .sinks import postgres_uri_env
from .spec import StreamApp

RESERVED_NAMES = ("input",)


@dataclass(frozen=True)
class Lineage:
    """What one stream's query contains, from the sources up to and including the stream."""

    aggregations: tuple[tuple[str, bool, bool], ...] = ()  # (path, windowed, watermarked)
    accumulates: tuple[str, ...] = ()
    stream_joins: tuple[str, ...] = ()
    emits: tuple[tuple[str, str, str], ...] = ()  # (path, value, stream name)

    def merge(self, other: "Lineage") -> "Lineage":
        def union(a: tuple, b: tuple) -> tuple:
            return a + tuple(x for x in b if x not in a)
        return Lineage(*(union(getattr(self, f), getattr(other, f)) for f in
                         ("aggregations", "accumulates", "stream_joins", "emits")))


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
    return Issue(path, f"{name!r} is not defined; {what} reads one of: {', '.join(known) or '(none)'}")


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
                    f"tables: {', '.join(sorted(graph.tables)) or '(none)'}"
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


def check_semantics(app: StreamApp) -> list[Issue]:
    """Cross-references, columns and output modes. Assumes the document parsed into the model."""
    issues: list[Issue] = []
    graph = _names(app, issues)
    deps = _references(app, graph, issues)
    order = _order(deps, issues)
    flows: dict[str, Flow] = {}
    lineages: dict[str, Lineage] = {}
    for name, i in graph.sources.items():
        flows[name] = Flow.of_source(app.spec.sources[i])
        lineages[name] = Lineage()
    tables = {t.name: t for t in app.spec.tables}
    for name in order:
        i = graph.streams[name]
        stream = app.spec.streams[i]
        base = f"spec.streams[{i}]"
        if stream.from_ not in flows:
            continue
        lineage = lineages[stream.from_]
        flow, lineage, step_issues = walk_steps(stream, base, flows, lineages, tables, lineage)
        issues.extend(step_issues)
        if stream.emit is not None:
            lineage = lineage.merge(Lineage(emits=((f"{base}.emit", stream.emit, name),)))
        mode, emit_issues = _emit_issues(lineage, base)
        issues.extend(emit_issues)
        flows[name] = replace(flow, emit=mode)
        lineages[name] = lineage
    issues.extend(_check_sinks(app, flows))
    issues.extend(_unused(app, graph))
    return issues


def _check_sinks(app: StreamApp, flows: dict[str, Flow]) -> list[Issue]:
    issues: list[Issue] = []
    names: dict[str, int] = {}
    uri_envs: dict[str, tuple[int, str, str]] = {}  # driver env variable -> first sink, Secret, key
    for i, sink in enumerate(app.spec.sinks):
        base = f"spec.sinks[{i}]"
        if (sink.kafka is None) == (sink.postgres is None):
            continue
        if sink.postgres is not None:
            ref = sink.postgres.secret_ref
            env = postgres_uri_env(ref.name)
            first = uri_envs.setdefault(env, (i, ref.name, ref.key))
            if first[1:] != (ref.name, ref.key):
                # The driver receives each connection URI in one variable named after the Secret.
                issues.append(Issue(f"{base}.postgres.secretRef", f"Secret {ref.name!r} key {ref.key!r} would reach "
                                    f"the driver in the same variable {env} as spec.sinks[{first[0]}] (Secret "
                                    f"{first[1]!r} key {first[2]!r}); use one key per Secret, or another Secret"))
        query = sink.query_name
        if query in names:
            issues.append(Issue(f"{base}.name", f"query name {query!r} is also used by spec.sinks[{names[query]}]; "
                                "give the sinks distinct names"))
        names.setdefault(query, i)
        flow = flows.get(sink.from_)
        if flow is None or flow.columns is None:
            continue
        if sink.kafka is not None and sink.kafka.key and sink.kafka.key not in flow.columns:
            issues.append(Issue(f"{base}.kafka.key", flow.missing(sink.kafka.key, sink.from_)))
        if sink.postgres is not None:
            for j, column in enumerate(sink.postgres.primary_key):
                if column not in flow.columns:
                    issues.append(Issue(f"{base}.postgres.primaryKey[{j}]", flow.missing(column, sink.from_)))
            if flow.group_columns is not None:
                uncovered = [c for c in flow.group_columns if c not in sink.postgres.primary_key]
                if uncovered:
                    issues.append(Issue(f"{base}.postgres.primaryKey", f"does not include {', '.join(uncovered)}: "
                                        "rows of different groups would overwrite each other", "warning"))
    return issues


def _unused(app: StreamApp, graph: Graph) -> list[Issue]:
    read = {s.from_ for s in app.spec.streams} | {s.from_ for s in app.spec.sinks}
    read |= {step.join.stream for s in app.spec.streams for step in s.steps if step.join and step.join.stream}
    read |= {step.join.table for s in app.spec.streams for step in s.steps if step.join and step.join.table}
    issues = []
    for kind in ("sources", "tables", "streams"):
        for name, i in getattr(graph, kind).items():
            if name not in read:
                issues.append(Issue(f"spec.{kind}[{i}].name", f"{name!r} is never read by a stream, join or sink",
                                    "warning"))
    return issues


def check(app: StreamApp) -> list[Issue]:
    """All checks on a parsed StreamApp: object rules, then cross-references and modes. Sorted, no repeats."""
    issues = check_objects(app)
    if not any(i.severity == "error" for i in issues):
        issues.extend(check_semantics(app))
    unique: list[Issue] = []
    for issue in issues:
        if issue not in unique:
            unique.append(issue)
    return unique

