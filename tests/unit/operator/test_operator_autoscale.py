"""scaling.mode load: the decision from the driver's measured load, as tables of cases."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from streamapp_operator.decide.scaling.autoscale import (
    WARM_UP_BATCHES, Bounds, Policy, QueryLoad, Signals, decide, lag_trend, record_lags,
)
from streamapp_operator.decide.scaling_memory import LoadHistory, Recommendation

pytestmark = pytest.mark.unit
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
POLICY = Policy(target_utilization=0.7, catch_up=timedelta(minutes=5), up_window=timedelta(seconds=30),
                down_window=timedelta(minutes=5), trigger=timedelta(seconds=10))
BOUNDS = Bounds(min_executors=1, max_executors=10, cores=2, partitions=16, shuffle_partitions=None)


def load(input_rate=1000.0, processed=2000.0, lag=0, trend=None, batch=None, batches=10, name="orders",
         last=T0) -> QueryLoad:
    # batch time: the share of the 10 s trigger the input keeps the executors busy
    batch = batch if batch is not None else (10 * input_rate / processed if processed else 0.0)
    return QueryLoad(name, input_rate, processed, batch, lag, trend, batches, last)


def signals(*queries: QueryLoad, at: datetime = T0, executors: int | None = None) -> Signals:
    return Signals(queries or (load(),), at, executors)


def watched(executors: int) -> LoadHistory:
    """A history that has watched the app for longer than any window, asking for ``executors``."""
    return LoadHistory(recommendations=tuple(Recommendation(T0 - timedelta(seconds=s), executors)
                                             for s in range(600, 0, -15)))


# A single decision, with the windows already watched (a history of asking for the current count).
@pytest.mark.parametrize(
    "case, sig, bounds, current, last_change, target, limited_by, says",
    [
        # 1000 rows/s arrive; 2 executors process 2000/s → 1000/s each, at 70 %: ceil(1000/700) = 2
        ("steady load", signals(load()), BOUNDS, 2, None, 2, None, "keeping 2"),
        # ×4 the input, read as fast as 2 executors go: the lag grows 2000/s on top
        ("4x step", signals(load(input_rate=2000, processed=2000, lag=60_000, trend=2000, batch=10)), BOUNDS, 2, None,
         2, None, "scaling up once that holds for 30s"),
        ("lag growing", signals(load(input_rate=2000, processed=3000, lag=60_000, trend=500)), BOUNDS, 2, None,
         2, None, "lag 60 k records and growing 500/s"),
        ("lag shrinking", signals(load(input_rate=2000, processed=3000, lag=60_000, trend=-1500)), BOUNDS, 2, None,
         2, None, "lag 60 k records and shrinking 1.5 k/s"),
        ("idle", signals(load(input_rate=0, processed=0, lag=0)), BOUNDS, 2, None, 2, "minExecutors",
         "no input and no lag"),
        ("no rows processed yet, lag waiting", signals(load(input_rate=0, processed=0, lag=500)), BOUNDS, 2, None,
         2, None, "no batch processed rows yet"),
        ("stale metrics", signals(load(input_rate=8000), at=T0 - timedelta(minutes=2)), BOUNDS, 2, None, 2, None,
         "no fresh metrics (last read 120s ago): keeping 2 executors"),
        ("driver does not answer", Signals((), None), BOUNDS, 2, None, 2, None,
         "no fresh metrics (the driver does not answer)"),
        ("stuck query", signals(load(input_rate=4000, lag=5000, last=T0 - timedelta(minutes=5))), BOUNDS, 2, None,
         2, None, "no batch for 5m with a lag of 5.0 k records (not a matter of executors): keeping 2"),
        # overloaded: the last batch took 50 s (5× the trigger) and the next, with the backlog it left,
        # is still running 80 s on; that is load, not a stuck driver
        ("long batches", signals(load(input_rate=4000, processed=4000, lag=300_000, trend=3000, batch=50,
                                      last=T0 - timedelta(seconds=80))), BOUNDS, 2, None,
         2, None, "batches take 5.0× the trigger"),
        ("stuck after long batches", signals(load(input_rate=4000, processed=4000, lag=300_000, batch=50,
                                                  last=T0 - timedelta(seconds=160))), BOUNDS, 2, None,
         2, None, "no batch for 160s with a lag of 300 k records"),
        # no new batch for minutes and nothing behind: the last rates are history
        ("quiet input", signals(load(input_rate=4000, lag=0, last=T0 - timedelta(minutes=5))), BOUNDS, 2, None, 2,
         "minExecutors", "no input and no lag"),
        ("bounds lowered while the driver is silent", Signals((), None), replace(BOUNDS, max_executors=1), 2, None,
         1, None, "keeping 1 executors (capped at maxExecutors 1)"),
        ("warm-up after a restart", signals(load(input_rate=8000, batches=WARM_UP_BATCHES - 1)), BOUNDS, 2, None, 2,
         None, f"warming up after the driver started ({WARM_UP_BATCHES - 1} of {WARM_UP_BATCHES} batches)"),
    ],
)
def test_single_decision(case, sig, bounds, current, last_change, target, limited_by, says):
    decision = decide(sig, bounds, POLICY, current, last_change, watched(current), T0)
    assert (decision.target, decision.limited_by) == (target, limited_by), decision.reason
    assert says in decision.reason


# What the load asks for, bounded: the count it settles on once the windows have passed.
@pytest.mark.parametrize(
    "case, sig, bounds, current, wanted, limited_by, says",
    [
        # 8000/s at 700/s per executor: 12, but 16 partitions over 2 cores keep 8 busy at most
        ("partition limit", signals(load(input_rate=8000)), BOUNDS, 2, 8, "partitions",
         "16 source partitions keep at most 8 executors of 2 cores busy"),
        ("shuffle-partition limit", signals(load(input_rate=8000)), replace(BOUNDS, shuffle_partitions=6), 2, 3,
         "shufflePartitions", "the checkpoint's 6 shuffle partitions"),
        ("max bound", signals(load(input_rate=5000)), replace(BOUNDS, max_executors=4), 2, 4, "maxExecutors",
         "capped at maxExecutors 4"),
        ("min bound", signals(load(input_rate=100)), replace(BOUNDS, min_executors=3), 3, 3, "minExecutors",
         "at least minExecutors 3"),
        ("4x step, grown", signals(load(input_rate=4000, processed=2000, lag=60_000, trend=0, batch=20)), BOUNDS, 2, 6,
         None, "lag 60 k records; batches take 2.0× the trigger → 6 executors"),
        ("several queries: the busiest decides", signals(load(), load(input_rate=3000, name="dlq-orders")), BOUNDS, 2,
         5, None, "dlq-orders: 3.0 k rows/s arrive"),
        ("executors registered count, not started", signals(load(input_rate=1000, processed=1000), executors=1),
         BOUNDS, 2, 2, None, "→ 2 executors"),
    ],
)
def test_bounded_target(case, sig, bounds, current, wanted, limited_by, says):
    decision = decide(sig, bounds, POLICY, current, None, watched(wanted), T0)
    assert (decision.wanted, decision.target, decision.limited_by) == (wanted, wanted, limited_by), decision.reason
    assert says in decision.reason


def simulate(arrivals, seconds: int, current: int = 2, per_executor: float = 1000.0,
             bounds: Bounds = BOUNDS) -> list[tuple[int, int]]:
    """A small model of an app read every 15 s: ``arrivals(second)`` rows/s reach Kafka, each
    executor processes ``per_executor`` rows/s, a batch reads what arrived plus what it can of the
    lag. The count changes when the decision says so (the restart taken as instant; warm-up is tested
    on its own). Returns (second, new count) per change."""
    history, last_change, changes, lag, step = watched(current), None, [], 0, 15
    for second in range(0, seconds, step):
        now = T0 + timedelta(seconds=second)
        capacity = current * per_executor
        read = min(arrivals(second) + lag / step, capacity)
        behind = max(0, round(lag + (arrivals(second) - read) * step))
        q = load(input_rate=read, processed=capacity, lag=behind, trend=(behind - lag) / step,
                 batch=10 * read / capacity, last=now)
        lag = behind
        decision = decide(Signals((q,), now), bounds, POLICY, current, last_change, history, now)
        history = decision.history
        if decision.target != current:
            current, last_change = decision.target, now
            changes.append((second, current))
    return changes


def test_steady_load_never_changes_the_count():
    assert simulate(lambda s: 1000, 3600) == []


def test_a_4x_step_scales_up_fast_and_down_slowly_once_per_window():
    # 1000 rows/s, ×4 from minute 5 to minute 25, then back
    changes = simulate(lambda s: 4000 if 300 <= s < 1500 else 1000, 3600)
    # up 30 s after the step, to the least asked for in that window (4000/s at 700/s each: 6); down
    # once 2 was asked for throughout 5 minutes; nothing in between
    assert changes == [(330, 6), (1800, 2)]


def test_oscillating_input_moves_nothing():
    # the input swings between 1000 and 1800 rows/s every 30 s: 2 and 3 executors asked for in turn
    assert simulate(lambda s: 1800 if (s // 30) % 2 else 1000, 3600) == []


def test_at_most_one_change_per_window():
    big = load(input_rate=4000, processed=2000, lag=0, batch=20)
    decision = decide(signals(big), BOUNDS, POLICY, 6, T0 - timedelta(seconds=10), watched(12), T0)
    assert decision.target == 6
    assert decision.wait == timedelta(seconds=20)
    assert "at most once per 30s (last change 10s ago)" in decision.reason


def test_an_operator_restart_watches_a_whole_window_before_acting():
    decision = decide(signals(load(input_rate=8000)), BOUNDS, POLICY, 2, None, LoadHistory(), T0)
    assert (decision.target, decision.wait) == (2, timedelta(seconds=30))


def test_an_ask_recorded_before_a_short_window_still_counts_for_the_whole_window():
    # asks are recorded when they change (or now and then): with a 2 s down window the only one may
    # be older than the window, and it held all through it
    short = replace(POLICY, down_window=timedelta(seconds=2))
    history = LoadHistory(recommendations=(Recommendation(T0 - timedelta(seconds=3), 2),))
    decision = decide(signals(load(input_rate=1000, processed=6000)), BOUNDS, short, 6, None, history,
                      T0 + timedelta(milliseconds=500))
    assert decision.target == 2


def test_lag_trend_from_successive_batches():
    history = LoadHistory()
    for second, lag in ((0, 1000), (10, 1500), (20, 3000)):
        at = T0 + timedelta(seconds=second)
        history = record_lags(history, (("q", at),), (("q", lag),), at)
        history = record_lags(history, (("q", at),), (("q", lag),), at)  # the same batch read twice counts once
    assert lag_trend(history, "q") == 100.0
    later = T0 + timedelta(minutes=10)
    assert record_lags(history, (), (), later).lags == ()  # old readings drop out
    assert lag_trend(LoadHistory(), "q") is None
