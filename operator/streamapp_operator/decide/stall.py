"""Whether a running driver has stalled: a query with records waiting has committed no batch for too long.

Flink's checkpoint-progress window, for micro-batches. "Records waiting" is what the driver itself
reported for the query at its last batch (its lag), since Spark keeps its offsets in the checkpoint,
not in a consumer group the operator could read. A query that reported no lag is idle, not stalled: an
app with nothing to read commits no batches and is healthy. Pure: no I/O.
"""

from __future__ import annotations

from datetime import timedelta

from streamapp_api import parse_duration
from streamapp_api.durations import trigger_interval
from streamapp_api.realtime import CHECKPOINT_INTERVAL
from streamapp_api.spec import StreamAppSpec

from .restarts import PodObservation
from .world import Progress

# The default window: this many trigger intervals, never less than STALL_FLOOR. The floor leaves room
# for a first batch that reads a whole backlog and for state loaded from the checkpoint at a start;
# back-to-back batches (no trigger) get the floor.
STALL_TRIGGERS = 10
STALL_FLOOR = timedelta(minutes=5)
# Real-time queries report progress once per checkpoint interval, not per record: three missed in a row.
REALTIME_CHECKPOINTS = 3


def stall_window(spec: StreamAppSpec) -> timedelta:
    """How long a query with records waiting may go without a batch: restartPolicy.stallAfter, else
    STALL_TRIGGERS trigger intervals, at least STALL_FLOOR."""
    if spec.restart_policy.stall_after:
        return parse_duration(spec.restart_policy.stall_after)
    if spec.realtime:
        return REALTIME_CHECKPOINTS * parse_duration(CHECKPOINT_INTERVAL)
    interval = trigger_interval(spec.trigger)
    return max(STALL_FLOOR, STALL_TRIGGERS * interval) if interval else STALL_FLOOR


def stalled(spec: StreamAppSpec, pod: PodObservation, progress: Progress) -> str | None:
    """Why the running driver counts as stalled (the first such query, in words), or None.

    Judged at the moment the metrics were read, so that a reading older than the driver's latest batch
    cannot condemn it. Never for a driver that is not running, one that had run less than a window when
    read, one whose metrics were not read (no data is not a stall), or a query with no records waiting."""
    at = progress.read_at
    if pod.state != "running" or pod.running_since is None or at is None:
        return None
    window = stall_window(spec)
    if at - pod.running_since < window:
        return None
    last_batch = dict(progress.sink_last_batch)
    for query, lag in progress.sink_lag:
        batch = last_batch.get(query)
        since = max(batch, pod.running_since) if batch is not None else pod.running_since
        if lag > 0 and at - since >= window:
            return (f"query {query} committed no batch for {_words(at - since)} with {lag} records waiting "
                    f"(restartPolicy.stallAfter: {_words(window)})")
    return None


def _words(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"
