"""Stream-stream join (KStream-KStream): equal ``using`` columns, event times at most ``within`` apart.

Spark keeps both sides in state until the watermark passes the time bound; a left join emits a record
without a match once the bound has passed (append mode only).
"""

from __future__ import annotations

from pyspark.sql import functions as F

from streamapp_api import Join
from streamapp_api.durations import spark_interval

from streamapp_runtime.compile.frame import Frame, StepError

OTHER_TIME = "__other_time"


def renamed_columns(left: list[str], right: list[str], using: list[str], prefix: str) -> dict[str, str]:
    """Right-side column -> output name: metadata dropped, clashes become '<stream>_<column>'. Pure."""
    out = {}
    for column in right:
        if column in using or column.startswith("_"):
            continue
        out[column] = f"{prefix}_{column}" if column in left else column
    return out


def stream_join(frame: Frame, other: Frame, join: Join, where: str) -> Frame:
    for side in (frame, other):
        if side.watermark is None or side.event_time is None:
            raise StepError(f"{where}.join.stream: a stream-stream join needs a watermark on both sides; "
                             f"{side.name!r} has none (set watermark on its source)")
    using = list(join.using or [])
    mapping = renamed_columns(frame.columns(), other.columns(), using, join.stream.replace("-", "_"))
    # One event-time column per side: the other side's own, under its output name, when it is kept.
    bound_column = mapping.get(other.event_time, OTHER_TIME)
    extra = [] if other.event_time in mapping else [F.col(other.event_time).alias(OTHER_TIME)]
    right = other.df.select(
        *[F.col(c).alias(f"__r_{c}") for c in using],
        *[F.col(c).alias(n) for c, n in mapping.items()],
        *extra,
    )
    bound = spark_interval(join.within)
    condition = [F.col(c) == F.col(f"__r_{c}") for c in using]
    mine = F.col(frame.event_time)
    condition.append(F.col(bound_column).between(mine - F.expr(f"INTERVAL {bound}"), mine + F.expr(f"INTERVAL {bound}")))
    cond = condition[0]
    for c in condition[1:]:
        cond = cond & c
    joined = frame.df.join(right, cond, "inner" if join.type == "inner" else "leftouter")
    joined = joined.drop(*[f"__r_{c}" for c in using])
    if extra:
        joined = joined.drop(OTHER_TIME)
    return frame.with_df(joined)
