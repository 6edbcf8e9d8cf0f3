"""From what the broker recorded to figures. Pure: lists in, numbers out.

Sustained rate: the slope of "events accounted for" between 10 % and 90 % of the total, so that
start-up (JVM, Spark session, consumer group join) and the last partial batch are left out.
Latency: for each counted event, from the broker time of the event to the broker time of the first
output row of its session window whose count includes it (records of a key keep their order, so the
n-th event of a window is in every row whose count is at least n).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime

WINDOW_MS = 60_000


def curve_from_rows(rows: Iterable) -> list[tuple[int, int]]:
    """(time ms, events accounted for) after each output row, in time order."""
    latest: dict = {}
    progress = 0
    points = []
    for row in sorted(rows, key=lambda r: r.at_ms):
        before = latest.get(row.key, 0)
        if row.count > before:
            latest[row.key] = row.count
            progress += row.count - before
        points.append((row.at_ms, progress))
    return points


def sustained_rate(points: Sequence[tuple[int, int]], expected: int, low: float = 0.1, high: float = 0.9) -> dict:
    """Units per second between `low` and `high` of `expected`."""
    t_low = next((t for t, p in points if p >= low * expected), None)
    t_high = next((t for t, p in points if p >= high * expected), None)
    reached = points[-1][1] if points else 0
    if t_low is None or t_high is None or t_high <= t_low:
        return {"per_second": None, "reached": reached, "expected": expected, "seconds": None}
    done = next(p for t, p in points if t >= t_high) - next(p for t, p in points if t >= t_low)
    seconds = (t_high - t_low) / 1000
    return {"per_second": done / seconds, "reached": reached, "expected": expected, "seconds": seconds,
            "first_ms": points[0][0], "last_ms": points[-1][0]}


def window_of(ts: str) -> int:
    millis = int(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000)
    return millis - millis % WINDOW_MS


def event_latencies(events: Iterable[tuple[int, dict]], rows: Iterable) -> tuple[list[int], int]:
    """Milliseconds from each counted event to the first row that includes it, and how many events no
    row ever included. `events` are (broker ms, event) in offset order per partition."""
    produced: dict[tuple[str, str, int], list[int]] = {}
    for at, event in events:
        if event["event"] in ("click", "page_view"):
            produced.setdefault((event["session_id"], event["uuid"], window_of(event["ts"])), []).append(at)
    included: dict[tuple[str, str, int], int] = {}
    latencies: list[int] = []
    for row in sorted(rows, key=lambda r: r.at_ms):
        times = produced.get(row.key)
        if times is None:
            continue
        done = included.get(row.key, 0)
        upto = min(row.count, len(times))
        for i in range(done, upto):
            latencies.append(max(0, row.at_ms - times[i]))
        if upto > done:
            included[row.key] = upto
    missing = sum(len(t) for t in produced.values()) - len(latencies)
    return latencies, missing


def percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    rank = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return float(ordered[rank])


def ratio(a: float | None, b: float | None) -> float | None:
    return None if not a or not b else a / b


PHASES = ("latestOffset", "queryPlanning", "getBatch", "walCommit", "addBatch", "commitOffsets", "triggerExecution")


def batch_profile(progress: Iterable[dict], query: str) -> dict | None:
    """Where `query`'s micro-batches spent their time, from Spark's progress of each (the runtime's
    STREAMAPP_PROGRESS_JSON lines): batches with input, mean rows per batch, mean milliseconds per phase,
    and the state store's mean commit time. Batches without input (watermark-only) are counted apart."""
    batches = [p for p in progress if p.get("name") == query]
    busy = [p for p in batches if p.get("numInputRows")]
    if not busy:
        return None
    mean = lambda values: round(sum(values) / len(values), 1)  # noqa: E731
    state = [sum(op.get("commitTimeMs", 0) for op in p.get("stateOperators") or []) for p in busy]
    return {"batches": len(busy), "batches_without_input": len(batches) - len(busy),
            "rows_per_batch": mean([p["numInputRows"] for p in busy]),
            "ms": {phase: mean([p["durationMs"].get(phase, 0) for p in busy]) for phase in PHASES},
            "state_commit_ms": mean(state)}


def too_long(first_ms: int, last_ms: int, progress: int, expected: int, min_seconds: float) -> bool:
    """Whether an engine's first run, `progress` of `expected` events in from `first_ms` to `last_ms` of
    output, is slow enough to stop and size down: after `min_seconds` of output (half of that gave (b0)
    only three batches, the first one slowed by start-up, and half its rate), the whole backlog would
    take more than three times `min_seconds` (b0, Spark's defaults, is several times slower than the
    others)."""
    span = (last_ms - first_ms) / 1000
    return progress > 0 and span >= min_seconds and span * expected / progress > 3 * min_seconds


def smaller_n(n: int, events_per_s: float | None, min_seconds: float) -> int | None:
    """The backlog on which an engine measured at `events_per_s` writes for about 1.25 × `min_seconds`
    (rounded up to a million, like `larger_n`), or None when that is not smaller than N."""
    if not events_per_s:
        return None
    smaller = _millions(events_per_s * 1.25 * min_seconds)
    return smaller if smaller < n else None


def decided_n(n: int, first_run: dict, min_seconds: float) -> int:
    """The backlog of every round of an engine, from its first run on N: smaller when that run was
    stopped as too slow (`too_long`), larger when it wrote output for less than `min_seconds`, else N."""
    if first_run.get("stopped_early"):
        return smaller_n(n, first_run.get("events_per_s"), min_seconds) or n
    return larger_n(n, first_run, min_seconds) or n


def _millions(events: float) -> int:
    """Rounded up to a million events, so engines of similar speed share a backlog."""
    return math.ceil(events / 1_000_000) * 1_000_000


def larger_n(n: int, measured: dict, min_seconds: float) -> int | None:
    """The backlog on which an engine that wrote output for less than `min_seconds` at N would write for
    about 1.25 × `min_seconds` (rounded up to a million events, so engines of similar speed share one),
    or None when N was enough."""
    span = measured.get("output_seconds")
    if not measured.get("finished") or not span or span >= min_seconds:
        return None
    return _millions(n * 1.25 * min_seconds / span)
