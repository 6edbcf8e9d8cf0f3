"""Per-key state for accumulate and table joins, kept by one of Spark's two Python state APIs.

A checkpoint's state can be read only by the API that wrote it: ``applyInPandasWithState`` hands each
key's rows of a batch to Python as a pandas frame, ``transformWithState`` (Spark 4.1+) as rows, and
their operators keep state in different layouts. New checkpoints take ``transformWithState``, which
runs accumulate faster: no pandas frame per key (the figure: docs/runtime.md, "Per-key state");
checkpoints written before keep ``applyInPandasWithState`` (run/settings.choose_state_function decides, the checkpoint records it).

Either way the step's logic is one pure fold: (the key's saved value or None, the key's rows of the
batch in processing order) -> (the value to save, or None to forget the key; the rows to emit).
Processing order is the ``order`` columns ascending, nulls first, then arrival. A ``ttl`` forgets a
key that was not saved for that long (processing time): a group timeout for the pandas API, the
state value's own TTL for the row-based one. Either needs a processing-time clock in the operator,
which the checkpoint fixes, so setting or removing a ttl is a state reset (streamapp_api.sources).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from pyspark.sql import DataFrame, Row
from pyspark.sql.group import GroupedData
from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.streaming.state import GroupStateTimeout

from streamapp_api import contract

ROW_BASED, PANDAS = contract.STATE_FUNCTIONS
Fold = Callable[[str | None, list[tuple]], tuple[str | None, list[tuple]]]


@dataclass(frozen=True)
class KeyedFold:
    fold: Fold
    columns: tuple[str, ...]  # the input columns the fold's row tuples hold, in order
    order: tuple[str, ...]  # processing order within a batch
    output: tuple[tuple[str, str], ...]  # (name, type) of the emitted tuples
    state: str  # the saved value's name; applyInPandasWithState's checkpoints have it as their schema
    ttl_ms: int | None = None

    def output_ddl(self) -> str:
        return ", ".join(f"{name} {kind}" for name, kind in self.output)


def keyed_fold(grouped: GroupedData, fold: KeyedFold, output_mode: str, api: str) -> DataFrame:
    """Run ``fold`` per key of ``grouped`` with the checkpoint's API; ``output_mode``: append or update."""
    if api == PANDAS:
        timeout = GroupStateTimeout.ProcessingTimeTimeout if fold.ttl_ms else GroupStateTimeout.NoTimeout
        return grouped.applyInPandasWithState(_pandas_step(fold), fold.output_ddl(), f"{fold.state} string",
                                              output_mode, timeout)
    if api != ROW_BASED:
        raise ValueError(f"{api!r} is not a state function: one of {', '.join(contract.STATE_FUNCTIONS)}")
    return grouped.transformWithState(_RowFold(fold), fold.output_ddl(), output_mode.capitalize(),
                                      "ProcessingTime" if fold.ttl_ms else "None")


def passes_watermark(fold: KeyedFold, api: str) -> bool:
    """Whether the state operator hands the query's watermark on: transformWithState does without a
    processing-time clock (no ttl); applyInPandasWithState and a clocked one do not (packing.rewatermark)."""
    return api == ROW_BASED and not fold.ttl_ms


def _plain(value):
    """A pandas/numpy scalar as plain Python (None for missing), as the row-based API hands values over."""
    if value is None:
        return None
    try:
        import pandas as pd

        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return value.item() if hasattr(value, "item") else value


def _pandas_step(fold: KeyedFold):
    import pandas as pd

    names = [name for name, _ in fold.output]

    def step(key, batches: Iterator["pd.DataFrame"], state) -> Iterator["pd.DataFrame"]:
        if state.hasTimedOut:
            state.remove()
            return
        frames = [b for b in batches if len(b)]
        if not frames:
            return
        rows = pd.concat(frames).sort_values(list(fold.order), kind="stable", na_position="first")
        tuples = list(zip(*[[_plain(v) for v in rows[c]] for c in fold.columns]))
        saved, out = fold.fold(state.get[0] if state.exists else None, tuples)
        if saved is None:
            state.remove()
        else:
            state.update((saved,))
            if fold.ttl_ms:
                state.setTimeoutDuration(fold.ttl_ms)
        if out:
            yield pd.DataFrame(out, columns=names)

    return step


class _RowFold(StatefulProcessor):
    """transformWithState's side: one key's rows of a batch, as Rows, through the fold."""

    def __init__(self, fold: KeyedFold):
        self.fold = fold
        self.out_row = Row(*[name for name, _ in fold.output])

    def init(self, handle) -> None:
        self.saved = handle.getValueState(self.fold.state, f"{self.fold.state} string", self.fold.ttl_ms)

    def handleInputRows(self, key, rows, timerValues):
        rows = list(rows)
        if not rows:
            return
        fields = rows[0].__fields__
        order = [fields.index(c) for c in self.fold.order]
        columns = [fields.index(c) for c in self.fold.columns]
        rows.sort(key=lambda r: tuple((r[i] is not None, r[i]) for i in order))  # stable: then arrival
        saved = self.saved.get()
        before = None if saved is None else saved[0]
        new, out = self.fold.fold(before, [tuple(r[i] for i in columns) for r in rows])
        # each state call is a round trip to the JVM: none when nothing changed, unless the save restarts a TTL
        if new is not None and (new != before or self.fold.ttl_ms):
            self.saved.update((new,))
        elif new is None and saved is not None:
            self.saved.clear()
        for values in out:
            yield self.out_row(*values)

    def close(self) -> None:
        pass
