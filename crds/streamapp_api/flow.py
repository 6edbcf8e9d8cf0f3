"""Follow a stream's steps: which columns exist, which column is the event time, whether it has a
watermark, and what the stream's query is computed from (its lineage).

Columns are tracked by name only and only while they are determinable; after an ``sql`` step they are
unknown and column checks stop (they never guess). Every SQL expression of a step is parsed (see
``expressions``) and the columns it reads are checked against the columns the step's input has, as
Spark resolves them (ignoring case); ``sql`` steps must be one SELECT reading only their input.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .coltypes import METADATA_TYPES, element_type, field_problem, normalised
from .errors import Issue
from .expressions import Expression, expression_problems, filter_value_type, parse_expression, unknown_columns
from .sources import Source, Table
from .suggest import did_you_mean

if TYPE_CHECKING:
    from .spec import Stream

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

    def with_types(self, types: dict[str, str]) -> "Flow":
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
        def union(a: tuple, b: tuple) -> tuple:
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
    values = (item.schema_ or {}) if item.format == "json" else {"value": "string"}
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


def walk_steps(stream: "Stream", base: str, flows: dict[str, Flow], lineages: dict[str, Lineage],
               tables: dict[str, Table], lineage: Lineage) -> tuple[Flow, Lineage, list[Issue], tuple[Flow, ...]]:
    """The stream's flow after its steps, its lineage, what is wrong with the steps, and the flow
    after each step (what the runtime compiles each step against)."""
    issues: list[Issue] = []
    flow = replace(flows[stream.from_], group_columns=None, emit=None)
    steps = stream.steps
    after: list[Flow] = []
    for j, step in enumerate(steps):
        if j:
            after.append(flow)
        path = f"{base}.steps[{j}]"
        kind, value = step.kind, step.value

        def need(column: str, where: str) -> None:
            if not flow.has(column):
                issues.append(Issue(where, flow.missing(column, stream.name)))

        def check(text: str, where: str, visible: tuple[str, ...] = ()) -> Expression:
            """Parse one expression and check the columns it reads; ``visible``: names given earlier in
            the same list (Spark resolves them as lateral column aliases)."""
            parsed = parse_expression(text)
            issues.extend(Issue(where, problem) for problem in expression_problems(parsed))
            if flow.columns is not None and not parsed.error:
                issues.extend(Issue(where, flow.missing(column, stream.name))
                              for column in unknown_columns(parsed, flow.columns, set(visible)))
                for parts in dict.fromkeys(p for p in parsed.references if len(p) > 1):
                    found = field_problem(parts, flow.type_of(parts[0]))
                    if found:
                        struct, field, fields = found
                        issues.append(Issue(where, f"{struct!r} has no field {field!r}{did_you_mean(field, fields)}; "
                                            f"its fields are: {', '.join(fields)}"))
            return parsed

        if kind == "filter":
            if not check(value, f"{path}.filter").error:
                found = filter_value_type(value, flow.type_of)
                if found:
                    issues.append(Issue(f"{path}.filter", f"is {found}, not a condition: a filter keeps the rows "
                                        "for which it is true (e.g. amount > 0, event = 'click')"))
        elif kind == "select":
            parsed = [check(item, f"{path}.select[{k}]", tuple(n for n in select_names(value[:k])[0] if n))
                      for k, item in enumerate(value)]
            names, star = select_names(value)
            for k, item in enumerate(parsed):
                if item.name is None and not item.star and not item.error:
                    issues.append(Issue(f"{path}.select[{k}]", f"{value[k]!r} needs a name: write 'expression AS name'"))
            metadata = {c for c in flow.columns or () if c.startswith("_")}  # key and timestamp travel along
            if any(n is None for n in names) or (star and flow.columns is None):
                columns = None
            else:
                columns = frozenset(set(names) | metadata | (set(flow.columns or ()) if star else set()))
            kept = [p.name for p in parsed if p.references == ((p.name,),)]  # bare column references
            keeps_time = star or (flow.event_time or "").startswith("_") or flow.event_time in kept
            types = dict(flow.types) if star else {c: t for c, t in flow.types if c.startswith("_")}
            types.update({p.name: flow.type_of(p.name) for p in parsed if p.name in kept})
            flow = replace(flow, columns=columns, event_time=flow.event_time if keeps_time else None,
                           watermark=flow.watermark and keeps_time, group_columns=None).with_types(types)
        elif kind == "withColumns":
            for k, (name, text) in enumerate(value.items()):
                check(text, f"{path}.withColumns.{name}", tuple(value)[:k])
            replaced_time = flow.event_time in value
            columns = None if flow.columns is None else flow.columns | set(value)
            flow = replace(flow, columns=columns, event_time=None if replaced_time else flow.event_time,
                           watermark=flow.watermark and not replaced_time).with_types(
                {c: t for c, t in flow.types if c not in value})
        elif kind == "explode":
            need(value.column, f"{path}.explode.column")
            column_type = flow.type_of(value.column)
            if column_type and not column_type.startswith(("array<", "map<")):
                issues.append(Issue(f"{path}.explode.column", f"column {value.column!r} is {column_type}: explode "
                                    "needs an array (or a map) column; split a string first, e.g. "
                                    "withColumns: {words: \"split(line, ' ')\"}"))
            if flow.columns is not None and value.as_:
                flow = replace(flow, columns=flow.columns | {value.as_})
            target = value.as_ or value.column
            flow = flow.with_types({**{c: t for c, t in flow.types if c != target},
                                    target: element_type(flow.type_of(value.column))})
        elif kind == "keyBy":
            check(value, f"{path}.keyBy")  # sets _key (again, or after an aggregate, anew)
            flow = replace(flow, columns=None if flow.columns is None else flow.columns | {"_key"})
        elif kind == "join":
            if value.table is not None:
                table = tables.get(value.table)
                need(value.key or "_key", f"{path}.join.key")
                if table is not None:
                    table_types = dict(_record_types(table))
                    merged = _merge_types(flow, {c: table_types.get(c, "") for c in table.value_columns()}, table.name)
                    flow = replace(flow, columns=_merge_columns(flow.columns, table.value_columns(), table.name))
                    flow = flow.with_types(merged)
                    lineage = lineage.merge(Lineage(tables=(table.name,)))
            else:
                other = flows.get(value.stream)
                if other is None:
                    continue
                for k, column in enumerate(value.using or []):
                    need(column, f"{path}.join.using[{k}]")
                    if not other.has(column):
                        issues.append(Issue(f"{path}.join.using[{k}]", other.missing(column, value.stream)))
                for side, side_flow in ((stream.name, flow), (value.stream, other)):
                    if not side_flow.watermark and side_flow.columns is not None:
                        issues.append(Issue(f"{path}.join.stream", f"a stream-stream join needs a watermark on both "
                                            f"sides; {side!r} has none (set watermark on its source)"))
                lineage = lineage.merge(lineages.get(value.stream, Lineage()))
                lineage = lineage.merge(Lineage(stream_joins=(f"{path}.join",)))
                merged = _merge_types(flow, dict(other.types), value.stream, tuple(value.using or ()))
                flow = replace(flow, columns=_merge_columns(flow.columns, other.columns, value.stream, tuple(value.using or ())),
                               watermark=flow.watermark and other.watermark, group_columns=None).with_types(merged)
        elif kind == "window":
            following = steps[j + 1].aggregate if j + 1 < len(steps) else None
            if following is None:
                issues.append(Issue(f"{path}.window", "a window must be followed directly by an aggregate step"))
            if flow.event_time is None and flow.columns is not None:
                issues.append(Issue(f"{path}.window", "no event-time column left (an earlier select or withColumns "
                                    "replaced it); keep it so windows can use it"))
        elif kind == "aggregate":
            window = steps[j - 1].window if j > 0 else None
            for k, column in enumerate(value.group_by):
                need(column, f"{path}.aggregate.groupBy[{k}]")
            for k, (name, text) in enumerate(value.columns.items()):
                check(text, f"{path}.aggregate.columns.{name}", tuple(value.columns)[:k])
            if window is not None and window.type == "session" and not value.group_by:
                issues.append(Issue(f"{path}.aggregate.groupBy", "a session window needs at least one groupBy "
                                    "column (sessions are per key)"))
            columns = set(value.group_by) | set(value.columns)
            if window is not None:
                columns |= {"window_start", "window_end"}
            lineage = lineage.merge(Lineage(aggregations=((f"{path}.aggregate", window is not None,
                                                           window is not None and flow.watermark),)))
            types = {c: flow.type_of(c) for c in value.group_by if c not in value.columns}
            if window is not None:
                types.update(window_start="timestamp", window_end="timestamp")
            flow = Flow(frozenset(columns), "window_end" if window is not None else None,
                        window is not None and flow.watermark,
                        tuple((["window_start"] if window is not None else []) + list(value.group_by))).with_types(types)
        elif kind == "accumulate":
            for k, column in enumerate(value.key):
                need(column, f"{path}.accumulate.key[{k}]")
            for name, text in value.columns.items():
                check(text, f"{path}.accumulate.columns.{name}")
            lineage = lineage.merge(Lineage(accumulates=(f"{path}.accumulate",)))
            columns = None if flow.columns is None else flow.columns | set(value.columns)
            flow = replace(flow, columns=columns, group_columns=None).with_types(
                {c: t for c, t in flow.types if c not in value.columns})
        elif kind == "dedupe":
            for k, column in enumerate(value.keys):
                need(column, f"{path}.dedupe.keys[{k}]")
            if not flow.watermark and flow.columns is not None:
                issues.append(Issue(f"{path}.dedupe", "dedupe needs a watermark on the stream's event time "
                                    "(set watermark on the source) so old keys can be forgotten"))
        elif kind == "sql":
            # what an sql step may do is checked with the step (rules.check_step)
            flow = Flow(None, flow.event_time, flow.watermark)  # Spark keeps the watermark through SQL
    if steps:
        after.append(flow)
    return flow, lineage.merge(Lineage(streams=(stream.name,))), issues, tuple(after)
