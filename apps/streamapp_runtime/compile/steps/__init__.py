"""Steps: each takes a Frame and returns a Frame. ``STEP_COMPILERS`` compiles a step of each key;
``apply_steps`` runs a stream's steps in order."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamapp_api.spec import Stream

from streamapp_runtime.compile.frame import Frame, FrameSource, StepError
from streamapp_runtime.compile.steps import stateless
from streamapp_runtime.compile.steps.accumulate import accumulate
from streamapp_runtime.compile.steps.dedupe import dedupe
from streamapp_runtime.compile.steps.joins import stream_join
from streamapp_runtime.compile.steps.python_function import python_step
from streamapp_runtime.compile.user_code import dead_letters_of
from streamapp_runtime.compile.steps.windows import aggregate

__all__ = ["STEP_COMPILERS", "StepError", "apply_steps", "refusal"]  # StepError lives in frame.py, which steps and compiler share


UNKNOWN_FUNCTION = re.compile(r"UNRESOLVED_ROUTINE\] Cannot resolve routine `([^`]+)`")
_functions: dict[int, list[str]] = {}  # id(spark session) -> Spark's built-in function names


def builtin_functions(spark) -> list[str]:
    if id(spark) not in _functions:
        _functions[id(spark)] = [row[0] for row in spark.sql("SHOW SYSTEM FUNCTIONS").collect()]
    return _functions[id(spark)]


def refusal(message: str, where: str, kind: str, value, functions: list[str]) -> str:
    """What to tell the user when Spark refused a step: an unknown function is named, with the column
    whose expression calls it and the closest built-in names; anything else quotes Spark. Pure."""
    found = UNKNOWN_FUNCTION.search(message)
    if not found:
        return f"{where}.{kind}: Spark refused it: {message}"
    name = found.group(1)
    columns = getattr(value, "columns", None)
    calling = [c for c, text in (columns or {}).items()
               if re.search(rf"(?<![\w.]){re.escape(name)}\s*\(", str(text), re.IGNORECASE)]
    at = f"{where}.{kind}.columns.{calling[0]}" if isinstance(columns, dict) and calling else f"{where}.{kind}"
    close = difflib.get_close_matches(name.lower(), functions, n=3, cutoff=0.5)
    named = [f"{c}()" for c in close]
    hint = f"; did you mean {' or '.join([', '.join(named[:-1]), named[-1]] if len(named) > 1 else named)}?" if close else ""
    return f"{at}: {name}() is not a Spark SQL function{hint}"


@dataclass(frozen=True)
class StepAt:
    """One step of a stream being compiled: what it may ask the compiler, and where it is in the spec."""

    compiler: FrameSource
    stream: Stream
    path: str  # the stream's path in the spec
    index: int

    @property
    def where(self) -> str:
        return f"{self.path}.steps[{self.index}]"

    @property
    def value(self) -> Any:
        return self.stream.steps[self.index].value

    @property
    def keeps_time(self) -> bool:
        """Whether the event time survives this step, as the API resolved it."""
        resolved = self.compiler.resolved.steps.get(self.stream.name, ())  # the API's flow after each step
        return resolved[self.index].event_time is not None if self.index < len(resolved) else True


def _python(at: StepAt, frame: Frame) -> Frame:
    app = at.compiler.app
    config_maps = list(app.spec.user_code.config_maps) if app.spec.user_code is not None else []
    return python_step(frame, at.value, at.where, config_maps,
                       dead_letters_of(at.compiler.spark, app, at.compiler.kafka_options, at.where,
                                       (("streamapp.stream", at.stream.name), ("streamapp.step", at.where)),
                                       at.compiler.dead_letter_counters))


def _aggregate(at: StepAt, frame: Frame) -> Frame:
    """Over the windows of the window step just before it, if there is one."""
    window = at.stream.steps[at.index - 1].window if at.index else None
    if window is None:
        return aggregate(frame, None, at.value, at.where)
    return aggregate(frame, window, at.value, f"{at.path}.steps[{at.index - 1}]")


def _join(at: StepAt, frame: Frame) -> Frame:
    join = at.value
    if join.table is not None:
        return at.compiler.table_join(frame, join, at.where)
    return stream_join(frame, at.compiler.frame(join.stream), join, at.where)


StepCompiler = Callable[[StepAt, Frame], Frame]

# Per step key (streamapp_api.steps.STEP_KEYS), how the step is compiled; the API's flow.STEP_FLOW has
# a row for each key too (tests/unit/test_step_tables.py).
STEP_COMPILERS: dict[str, StepCompiler] = {
    "filter": lambda at, frame: stateless.filter_rows(frame, at.value),
    "select": lambda at, frame: stateless.select(frame, at.value, at.keeps_time),
    "withColumns": lambda at, frame: stateless.with_columns(frame, at.value, at.keeps_time),
    "explode": lambda at, frame: stateless.explode(frame, at.value),
    "keyBy": lambda at, frame: stateless.key_by(frame, at.value),
    "join": _join,
    # Compiled with the aggregate after it; the API refuses a window without one (streamapp_api.flow).
    "window": lambda at, frame: frame,
    "aggregate": _aggregate,
    "accumulate": lambda at, frame: accumulate(frame, at.value, at.compiler.emit_of(at.stream.name), at.where,
                                               at.compiler.state_function),
    "dedupe": lambda at, frame: dedupe(frame, at.value, at.where),
    "sql": lambda at, frame: stateless.sql(at.compiler.spark, frame, at.value, at.keeps_time),
    "python": _python,
}


def apply_steps(compiler: FrameSource, stream: Stream, path: str, frame: Frame) -> Frame:
    """The stream's steps applied in order to ``frame``. The stream comes checked by the API
    (streamapp_api.load): a window step, for one, is always followed by an aggregate."""
    for j, step in enumerate(stream.steps):
        at = StepAt(compiler, stream, path, j)
        compile_step = STEP_COMPILERS[step.kind]
        try:
            frame = compile_step(at, frame)
        except StepError:  # our own checks, already with their path
            raise
        except Exception as exc:  # AnalysisException and friends: Spark refused it; say which step
            message = str(exc).split("\n")[0]
            functions = builtin_functions(compiler.spark) if UNKNOWN_FUNCTION.search(message) else []
            raise StepError(refusal(message, at.where, step.kind, step.value, functions)) from exc
    return frame
