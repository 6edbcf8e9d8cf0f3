"""Follow a stream's steps: which columns exist, which column is the event time, whether it has a
watermark, and what the stream's query is computed from (its lineage).

Columns are tracked by name only and only while they are determinable; after an ``sql`` step they are
unknown and column checks stop (they never guess). Every SQL expression of a step is parsed (see
``expressions``) and the columns it reads are checked against the columns the step's input has, as
Spark resolves them (ignoring case); ``sql`` steps must be one SELECT reading only their input.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .coltypes import METADATA_TYPES, element_type, field_problem, normalised
from .errors import Issue
from .expressions import Expression, expression_problems, filter_value_type, parse_expression, unknown_columns
from .sources import METADATA_COLUMNS, Source, Table
from .steps import ACCUMULATE_FUNCTIONS
from .suggest import did_you_mean

if TYPE_CHECKING:
    from .spec import Stream
    from .steps import Join

@dataclass(frozen=True)
class Flow:
    """What is known about the rows of a source or stream."""

    columns: frozenset[str] | None  # None: unknown (after sql)
    event_time: str | None  # None: no usable event-time column
    watermark: bool
    group_columns: tuple[str, ...] | None = None  # set when the last stateful step was an aggregate
    emit: str | None = None
    types: tuple[tuple[str, str], ...] = ()  # column -> normalised Spark type, where known

    @classmethod
    def of_source(cls, source: Source) -> "Flow":
        return cls(frozenset(source.columns()), source.event_time_column, source.watermark is not None,
                   types=_record_types(source))

    def type_of(self, column: str) -> str | None:
        """The column's type when known (found ignoring case, as Spark resolves names)."""
        folded = column.lower()
        return next((t for c, t in self.types if c.lower() == folded), None)

    def with_types(self, types: Mapping[str, str | None]) -> "Flow":
        """The flow with these column types; a column whose type is unknown (None, "") is left out."""
        return replace(self, types=tuple(sorted((c, t) for c, t in types.items() if t)))

    def missing(self, column: str, name: str) -> str:
        present = sorted(c for c in self.columns or () if not c.startswith("__"))
        shown = [c for c in present if not c.startswith("_")]
        metadata = [c for c in ("_key", "_timestamp") if c in present]
        return (f"column {column!r} does not exist in {name!r}{did_you_mean(column, present)}; its columns are: "
                f"{', '.join(shown) or '(none)'}" + (f" (and {', '.join(metadata)})" if metadata else ""))

    def has(self, column: str) -> bool:
        return self.columns is None or column in self.columns


@dataclass(frozen=True)
class Lineage:
    """What one stream's query is computed from and what it contains, from the sources up to and
    including the stream: Spark runs each sink as one query over all of it."""

    aggregations: tuple[tuple[str, bool, bool], ...] = ()  # (path, windowed, watermarked)
    accumulates: tuple[str, ...] = ()
    stream_joins: tuple[str, ...] = ()
    emits: tuple[tuple[str, str, str], ...] = ()  # (path, value, stream name)
    sources: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    streams: tuple[str, ...] = ()  # in dependency order, the stream itself last

    def merge(self, other: "Lineage") -> "Lineage":
        def union(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
            return a + tuple(x for x in b if x not in a)
        return Lineage(*(union(getattr(self, f), getattr(other, f)) for f in
                         ("aggregations", "accumulates", "stream_joins", "emits", "sources", "tables", "streams")))


def select_names(items: list[str]) -> tuple[list[str | None], bool]:
    """Output names of select items (None where not determinable) and whether '*' was used: an item
    'expr AS name' is named name, a column reference 'a' or 'a.b.c' (struct field) its last part."""
    names: list[str | None] = []
    star = False
    for item in items:
        parsed = parse_expression(item)
        if parsed.star:
            star = True
        else:
            names.append(parsed.name)
    return names, star


def _record_types(item: Source | Table) -> tuple[tuple[str, str], ...]:
    values = {**item.key_columns(), **item.value_format.value_columns(item.schema_)}
    types = {**METADATA_TYPES, **{c: normalised(t) for c, t in values.items()}}
    return tuple(sorted((c, t) for c, t in types.items() if t))


def _merge_types(left: Flow, right: dict[str, str], prefix: str, keep: tuple[str, ...] = ()) -> dict[str, str]:
    out = dict(left.types)
    for column, type_text in right.items():
        if column in keep or column.startswith("_"):
            continue
        out[f"{prefix.replace('-', '_')}_{column}" if column in (left.columns or ()) else column] = type_text
    return out


def _merge_columns(left: frozenset[str] | None, right: set[str] | frozenset[str] | None,
                   prefix: str, keep: tuple[str, ...] = ()) -> frozenset[str] | None:
    if left is None or right is None:
        return None
    out = set(left)
    for column in right:
        if column in keep or column.startswith("_"):
            continue
        out.add(f"{prefix.replace('-', '_')}_{column}" if column in left else column)  # as the runtime names it
    return frozenset(out)


@dataclass
class StepWalk:
    """One stream's walk through its steps: the flow and lineage so far and what is wrong with the
    steps. Each step's function in ``STEP_FLOW`` reads them and moves them on."""

    stream: "Stream"
    base: str  # the stream's path in the spec
    flows: dict[str, Flow]
    lineages: dict[str, Lineage]
    tables: dict[str, Table]
    flow: Flow
    lineage: Lineage
    issues: list[Issue] = field(default_factory=list)

    def at(self, j: int) -> tuple[str, Any]:
        """Step ``j``'s path in the spec and its value."""
        return f"{self.base}.steps[{j}]", self.stream.steps[j].value

    def need(self, column: str, where: str) -> None:
        if not self.flow.has(column):
            self.issues.append(Issue(where, self.flow.missing(column, self.stream.name)))

    def check(self, text: str, where: str, visible: tuple[str, ...] = ()) -> Expression:
        """Parse one expression and check the columns it reads; ``visible``: names given earlier in
        the same list (Spark resolves them as lateral column aliases)."""
        parsed = parse_expression(text)
        self.issues.extend(Issue(where, problem) for problem in expression_problems(parsed))
        flow = self.flow
        if flow.columns is not None and not parsed.error:
            self.issues.extend(Issue(where, flow.missing(column, self.stream.name))
                               for column in unknown_columns(parsed, flow.columns, set(visible)))
            for parts in dict.fromkeys(p for p in parsed.references if len(p) > 1):
                found = field_problem(parts, flow.type_of(parts[0]))
                if found:
                    struct, name, fields = found
                    self.issues.append(Issue(where, f"{struct!r} has no field {name!r}{did_you_mean(name, fields)}; "
                                             f"its fields are: {', '.join(fields)}"))
        return parsed


def _filter(walk: StepWalk, j: int) -> None:
    path, value = walk.at(j)
    if not walk.check(value, f"{path}.filter").error:
        found = filter_value_type(value, walk.flow.type_of)
        if found:
            walk.issues.append(Issue(f"{path}.filter", f"is {found}, not a condition: a filter keeps the rows "
                                     "for which it is true (e.g. amount > 0, event = 'click')"))


def _select(walk: StepWalk, j: int) -> None:
    path, value = walk.at(j)
    flow = walk.flow
    parsed = [walk.check(item, f"{path}.select[{k}]", tuple(n for n in select_names(value[:k])[0] if n))
              for k, item in enumerate(value)]
    names, star = select_names(value)
    for k, item in enumerate(parsed):
        if item.name is None and not item.star and not item.error:
            walk.issues.append(Issue(f"{path}.select[{k}]", f"{value[k]!r} needs a name: write 'expression AS name'"))
    metadata = {c for c in flow.columns or () if c.startswith("_")}  # key and timestamp travel along
    named = [n for n in names if n is not None]
    if len(named) < len(names) or (star and flow.columns is None):
        columns = None
    else:
        columns = frozenset(set(named) | metadata | (set(flow.columns or ()) if star else set()))
    kept = [p.name for p in parsed if p.name is not None and p.references == ((p.name,),)]  # bare column references
    keeps_time = star or (flow.event_time or "").startswith("_") or flow.event_time in kept
    types: dict[str, str | None] = dict(flow.types) if star else {c: t for c, t in flow.types if c.startswith("_")}
    types.update({p.name: flow.type_of(p.name) for p in parsed if p.name in kept})
    walk.flow = replace(flow, columns=columns, event_time=flow.event_time if keeps_time else None,
                        watermark=flow.watermark and keeps_time, group_columns=None).with_types(types)


def _with_columns(walk: StepWalk, j: int) -> None:
    path, value = walk.at(j)
    for k, (name, text) in enumerate(value.items()):
        walk.check(text, f"{path}.withColumns.{name}", tuple(value)[:k])
    flow = walk.flow
    replaced_time = flow.event_time in value
    columns = None if flow.columns is None else flow.columns | set(value)
    walk.flow = replace(flow, columns=columns, event_time=None if replaced_time else flow.event_time,
                        watermark=flow.watermark and not replaced_time).with_types(
        {c: t for c, t in flow.types if c not in value})


def _explode(walk: StepWalk, j: int) -> None:
    path, value = walk.at(j)
    walk.need(value.column, f"{path}.explode.column")
    flow = walk.flow
    column_type = flow.type_of(value.column)
    if column_type and not column_type.startswith(("array<", "map<")):
        walk.issues.append(Issue(f"{path}.explode.column", f"column {value.column!r} is {column_type}: explode "
                                 "needs an array (or a map) column; split a string first, e.g. "
                                 "withColumns: {words: \"split(line, ' ')\"}"))
    if flow.columns is not None and value.as_:
        flow = replace(flow, columns=flow.columns | {value.as_})
    target = value.as_ or value.column
    walk.flow = flow.with_types({**{c: t for c, t in flow.types if c != target},
                                 target: element_type(flow.type_of(value.column))})


def _key_by(walk: StepWalk, j: int) -> None:
    path, value = walk.at(j)
    walk.check(value, f"{path}.keyBy")  # sets _key (again, or after an aggregate, anew)
    flow = walk.flow
    walk.flow = replace(flow, columns=None if flow.columns is None else flow.columns | {"_key"})


def _join(walk: StepWalk, j: int) -> None:
    path, value = walk.at(j)
    if value.table is not None:
        _table_join(walk, path, value, value.table)
    elif value.stream is not None:
        _stream_join(walk, path, value, value.stream)


def _table_join(walk: StepWalk, path: str, value: Join, name: str) -> None:
    table = walk.tables.get(name)
    walk.need(value.key or "_key", f"{path}.join.key")
    if table is None:
        return
    flow = walk.flow
    table_types = dict(_record_types(table))
    merged = _merge_types(flow, {c: table_types.get(c, "") for c in table.value_columns()}, table.name)
    flow = replace(flow, columns=_merge_columns(flow.columns, table.value_columns(), table.name))
    walk.flow = flow.with_types(merged)
    walk.lineage = walk.lineage.merge(Lineage(tables=(table.name,)))


def _stream_join(walk: StepWalk, path: str, value: Join, name: str) -> None:
    other = walk.flows.get(name)
    if other is None:
        return
    for k, column in enumerate(value.using or []):
        walk.need(column, f"{path}.join.using[{k}]")
        if not other.has(column):
            walk.issues.append(Issue(f"{path}.join.using[{k}]", other.missing(column, name)))
    flow = walk.flow
    for side, side_flow in ((walk.stream.name, flow), (name, other)):
        if not side_flow.watermark and side_flow.columns is not None:
            walk.issues.append(Issue(f"{path}.join.stream", f"a stream-stream join needs a watermark on both "
                                     f"sides; {side!r} has none (set watermark on its source)"))
    lineage = walk.lineage.merge(walk.lineages.get(name, Lineage()))
    walk.lineage = lineage.merge(Lineage(stream_joins=(f"{path}.join",)))
    using = tuple(value.using or ())
    merged = _merge_types(flow, dict(other.types), name, using)
    walk.flow = replace(flow, columns=_merge_columns(flow.columns, other.columns, name, using),
                        watermark=flow.watermark and other.watermark, group_columns=None).with_types(merged)


def _window(walk: StepWalk, j: int) -> None:
    """Checked here, compiled with the aggregate that follows (the runtime relies on this check)."""
    path, _ = walk.at(j)
    steps = walk.stream.steps
    following = steps[j + 1].aggregate if j + 1 < len(steps) else None
    if following is None:
        walk.issues.append(Issue(f"{path}.window", "a window must be followed directly by an aggregate step"))
    if walk.flow.event_time is None and walk.flow.columns is not None:
        walk.issues.append(Issue(f"{path}.window", "no event-time column left (an earlier select or withColumns "
                                 "replaced it); keep it so windows can use it"))


def _aggregate(walk: StepWalk, j: int) -> None:
    path, value = walk.at(j)
    window = walk.stream.steps[j - 1].window if j > 0 else None
    before = len(walk.issues)
    for k, column in enumerate(value.group_by):
        walk.need(column, f"{path}.aggregate.groupBy[{k}]")
    for k, (name, text) in enumerate(value.columns.items()):
        if _bare_aggregate(text, walk.flow):
            walk.issues.append(Issue(f"{path}.aggregate.columns.{name}", f"{text.strip()!r} names a function, not a "
                                     f"column: an aggregate column is a call, e.g. {text.strip()}(*) or sum(amount)"))
        else:
            walk.check(text, f"{path}.aggregate.columns.{name}", tuple(value.columns)[:k])
    found_problems = len(walk.issues) > before
    if window is not None and window.type == "session" and not value.group_by:
        walk.issues.append(Issue(f"{path}.aggregate.groupBy", "a session window needs at least one groupBy "
                                 "column (sessions are per key)"))
    flow = walk.flow
    windowed = window is not None
    walk.lineage = walk.lineage.merge(Lineage(aggregations=((f"{path}.aggregate", windowed,
                                                             windowed and flow.watermark),)))
    columns = set(value.group_by) | set(value.columns) | ({"window_start", "window_end"} if windowed else set())
    types = {c: flow.type_of(c) for c in value.group_by if c not in value.columns}
    if windowed:
        types.update(window_start="timestamp", window_end="timestamp")
    walk.flow = Flow(frozenset(columns), "window_end" if windowed else None, windowed and flow.watermark,
                     tuple((["window_start"] if windowed else []) + list(value.group_by))).with_types(types)
    if found_problems:  # a misspelt name would come back as a suggestion further down: check no further
        walk.flow = replace(walk.flow, columns=None)


def _bare_aggregate(text: str, flow: Flow) -> bool:
    """``count`` where ``count(*)`` was meant: an aggregate function's bare name that is no column."""
    name = text.strip()
    return name.lower() in ACCUMULATE_FUNCTIONS and not flow.has(name)


def _accumulate(walk: StepWalk, j: int) -> None:
    path, value = walk.at(j)
    for k, column in enumerate(value.key):
        walk.need(column, f"{path}.accumulate.key[{k}]")
    for name, text in value.columns.items():
        walk.check(text, f"{path}.accumulate.columns.{name}")
    walk.lineage = walk.lineage.merge(Lineage(accumulates=(f"{path}.accumulate",)))
    flow = walk.flow
    columns = None if flow.columns is None else flow.columns | set(value.columns)
    walk.flow = replace(flow, columns=columns, group_columns=None).with_types(
        {c: t for c, t in flow.types if c not in value.columns})


def _dedupe(walk: StepWalk, j: int) -> None:
    path, value = walk.at(j)
    for k, column in enumerate(value.keys):
        walk.need(column, f"{path}.dedupe.keys[{k}]")
    if not walk.flow.watermark and walk.flow.columns is not None:
        walk.issues.append(Issue(f"{path}.dedupe", "dedupe needs a watermark on the stream's event time "
                                 "(set watermark on the source) so old keys can be forgotten"))


def _sql(walk: StepWalk, j: int) -> None:
    # what an sql step may do is checked with the step (rules.check_step)
    flow = walk.flow
    walk.flow = Flow(None, flow.event_time, flow.watermark)  # Spark keeps the watermark through SQL


def _python(walk: StepWalk, j: int) -> None:
    """Exactly the declared columns leave, and the metadata columns the input had (null where the
    function's frame dropped them). The event time and its watermark do not survive: the rows are the
    function's, Spark cannot tell which input row's time an output row carries."""
    _, value = walk.at(j)
    flow = walk.flow
    metadata = {c for c in METADATA_COLUMNS if flow.columns is None or c in flow.columns}
    declared = {c: normalised(t) for c, t in value.schema_.items()}
    walk.flow = Flow(frozenset(set(declared) | metadata), None, False).with_types(
        {**{c: METADATA_TYPES[c] for c in metadata if c not in declared}, **declared})


# Per step key (steps.STEP_KEYS), what the step checks and does to the flow and the lineage; the
# runtime's compile/steps STEP_COMPILERS has a row for each key too (tests/unit/test_step_tables.py).
STEP_FLOW: dict[str, Callable[[StepWalk, int], None]] = {
    "filter": _filter,
    "select": _select,
    "withColumns": _with_columns,
    "explode": _explode,
    "keyBy": _key_by,
    "join": _join,
    "window": _window,
    "aggregate": _aggregate,
    "accumulate": _accumulate,
    "dedupe": _dedupe,
    "sql": _sql,
    "python": _python,
}


def walk_steps(stream: "Stream", base: str, flows: dict[str, Flow], lineages: dict[str, Lineage],
               tables: dict[str, Table], lineage: Lineage) -> tuple[Flow, Lineage, list[Issue], tuple[Flow, ...]]:
    """The stream's flow after its steps, its lineage, what is wrong with the steps, and the flow
    after each step (what the runtime compiles each step against)."""
    walk = StepWalk(stream, base, flows, lineages, tables, replace(flows[stream.from_], group_columns=None, emit=None),
                    lineage)
    after: list[Flow] = []
    for j, step in enumerate(stream.steps):
        STEP_FLOW[step.kind](walk, j)
        after.append(walk.flow)
    return walk.flow, walk.lineage.merge(Lineage(streams=(stream.name,))), walk.issues, tuple(after)
