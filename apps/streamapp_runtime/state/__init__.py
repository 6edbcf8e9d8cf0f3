"""Interactive queries: a stream's current aggregate state, read from its query's checkpoint.

Uses Spark's State Data Source (``state-metadata`` and ``statestore`` readers) on the checkpoint of a
sink query whose lineage computes the stream; the pipeline does not run and Kafka is not contacted.
The pure helpers (key parsing, choosing the checkpoint, decoding state rows) need no pyspark.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from streamapp_api import StreamApp, resolve

from streamapp_runtime import plan, spark_compat
from streamapp_runtime.checkpoint import files as checkpoint_files

AGGREGATE_OPERATORS = ("stateStoreSave", "sessionWindowStateStoreSaveExec")
WINDOW_FIELDS = ("window", "__window", "session_window")
# Aggregate functions whose only buffer is the final value (Sum of a non-decimal has just 'sum').
DIRECT_FUNCTIONS = {"Count": ("count",), "Sum": ("sum",), "Min": ("min",), "Max": ("max",)}


class StateError(ValueError):
    """A state query that cannot be answered; the message names the stream."""


@dataclass(frozen=True)
class Measure:
    """One aggregate column and the aggregation buffers Spark keeps for it in the state value."""

    column: str
    buffers: tuple[str, ...]
    direct: bool  # the column's value is its single buffer (count, sum of a non-decimal, min, max)


@dataclass(frozen=True)
class Target:
    """Where a stream's aggregate state lives."""

    stream: str
    group_by: tuple[str, ...]
    windowed: bool
    columns: tuple[str, ...]  # the aggregate columns, in spec order
    query: str
    checkpoint: str
    batch_id: int


def parse_keys(items: list[str], group_by: tuple[str, ...], stream: str) -> dict[str, str]:
    """``['session_id=s-17']`` -> ``{'session_id': 's-17'}``; only the stream's groupBy columns."""
    keys: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise StateError(f"--key {item!r}: expected column=value")
        if name not in group_by:
            known = ", ".join(group_by) or "none: the stream aggregates everything into one group"
            raise StateError(f"--key {name}: not a groupBy column of stream {stream!r} (groupBy columns: {known})")
        if name in keys and keys[name] != value:
            raise StateError(f"--key {name}: given twice with different values")
        keys[name] = value
    return keys


def aggregate_step(app: StreamApp, stream: str):
    """(window or None, aggregate) of the stream's last aggregate step; a clear error otherwise."""
    items = plan.by_name(app)
    streams = [s.name for s in app.spec.streams]
    if stream not in streams:
        raise StateError(f"stream {stream!r}: {app.metadata.name!r} has no such stream "
                         f"(streams: {', '.join(streams) or 'none'})")
    steps = items[stream].steps
    for i in range(len(steps) - 1, -1, -1):
        if steps[i].aggregate is not None:
            window = steps[i - 1].window if i > 0 else None
            return window, steps[i].aggregate
    kinds = ", ".join(s.kind for s in steps) or "no steps"
    raise StateError(f"stream {stream!r} keeps no aggregate state (steps: {kinds}); "
                     f"only streams with an aggregate step can be queried")


def last_commit(checkpoint: str) -> int | None:
    ids = [int(name) for name in checkpoint_files.names(checkpoint_files.join(checkpoint, "commits")) if name.isdigit()]
    return max(ids) if ids else None


def find_target(app: StreamApp, checkpoint_root: str, stream: str) -> Target:
    """The first sink query computing ``stream`` whose checkpoint has a committed batch."""
    window, agg = aggregate_step(app, stream)
    resolved = resolve(app)
    candidates = [qp for console in (False, True) for qp in plan.query_plans(app, checkpoint_root, console)
                  if qp.kind != "dlq" and stream in resolved.lineage(qp.reads).streams]
    if not candidates:
        raise StateError(f"stream {stream!r}: no sink reads it (directly or through other streams), "
                         f"so no query keeps its state")
    for qp in candidates:
        batch = last_commit(qp.checkpoint)
        if batch is not None:
            return Target(stream, tuple(agg.group_by), window is not None, tuple(agg.columns), qp.name,
                          qp.checkpoint, batch)
    tried = ", ".join(qp.checkpoint for qp in candidates[: len(candidates) // 2])  # the --console ones follow
    raise StateError(f"stream {stream!r}: no committed batch yet in {tried} (run the app first)")


def measures_from_buffers(columns: tuple[str, ...], functions: list[tuple[str, str, tuple[str, ...]]]) -> list[Measure]:
    """Measures from (column, top-level function class or '', buffer names) found in the plan."""
    return [Measure(col, bufs, fn in DIRECT_FUNCTIONS and bufs == DIRECT_FUNCTIONS[fn]) for col, fn, bufs in functions
            if col in columns]


def _timestamp(value):
    if isinstance(value, datetime):
        # pyspark hands out naive local times; state rows are shown in UTC, as the sinks write them.
        moment = value.astimezone(timezone.utc)  # a naive time is taken as local, as pyspark made it
        return moment.isoformat().replace("+00:00", "Z")
    return value


def _window(value) -> tuple:
    start, end = (value["start"], value["end"]) if isinstance(value, dict) else tuple(value)
    return _timestamp(start), _timestamp(end)


def decode_row(key_fields: list[str], key: tuple, value_fields: list[str], value: tuple,
               group_by: tuple[str, ...], measures: list[Measure] | None) -> dict:
    """One state row -> {group columns, window_start/window_end, measures or their buffers}.

    ``key``/``value`` are positional (Spark's buffer names repeat: avg and count both have 'count').
    A direct measure shows its value under the column name; others show each buffer as
    ``column.buffer``. When the plan's buffers (names, in order) do not match the state's (the plan could
    not be read, or the manifest changed since the checkpoint was written) buffers show as ``buffer<i>.<name>``.
    """
    out: dict = {}
    window = None
    for name, item in zip(key_fields, key):
        if name in WINDOW_FIELDS:
            window = _window(item)
        elif name in group_by:
            out[name] = _timestamp(item)
    rest: list[tuple[str, object]] = []
    for name, item in zip(value_fields, value):
        if name in WINDOW_FIELDS:
            window = _window(item)  # session windows: the merged session, not just its start
        elif name in group_by and name not in out:
            out[name] = _timestamp(item)
        elif name not in group_by:
            rest.append((name, item))
    if window is not None:
        out["window_start"], out["window_end"] = window
    planned = [b for m in measures or [] for b in m.buffers]
    if measures and planned == [name for name, _ in rest] and all(m.buffers for m in measures):
        position = 0
        for m in measures:
            chunk = rest[position:position + len(m.buffers)]
            position += len(m.buffers)
            if m.direct:
                out[m.column] = _timestamp(chunk[0][1])
            else:
                for (name, item) in chunk:
                    out[f"{m.column}.{name}"] = _timestamp(item)
    else:
        for i, (name, item) in enumerate(rest):
            out[f"buffer{i}.{name}"] = _timestamp(item)
    return out


def output_columns(rows: list[dict], target: Target) -> list[str]:
    first = [*target.group_by, *(["window_start", "window_end"] if target.windowed else [])]
    rest = [c for row in rows for c in row if c not in first]
    return first + list(dict.fromkeys(rest))


def format_table(rows: list[dict], columns: list[str]) -> str:
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    line = lambda values: "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()
    return "\n".join([line(columns), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def plan_measures(df, columns: tuple[str, ...]) -> list[Measure] | None:
    """Buffers per aggregate column from the analyzed plan of the stream's DataFrame (not started);
    None when the plan has an unexpected shape (Spark's buffer names are shown instead)."""
    found = spark_compat.aggregate_buffers(df)
    return None if found is None else measures_from_buffers(columns, found)


def read_state(spark, app: StreamApp, target: Target, keys: dict[str, str], kafka_options: dict[str, str]) -> list[dict]:
    from pyspark.sql import functions as F

    from streamapp_runtime.compile.compiler import Compiler

    path = target.checkpoint
    meta = spark.read.format("state-metadata").load(path).collect()
    operators = [m for m in meta if m["operatorName"] in AGGREGATE_OPERATORS]
    if not operators:
        names = ", ".join(sorted({m["operatorName"] for m in meta})) or "none"
        raise StateError(f"stream {target.stream!r}: the checkpoint of query {target.query!r} has no aggregation "
                         f"state (stateful operators: {names})")

    def reader(op):
        return (spark.read.format("statestore").option("path", path).option("operatorId", int(op["operatorId"]))
                .option("storeName", op["stateStoreName"]).option("batchId", target.batch_id).load())

    chosen = None
    for op in operators:  # the operator whose key holds exactly the stream's groupBy (plus the window)
        df = reader(op)
        fields = [f.name for f in df.schema["key"].dataType.fields]
        groups = {f for f in fields if f not in WINDOW_FIELDS and f != "sessionStartTime"}
        if groups == set(target.group_by):
            chosen = df
    if chosen is None:
        raise StateError(f"stream {target.stream!r}: no aggregation state in query {target.query!r} is grouped by "
                         f"{list(target.group_by)}")
    for name, value in keys.items():
        chosen = chosen.where(F.col(f"key.{name}").cast("string") == F.lit(value))
    try:
        measures = plan_measures(Compiler(spark, app, kafka_options).frame(target.stream).df, target.columns)
    except Exception:
        measures = None
    key_fields = [f.name for f in chosen.schema["key"].dataType.fields]
    value_fields = [f.name for f in chosen.schema["value"].dataType.fields]
    rows = [decode_row(key_fields, tuple(r["key"]), value_fields, tuple(r["value"]), target.group_by, measures)
            for r in chosen.select("key", "value").collect()]
    order = [*target.group_by, "window_start"]
    return sorted(rows, key=lambda r: tuple("" if r.get(c) is None else str(r.get(c)) for c in order))
