"""accumulate: running values per key, carried across records, batches and restarts.

Each input row comes out with the key's running values (this row included). The values live in the
state store (keyed_state: transformWithState, or applyInPandasWithState on older checkpoints); rows of
one key within a batch are folded in event-time, then offset, order. Nulls are skipped, as SQL
aggregates skip them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DataType, DecimalType, FractionalType, IntegralType

from streamapp_api import Accumulate
from streamapp_api.steps import ACCUMULATE_FUNCTIONS
from streamapp_api.durations import parse_duration

from streamapp_runtime.compile.frame import Frame, StepError
from streamapp_runtime.compile.steps.keyed_state import KeyedFold, keyed_fold, passes_watermark
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


@dataclass(frozen=True)
class RunningValues:
    """accumulate's fold (keyed_state.Fold): the key's running values, saved as JSON, carried through
    its rows (payload, argument values...) in order; each row comes out with the values after it. Pure."""

    runnings: tuple[Running, ...]

    def __call__(self, saved: str | None, rows: list[tuple]) -> tuple[str, list[tuple]]:
        values = json.loads(saved) if saved is not None else {}
        out = []
        for payload, *args in rows:
            after = []
            for r, value in zip(self.runnings, args):
                values[r.name] = fold(r.fn, values.get(r.name), value)
                after.append(result(r.fn, values[r.name]))
            out.append((payload, *after))
        return json.dumps(values), out


def _carried(r: Running, carrier: str):
    """The argument as it travels to Python; count only needs to know whether it is null."""
    if r.fn == "count":
        return F.when(F.expr(r.arg).isNotNull(), F.lit(1)).cast("long")
    return F.expr(r.arg).cast(carrier)


def accumulate(frame: Frame, value: Accumulate, emit: str, where: str, state_function: str) -> Frame:
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
    arguments = [f"__a{k}" for k in range(len(runnings))]
    running = KeyedFold(RunningValues(tuple(runnings)), (PAYLOAD, *arguments), (ORDER_TIME, ORDER_OFFSET),
                        ((PAYLOAD, "string"), *zip(arguments, carriers)), "values", ttl_ms)
    mode = "append" if emit == "final" else "update"
    grouped = inputs.groupBy(*[f"__k{k}" for k in range(len(value.key))])
    done = keyed_fold(grouped, running, mode, state_function)
    restored = []
    for k, r in enumerate(runnings):
        column = F.col(f"__a{k}")
        if carriers[k] == "string" or r.fn in ("min", "max", "first", "last"):
            column = column.cast(args[k].dataType)
        restored.append(column.alias(r.name))
    kept = [c for c, f in zip(unpack(done, df.schema), df.schema.fields) if f.name not in value.columns]
    out = done.select(*kept, *restored)
    return rewatermark(frame, out, passes_watermark(running, state_function))
