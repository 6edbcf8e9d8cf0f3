"""Steps: each takes a Frame and returns a Frame. ``apply_steps`` runs a stream's steps in order."""

from __future__ import annotations

import difflib
import re

from streamapp_api.spec import Stream

from streamapp_runtime.compile.frame import Frame, FrameSource, StepError
from streamapp_runtime.compile.steps import stateless
from streamapp_runtime.compile.steps.accumulate import accumulate
from streamapp_runtime.compile.steps.dedupe import dedupe
from streamapp_runtime.compile.steps.joins import stream_join
from streamapp_runtime.compile.steps.windows import aggregate

__all__ = ["StepError", "apply_steps", "refusal"]  # StepError lives in frame.py, which steps and compiler share


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


def apply_steps(compiler: FrameSource, stream: Stream, path: str, frame: Frame) -> Frame:
    steps = stream.steps
    resolved = compiler.resolved.steps.get(stream.name, ())  # the API's flow after each step
    j = 0
    while j < len(steps):
        step = steps[j]
        where = f"{path}.steps[{j}]"
        kind, value = step.kind, step.value
        try:
            if kind == "window":
                if j + 1 >= len(steps) or steps[j + 1].aggregate is None:
                    raise StepError(f"{where}.window: a window must be followed directly by an aggregate step")
                # What Spark refuses here is the aggregate's (the window itself is checked by us).
                where, kind, value = f"{path}.steps[{j + 1}]", "aggregate", steps[j + 1].aggregate
                frame = aggregate(frame, step.value, value, f"{path}.steps[{j}]")
                j += 2
                continue
            if kind == "aggregate":
                frame = aggregate(frame, None, value, where)
            elif kind == "join" and value.table is not None:
                frame = compiler.table_join(frame, value, where)
            elif kind == "join":
                frame = stream_join(frame, compiler.frame(value.stream), value, where)
            elif kind == "accumulate":
                frame = accumulate(frame, value, compiler.emit_of(stream.name), where, compiler.state_function)
            elif kind == "dedupe":
                frame = dedupe(frame, value, where)
            else:
                keeps_time = resolved[j].event_time is not None if j < len(resolved) else True
                frame = stateless.apply(compiler.spark, frame, kind, value, where, keeps_time)
        except StepError:  # our own checks, already with their path
            raise
        except Exception as exc:  # AnalysisException and friends: Spark refused it; say which step
            message = str(exc).split("\n")[0]
            functions = builtin_functions(compiler.spark) if UNKNOWN_FUNCTION.search(message) else []
            raise StepError(refusal(message, where, kind, value, functions)) from exc
        j += 1
    return frame
