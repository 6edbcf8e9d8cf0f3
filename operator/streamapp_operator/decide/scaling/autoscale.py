"""scaling.mode load: the executor count from the load the driver measures. Pure.

After the Flink autoscaler: the rows that arrive per second (rows read plus the lag's growth) and a
share of the backlog (lag ÷ catch-up time) must be processed at ``targetUtilization`` of what the
executors can process (the processing rate of the last batch, per executor):

    needed = ceil((arrival + lag / catchUp) / (processed rate / executors × targetUtilization))

per query, the busiest query deciding. The count is bounded by what tasks can use (source
partitions, and the checkpoint's shuffle partitions when the app shuffles) and by min/maxExecutors.
A change waits out its stabilisation window, as the HorizontalPodAutoscaler does: the app grows to
the smallest count asked for throughout ``scaleUpWindow`` and shrinks to the largest asked for
throughout ``scaleDownWindow``, and changes at most once per window, so input that swings back and
forth moves nothing. No fresh metrics, or a driver still in its first batches: the count is kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from ..scaling_memory import LagReading, LoadHistory, Recommendation

# Metrics read longer ago than this are not decided from (the operator reads them every resync / 2).
METRICS_MAX_AGE = timedelta(seconds=90)
# Batches of each query a new driver runs before its rates count: the first ones replay, load state
# and compile, and are slower than the load asks for.
WARM_UP_BATCHES = 3
# Lag readings kept per query for its trend, and the shortest span a trend is computed over.
TREND_WINDOW = timedelta(minutes=2)
TREND_MIN_SPAN = timedelta(seconds=5)
RECOMMENDATION_EVERY = timedelta(seconds=5)  # an unchanged recommendation is recorded this often
# A query without a batch for this long (or 3 triggers) has nothing to read, or is stuck when it has a lag.
IDLE_AFTER = timedelta(seconds=60)


@dataclass(frozen=True)
class QueryLoad:
    """One query's last batch, as its driver reported it."""

    name: str
    input_rate: float  # rows read per second
    processed_rate: float  # rows processed per second of batch time
    batch_seconds: float
    lag: int  # records behind the newest offsets, summed over partitions
    lag_trend: float | None  # records per second the lag grew (negative: shrank); None: not known yet
    batches: int  # since the driver started
    last_batch: datetime | None = None  # when its last batch ran


@dataclass(frozen=True)
class Signals:
    queries: tuple[QueryLoad, ...]
    read_at: datetime | None  # when the driver was read (None: it did not answer)
    executors: int | None = None  # registered with the driver (None: not reported)


@dataclass(frozen=True)
class Bounds:
    min_executors: int
    max_executors: int | None
    cores: int  # per executor
    partitions: int | None  # source partitions: the tasks of a source stage
    shuffle_partitions: int | None  # the checkpoint's, when the app shuffles (None: it does not, or unknown)


@dataclass(frozen=True)
class Policy:
    target_utilization: float
    catch_up: timedelta
    up_window: timedelta
    down_window: timedelta
    trigger: timedelta | None  # the micro-batch interval (None: back to back)


@dataclass(frozen=True)
class Decision:
    target: int  # the count to run
    reason: str
    limited_by: str | None = None  # the bound that kept the count from what the load asks for
    wanted: int | None = None  # what the load asks for, bounded (None: no decision was made)
    wait: timedelta | None = None  # when a pending change may be acted on
    history: LoadHistory = LoadHistory()


def record_lags(history: LoadHistory, batches: tuple[tuple[str, datetime], ...], lags: tuple[tuple[str, int], ...],
                now: datetime) -> LoadHistory:
    """The history with each query's lag at its latest batch added (once per batch), readings older
    than the trend window dropped."""
    lag_of = dict(lags)
    kept = [r for r in history.lags if now - r.at <= TREND_WINDOW]
    seen = {(r.query, r.at) for r in kept}
    kept += [LagReading(q, at, lag_of[q]) for q, at in batches if q in lag_of and (q, at) not in seen]
    return replace(history, lags=tuple(sorted(kept, key=lambda r: (r.query, r.at))))


def lag_trend(history: LoadHistory, query: str) -> float | None:
    """Records per second the query's lag grew over the readings kept (None: too few, or too close)."""
    readings = [r for r in history.lags if r.query == query]
    if len(readings) < 2 or readings[-1].at - readings[0].at < TREND_MIN_SPAN:
        return None
    first, last = readings[0], readings[-1]
    return (last.lag - first.lag) / (last.at - first.at).total_seconds()


def decide(signals: Signals, bounds: Bounds, policy: Policy, current: int, last_change: datetime | None,
           history: LoadHistory, now: datetime) -> Decision:
    """The count to run instead of ``current`` (what the driver runs), and why."""
    held, limited_by, limit_why = _bounded(current, replace(bounds, partitions=None, shuffle_partitions=None))
    keeping = f"keeping {held} executors" + (f" ({limit_why})" if held != current else "")
    if signals.read_at is None or now - signals.read_at > METRICS_MAX_AGE:
        since = "the driver does not answer" if signals.read_at is None else \
            f"last read {int((now - signals.read_at).total_seconds())}s ago"
        return Decision(held, f"no fresh metrics ({since}): {keeping}", history=history)
    warming = [q for q in signals.queries if q.batches < WARM_UP_BATCHES]
    if warming or not signals.queries:
        done = min((q.batches for q in warming), default=0)
        return Decision(held, f"warming up after the driver started ({done} of {WARM_UP_BATCHES} batches): {keeping}",
                        history=history)
    idle_after = max(IDLE_AFTER, 3 * (policy.trigger or timedelta(0)))

    def silent(q: QueryLoad) -> bool:
        """No batch for longer than a batch may take. An overloaded query runs long batches (each takes
        the backlog the last one left): one that took 50 s is followed by a longer one, not by a
        stuck driver, and that is what scaling up is for."""
        return q.last_batch is not None and now - q.last_batch > max(idle_after, timedelta(seconds=3 * q.batch_seconds))

    stuck = [(q, now - q.last_batch) for q in signals.queries if q.lag and q.last_batch is not None and silent(q)]
    if stuck:
        q, quiet = stuck[0]
        return Decision(held, f"{q.name}: no batch for {_seconds(quiet)} with a lag of {_amount(q.lag)} "
                              f"records (not a matter of executors): {keeping}", history=history)
    # a query with nothing to read may report no new batch: its last rates are history, not load
    queries = tuple(replace(q, input_rate=0.0, processed_rate=0.0) if silent(q) else q for q in signals.queries)
    running = signals.executors or current
    need = _need(queries, policy, running)
    if need is None:
        return Decision(held, f"no batch processed rows yet: {keeping}", history=history)
    raw, why = need
    wanted, limited_by, limit_why = _bounded(raw, bounds)
    recs = _pruned(history.recommendations, now, policy)
    if not recs or recs[-1].executors != wanted or now - recs[-1].at >= RECOMMENDATION_EVERY:
        recs += (Recommendation(now, wanted),)  # reconciles come in bursts: one entry per reading is enough
    history = replace(history, recommendations=recs)
    target, wait, pending = _stabilised(history, current, last_change, now, policy)
    reason = f"{why} → {raw} executors"
    if limit_why:
        reason += f"; {limit_why}"
    if target != current:
        reason += f"; {'up' if target > current else 'down'} from {current} to {target}"
    elif pending:
        reason += f"; {pending}"
    else:
        reason += f"; keeping {current}"
    return Decision(target, reason, limited_by, wanted, wait, history)


def _need(queries: tuple[QueryLoad, ...], policy: Policy, running: int) -> tuple[int, str] | None:
    """The executors the busiest query needs, and what it measured, in words. None: no query processed rows."""
    best: tuple[int, str] | None = None
    idle = all(q.input_rate == 0 and q.lag == 0 for q in queries)
    if idle:
        return 0, "no input and no lag"
    catch_up = policy.catch_up.total_seconds()
    for q in queries:
        if q.processed_rate <= 0:
            continue
        arrival = max(0.0, q.input_rate + (q.lag_trend or 0.0))
        per_executor = q.processed_rate / running
        needed = math.ceil(round((arrival + q.lag / catch_up) / (per_executor * policy.target_utilization), 6))
        if best is None or needed > best[0]:
            best = (needed, _measured(q, arrival, policy))
    return best


def _measured(q: QueryLoad, arrival: float, policy: Policy) -> str:
    parts = [f"{q.name}: {_amount(arrival)} rows/s arrive, {_amount(q.processed_rate)} rows/s processed"]
    if q.lag:
        trend = ""
        if q.lag_trend and abs(q.lag_trend) >= 1:
            trend = f" and {'growing' if q.lag_trend > 0 else 'shrinking'} {_amount(abs(q.lag_trend))}/s"
        parts.append(f"lag {_amount(q.lag)} records{trend}")
    if policy.trigger and policy.trigger.total_seconds() > 0:
        ratio = q.batch_seconds / policy.trigger.total_seconds()
        parts.append(f"batches take {ratio:.1f}× the trigger")
    return "; ".join(parts)


def _amount(value: float) -> str:
    """1234567 → '1.2 M', 40000 → '40 k', 512 → '512'."""
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            scaled = value / size
            return f"{scaled:.1f} {unit}" if scaled < 10 else f"{scaled:.0f} {unit}"
    return f"{value:.0f}"


def _bounded(raw: int, b: Bounds) -> tuple[int, str | None, str]:
    """``raw`` within what tasks can use and min/maxExecutors: (count, the bound that applied, why)."""
    count, limited_by, why = raw, None, ""
    limits = []
    if b.partitions:
        limits.append((math.ceil(b.partitions / b.cores), "partitions", f"{b.partitions} source partitions"))
    if b.shuffle_partitions:
        limits.append((math.ceil(b.shuffle_partitions / b.cores), "shufflePartitions",
                       f"the checkpoint's {b.shuffle_partitions} shuffle partitions (fixed; a state reset changes them)"))
    for limit, name, tasks in sorted(limits):
        if count > limit:
            count, limited_by = limit, name
            why = f"{tasks} keep at most {limit} executors of {b.cores} cores busy"
            break
    if b.max_executors is not None and count > b.max_executors:
        count, limited_by, why = b.max_executors, "maxExecutors", f"capped at maxExecutors {b.max_executors}"
    if count < b.min_executors:
        count, limited_by, why = b.min_executors, "minExecutors", f"at least minExecutors {b.min_executors}"
    return count, limited_by, why


def _pruned(recs: tuple[Recommendation, ...], now: datetime, policy: Policy) -> tuple[Recommendation, ...]:
    # one older than the longest window is kept: it shows the window was watched from its start
    keep = max(policy.up_window, policy.down_window)
    inside = [r for r in recs if now - r.at <= keep]
    older = [r for r in recs if now - r.at > keep]
    return tuple(older[-1:] + inside)


def _stabilised(history: LoadHistory, current: int, last_change: datetime | None, now: datetime,
                policy: Policy) -> tuple[int, timedelta | None, str]:
    """(count, when to look again, what waits): grow to the least asked for throughout the up window,
    shrink to the most asked for throughout the down window, once per window."""
    latest = history.recommendations[-1].executors  # what this reading asks for
    if latest == current:
        return current, None, ""
    up = latest > current
    window = policy.up_window if up else policy.down_window
    direction = "up" if up else "down"
    watched_since = history.recommendations[0].at
    if now - watched_since < window:
        wait = window - (now - watched_since)
        return current, wait, f"scaling {direction} once that holds for {_seconds(window)}"
    if last_change is not None and now - last_change < window:
        wait = window - (now - last_change)
        return current, wait, f"scaling {direction} at most once per {_seconds(window)} (last change " \
                              f"{_seconds(now - last_change)} ago)"
    # what was asked throughout the window: the ask in force at its start (recorded before it: one is
    # recorded only when it changes or now and then), and every one since
    start = now - window
    asked = [r.executors for r in history.recommendations if r.at <= start][-1:] + \
        [r.executors for r in history.recommendations if r.at > start]
    target = min(asked) if up else max(asked)
    if (up and target <= current) or (not up and target >= current):
        return current, None, f"scaling {direction} once that holds for {_seconds(window)}"
    return target, None, ""


def _seconds(span: timedelta) -> str:
    total = int(span.total_seconds())
    return f"{total // 60}m" if total >= 120 and total % 60 == 0 else f"{total}s"
