"""aggregate, optionally over a window step: tumbling, hopping (a record in several windows), session.

A windowed aggregate's rows carry the window's last instant (Spark's ``window_time``: window end minus
one microsecond) as their event time, with the watermark Spark attached to the window. A later window
step groups those rows by it, which Spark runs as chained stateful operators in append mode: each
earlier window lands whole in the later window that contains its end.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from streamapp_api import Aggregate, Window

from streamapp_runtime.compile.frame import Frame, StepError
from streamapp_runtime.compile.steps.window_column import window_column

# Internal column (never written to a sink): the event time of a windowed aggregate's rows.
WINDOW_TIME = "__window_time"


def aggregate(frame: Frame, window: Window | None, agg: Aggregate, where: str) -> Frame:
    df = frame.df
    measures = [F.expr(expr).alias(name) for name, expr in agg.columns.items()]
    groups = [F.col(c) for c in agg.group_by]
    if window is None:
        out = df.groupBy(*groups).agg(*measures)
        return frame.with_df(out, event_time=None)
    if frame.event_time is None or frame.event_time not in df.columns:
        raise StepError(f"{where}.window: no event-time column left (an earlier step dropped or replaced "
                          f"{frame.event_time or 'it'}); keep it so windows can use it")
    grouped = df.groupBy(window_column(window, frame.event_time).alias("__window"), *groups).agg(*measures)
    out = grouped.select(
        F.col("__window.start").alias("window_start"),
        F.col("__window.end").alias("window_end"),
        *agg.group_by,
        *agg.columns,
        F.window_time(F.col("__window")).alias(WINDOW_TIME),
    )
    return frame.with_df(out, event_time=WINDOW_TIME)
