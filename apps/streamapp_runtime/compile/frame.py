"""A DataFrame together with what the compiler knows about it: its event time and watermark."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

from pyspark.sql import DataFrame

# Columns the runtime adds for its own use; never written to a sink.
INTERNAL_PREFIX = "__"


@dataclass(frozen=True)
class Frame:
    df: DataFrame
    event_time: str | None  # column holding the event time, when it is still there
    watermark: str | None  # the source's watermark delay (a spec duration), when one applies
    name: str

    def with_df(self, df: DataFrame, **changes) -> "Frame":
        return replace(self, df=df, **changes)

    def columns(self) -> list[str]:
        return list(self.df.columns)


class StepError(ValueError):
    """A step that cannot be compiled; the message starts with the step's path in the spec."""


class FrameSource(Protocol):
    """What a step may ask of the compiler: another stream's frame, a table joined in, the emit mode
    of a stream's query, the API's resolution, the session, the app and its Kafka readers' options
    (compiler.Compiler is the one there is)."""

    spark: Any
    app: Any  # streamapp_api.StreamApp
    kafka_options: dict[str, str]
    resolved: Any  # streamapp_api.Resolved
    state_function: str  # the checkpoint's Python state API (compile/steps/keyed_state.py)

    def frame(self, name: str) -> "Frame": ...

    def table_join(self, frame: "Frame", join: Any, where: str) -> "Frame": ...

    def emit_of(self, name: str) -> str: ...


def value_columns(columns: list[str]) -> list[str]:
    """Columns written into sink values: everything but metadata (_...) and internal (__...)."""
    return [c for c in columns if not c.startswith("_")]
