"""accumulate: running values per key, carried across records, batches and restarts.

Each input row comes out with the key's running values (this row included). The values live in the
state store (applyInPandasWithState); rows of one key within a batch are folded in event-time, then
offset, order. Nulls are skipped, as SQL aggregates skip them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Iterator

from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout
from pyspark.sql.types import BooleanType, DataType, DecimalType, FractionalType, IntegralType

from streamapp_api import Accumulate
from streamapp_api.steps import ACCUMULATE_FUNCTIONS
from streamapp_api.durations import parse_duration

from streamapp_runtime.compile.frame import Frame, StepError
from streamapp_runtime.compile.steps.packing import ORDER_OFFSET, ORDER_TIME, PAYLOAD, order_columns, pack, rewatermark, unpack

_CALL = re.compile(r"^\s*(" + "|".join(ACCUMULATE_FUNCTIONS) + r")\s*\((.+)\)\s*$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Running:
    """One running value: output name, function, the argument expression."""

    name: str
    fn: str
    arg: str


def parse_columns(columns: dict[str, str], where: str) -> list[Running]:
    """``{'total': 'sum(points)'}`` -> [Running('total', 'sum', 'points')]. Pure."""
    out = []
    for name, text in columns.items():
        match = _CALL.match(text)
        if match is None:
            raise StepError(f"{where}.accumulate.columns.{name}: {text!r} is not one of sum(expr), count(expr), "
                             "min(expr), max(expr), avg(expr), first(expr), last(expr)")
        out.append(Running(name, match.group(1).lower(), match.group(2).strip()))
    return out


def carrier_type(fn: str, arg_type: DataType) -> str:
    """The type a running value travels in through Python: long, double, boolean or string. Pure."""
    if fn == "count":
        return "long"
    if fn == "avg":
        return "double"
    if isinstance(arg_type, IntegralType):
        return "long"
    if isinstance(arg_type, (FractionalType, DecimalType)):
        return "double"
    if isinstance(arg_type, BooleanType) and fn in ("first", "last", "min", "max"):
        return "boolean"
    if fn == "sum":
        return "double"
    return "string"


def fold(fn: str, running, value):
    """One step of a running aggregate. avg keeps [sum, count]. Pure."""
    if value is None:
        return running
    if fn == "sum":
        return value if running is None else running + value
    if fn == "count":
        return (running or 0) + 1
    if fn == "min":
        return value if running is None or value < running else running
    if fn == "max":
        return value if running is None or value > running else running
    if fn == "avg":
        total, n = running or (0.0, 0)
        return [total + value, n + 1]
    if fn == "first":
        return value if running is None else running
    return value  # last


def result(fn: str, running):
    if fn == "avg":
        return None if not running else running[0] / running[1]
    if fn == "count":
        return running or 0
    return running


def _python(value):
    """pandas/numpy scalars -> plain Python (None for missing)."""
    if value is None:
        return None
    try:
        import pandas as pd

        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return value.item() if hasattr(value, "item") else value


def _state_fn(runnings: list[Running], ttl_ms: int | None):
    import pandas as pd

    def step(key, batches: Iterator["pd.DataFrame"], state) -> Iterator["pd.DataFrame"]:
        if state.hasTimedOut:
            state.remove()
            return
        values = json.loads(state.get[0]) if state.exists else {}
        frames = [b for b in batches if len(b)]
        if not frames:
            return
        rows = pd.concat(frames).sort_values([ORDER_TIME, ORDER_OFFSET], kind="stable", na_position="first")
        out = {PAYLOAD: list(rows[PAYLOAD])}
        columns = {r.name: [] for r in runnings}
        for i in range(len(rows)):
            for k, r in enumerate(runnings):
                values[r.name] = fold(r.fn, values.get(r.name), _python(rows[f"__a{k}"].iat[i]))
                columns[r.name].append(result(r.fn, values.get(r.name)))
        for k, r in enumerate(runnings):
            out[f"__a{k}"] = columns[r.name]
        state.update((json.dumps(values),))
        if ttl_ms:
            state.setTimeoutDuration(ttl_ms)
        yield pd.DataFrame(out)

    return step


def _carried(r: Running, carrier: str):
    """The argument as it travels to Python; count only needs to know whether it is null."""
    if r.fn == "count":
        return F.when(F.expr(r.arg).isNotNull(), F.lit(1)).cast("long")
    return F.expr(r.arg).cast(carrier)


def accumulate(frame: Frame, value: Accumulate, emit: str, where: str) -> Frame:
    df = frame.df
    runnings = parse_columns(value.columns, where)
    for k, column in enumerate(value.key):
        if column not in df.columns:
            raise StepError(f"{where}.accumulate.key[{k}]: column {column!r} is not in the stream")
    args = df.select(*[F.expr(r.arg).alias(f"__a{k}") for k, r in enumerate(runnings)]).schema
    carriers = [carrier_type(r.fn, args[k].dataType) for k, r in enumerate(runnings)]
    inputs = df.select(
        *[F.col(c).alias(f"__k{k}") for k, c in enumerate(value.key)], *order_columns(frame), pack(df),
        *[_carried(r, carriers[k]).alias(f"__a{k}") for k, r in enumerate(runnings)],
    )
    ttl_ms = int(parse_duration(value.ttl).total_seconds() * 1000) if value.ttl else None
    out_ddl = ", ".join([f"{PAYLOAD} string"] + [f"__a{k} {t}" for k, t in enumerate(carriers)])
    mode = "append" if emit == "final" else "update"
    done = inputs.groupBy(*[f"__k{k}" for k in range(len(value.key))]).applyInPandasWithState(
        _state_fn(runnings, ttl_ms), out_ddl, "values string", mode,
        GroupStateTimeout.ProcessingTimeTimeout if ttl_ms else GroupStateTimeout.NoTimeout,
    )
    restored = []
    for k, r in enumerate(runnings):
        column = F.col(f"__a{k}")
        if carriers[k] == "string" or r.fn in ("min", "max", "first", "last"):
            column = column.cast(args[k].dataType)
        restored.append(column.alias(r.name))
    kept = [c for c, f in zip(unpack(done, df.schema), df.schema.fields) if f.name not in value.columns]
    out = done.select(*kept, *restored)
    return rewatermark(frame, out)
