"""Steps: each takes a Frame and returns a Frame. ``apply_steps`` runs a stream's steps in order."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamapp_api.spec import Stream

from ..frame import Frame
from . import stateless
from .accumulate import accumulate
from .dedupe import dedupe
from .joins import stream_join
from .windows import aggregate

if TYPE_CHECKING:
    from ..compiler import Compiler


class StepError(ValueError):
    """A step Spark refused; the message names the step's path in the spec."""


def apply_steps(compiler: "Compiler", stream: Stream, path: str, frame: Frame) -> Frame:
    steps = stream.steps
    j = 0
    while j < len(steps):
        step = steps[j]
        where = f"{path}.steps[{j}]"
        kind, value = step.kind, step.value
        try:
            if kind == "window":
                if j + 1 >= len(steps) or steps[j + 1].aggregate is None:
                    raise StepError(f"{where}.window: a window must be followed directly by an aggregate step")
                frame = aggregate(frame, value, steps[j + 1].aggregate, where)
                j += 2
                continue
            if kind == "aggregate":
                frame = aggregate(frame, None, value, where)
            elif kind == "join" and value.table is not None:
                frame = compiler.table_join(frame, value, where)
            elif kind == "join":
                frame = stream_join(frame, compiler.frame(value.stream), value, where)
            elif kind == "accumulate":
                frame = accumulate(frame, value, compiler.emit_of(stream.name), where)
            elif kind == "dedupe":
                frame = dedupe(frame, value, where)
            else:
                frame = stateless.apply(compiler.spark, frame, kind, value, where)
        except StepError:
            raise
        except Exception as exc:  # AnalysisException and friends: say which step
            message = str(exc).split("\n")[0]
            raise StepError(f"{where}.{kind}: Spark refused it: {message}") from exc
        j += 1
    return frame
