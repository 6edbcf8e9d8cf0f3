"""How many executors an app should run, and when a change of that number is acted on."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from streamapp_api import StreamApp, StreamAppSpec, realtime

from ..world import Kafka
from ..scaling_memory import PendingScale


def desired_executors(partitions: int | None, spec: StreamAppSpec) -> int | None:
    """spec.executors when set, else clamp(ceil(partitions / executor cores), min, max).

    None when the count depends on partitions that could not be read.
    """
    if spec.executors is not None:
        return spec.executors
    if partitions is None:
        return None
    wanted = math.ceil(partitions / spec.executor.cores)
    low, high = spec.scaling.min_executors, spec.scaling.max_executors
    wanted = max(wanted, low)
    if high is not None:
        wanted = min(wanted, high)
    return wanted


def tasks_to_cover(kafka: Kafka, app: StreamApp) -> tuple[int | None, str]:
    """What the executors' cores should cover, and in words: the source partitions, or in real-time
    mode the task slots its queries hold at once (every partition of every query). None: unknown."""
    if kafka.partitions is None or kafka.missing_topics:
        return None, f"{kafka.partitions} partitions"
    if app.spec.realtime:
        slots = realtime.task_slots(app, dict(kafka.by_topic))
        return slots, f"{slots} task slots of real-time queries ({kafka.partitions} partitions, each per query)"
    return kafka.partitions, f"{kafka.partitions} partitions"


@dataclass(frozen=True)
class ScaleVerdict:
    executors: int  # what to run now
    pending: PendingScale | None  # what is waiting out the debounce window
    wait: timedelta | None = None  # when to look again


def debounce(current: int | None, desired: int | None, pending: PendingScale | None, now: datetime,
             window: timedelta, explicit: bool) -> ScaleVerdict:
    """Act on a new partition-driven count only once it has held for ``window``.

    ``current`` is what the driver runs (None: no driver yet, act at once); ``explicit`` means the
    user set spec.executors, which is acted on at once. Unknown ``desired`` keeps ``current``.
    """
    if desired is None:
        return ScaleVerdict(current or 0, None)
    if current is None or explicit or desired == current:
        return ScaleVerdict(desired, None)
    if pending is None or pending.executors != desired:
        return ScaleVerdict(current, PendingScale(desired, now), window)
    held = now - pending.since
    if held >= window:
        return ScaleVerdict(desired, None)
    return ScaleVerdict(current, pending, window - held)
