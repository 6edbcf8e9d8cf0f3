"""Event-time windows as Spark window expressions. Pure helpers plus the column builder."""

from __future__ import annotations

from streamapp_api import Window
from streamapp_api.durations import spark_interval


def window_args(window: Window) -> tuple[str, tuple[str, ...]]:
    """('window', (size, slide)) or ('session_window', (gap,)) with Spark interval strings."""
    if window.type == "tumbling":
        return "window", (spark_interval(window.size),)
    if window.type == "hopping":
        return "window", (spark_interval(window.size), spark_interval(window.advance))
    return "session_window", (spark_interval(window.gap),)


def window_column(window: Window, event_time: str):
    from pyspark.sql import functions as F

    fn, args = window_args(window)
    return getattr(F, fn)(F.col(event_time), *args)
