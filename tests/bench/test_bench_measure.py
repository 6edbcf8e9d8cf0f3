"""The bench's arithmetic on plain data: the sustained rate and the event → window-row matching."""

from __future__ import annotations

import json

from types import SimpleNamespace as Row

import pytest

pytestmark = pytest.mark.unit


def test_sustained_rate_leaves_out_start_up_and_tail():
    from streamapp_bench.measure import sustained_rate

    points = [(0, 0), (10_000, 0), (11_000, 100), (12_000, 200), (20_000, 1000)]  # ms, events
    out = sustained_rate(points, 1000)
    assert out["seconds"] == pytest.approx(9.0)  # from the first point at 10 % (11 s) to the first at 90 % (20 s)
    assert out["per_second"] == pytest.approx((1000 - 100) / 9.0)


def test_each_counted_event_is_matched_to_the_first_row_that_includes_it():
    from streamapp_bench.measure import event_latencies, window_of

    w = window_of("2026-01-01T12:00:10.000Z")
    ev = lambda kind, ts: {"session_id": "s", "uuid": "u", "event": kind, "ts": ts}  # noqa: E731
    events = [(1000, ev("click", "2026-01-01T12:00:10.000Z")), (1100, ev("scroll", "2026-01-01T12:00:11.000Z")),
              (1200, ev("page_view", "2026-01-01T12:00:12.000Z")), (1300, ev("click", "2026-01-01T12:00:13.000Z"))]
    rows = [Row(at_ms=1500, key=("s", "u", w), count=2), Row(at_ms=2500, key=("s", "u", w), count=3),
            Row(at_ms=2600, key=("other", "u", w), count=1)]
    latencies, missing = event_latencies(events, rows)
    assert sorted(latencies) == [300, 500, 1200] and missing == 0


def test_batch_profile_averages_batches_with_input_and_counts_the_others_apart():
    from streamapp_bench.measure import batch_profile

    def progress(name, rows, add, total, commit=None):
        ops = [{"commitTimeMs": commit}] if commit is not None else []
        return {"name": name, "numInputRows": rows, "durationMs": {"addBatch": add, "triggerExecution": total},
                "stateOperators": ops}

    batches = [progress("q", 100, 400, 500, 30), progress("q", 300, 800, 1100, 50), progress("q", 0, 10, 40, 5),
               progress("dlq", 400, 9000, 9000)]
    profile = batch_profile(batches, "q")
    assert profile["batches"] == 2 and profile["batches_without_input"] == 1
    assert profile["rows_per_batch"] == 200
    assert profile["ms"]["addBatch"] == 600 and profile["ms"]["triggerExecution"] == 800 and profile["ms"]["walCommit"] == 0
    assert profile["state_commit_ms"] == 40
    assert batch_profile(batches, "nothing") is None


@pytest.mark.parametrize(("span", "finished", "expected"), [
    (17.5, True, 13_000_000),  # Kafka Streams at N = 3,000,000: ~13 million events for ~75 s of output
    (52.6, True, 5_000_000),
    (60.0, True, None),  # long enough
    (17.5, False, None),  # a run that did not finish is reported, not repeated
    (None, True, None),
])
def test_an_engine_too_fast_for_n_gets_a_backlog_it_works_at_least_min_seconds_on(span, finished, expected):
    from streamapp_bench.measure import larger_n

    assert larger_n(3_000_000, {"output_seconds": span, "finished": finished}, 60) == expected


def test_the_delivery_bench_reports_medians_with_their_spread():
    from streamapp_bench import report
    from streamapp_bench.rounds import spread

    assert spread([3.0, None, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "runs": 3}
    assert spread([None])["median"] is None
    result = {"n": 1000, "partitions": 4, "max_offsets_per_trigger": 1000, "repeats": 3, "live_rate": 50.0,
              "events_per_s": {"runtime": spread([100.0, 120.0, 110.0]), "runtime-eos": spread([80.0, 90.0, 70.0])},
              "eos_over_alo": spread([0.8, 0.75, 0.64]),
              "latency": {"runtime": {"p50_ms": 1500, "p99_ms": 3000}, "runtime-eos": {"p50_ms": 2500, "p99_ms": None}}}
    lines = report.delivery({"result": result})
    assert "| exactly-once | 80 (70–90) | 2.50 s | — |" in lines
    assert "| at-least-once | 110 (100–120) | 1.50 s | 3.00 s |" in lines
    assert lines[-1].startswith("Exactly-once ÷ at-least-once throughput, per back-to-back pair: median 0.75 (min 0.64, max 0.80, 3 pairs)")


def test_realtime_latency_pairs_each_output_with_its_input_in_order_and_counts_the_missing():
    from streamapp_bench.realtime import latencies

    def click(session, event="click", spent=5, ts="2026-11-24T10:00:00.000Z"):
        return {"session_id": session, "uuid": "u", "event": event, "time_spent": spent, "ts": ts}

    def out(session, event="click", spent=5, ts="2026-11-24T10:00:00.000+00:00"):
        return {"session_id": session, "uuid": "u", "event": event, "seconds_spent": spent / 1000, "ts": ts}

    inputs = [(1000, click("a")), (1010, click("a")), (1020, click("b", "scroll")), (1030, click("c", spent=7))]
    # two records alike: the first output is the first input's; the scroll is filtered out by the app
    assert latencies(inputs, [(1050, out("a")), (1070, out("a")), (1031, out("c", spent=7))]) == ([1, 50, 60], 0)  # in output order
    assert latencies(inputs, [(1050, out("a"))]) == ([50], 2)


def test_the_realtime_bench_waits_for_as_many_queries_as_each_mode_starts():
    from pathlib import Path

    from streamapp_bench.realtime import Run, manifest, query_count

    def run(mode: str) -> Run:
        return Run("127.0.0.1:1", "in", "out", Path("/unused"), mode, 4)

    # micro-batches: the feed alone (its query counts the bad records); real-time: a dead-letter query too
    assert (query_count(manifest(run("micro-batch"))), query_count(manifest(run("realtime")))) == (1, 2)


def test_the_realtime_bench_reports_both_modes_against_the_bar():
    from streamapp_bench import report
    from streamapp_bench.rounds import spread

    def mode(p50, p99):
        return {"p50_ms": spread(p50), "p99_ms": spread(p99), "p999_ms": spread([x * 2 for x in p99]),
                "max_ms": spread([x * 3 for x in p99]), "achieved_rate": spread([9990.0, 10001.0]), "missing": [0, 0]}

    result = {"rate": 10_000, "seconds": 30, "rounds": 2, "partitions": 4, "bar_p99_ms": 100,
              "latency": {"micro-batch": mode([900, 1100], [2000, 2400]), "realtime": mode([4, 6], [80, 130])},
              "microbatch_over_realtime_p99": spread([25.0, 18.5])}
    lines = report.realtime({"result": result})
    assert "| `trigger: realtime` | 9,996 (9,990–10,001) | 5 ms (4–6) | 105 ms (80–130) | 210 ms (160–260) | " \
           "315 ms (240–390) | 0, 0 |" in lines
    assert any(line.startswith("Bar of issue 17: real-time p99 ≤ 100 ms at 10,000 events/s: 105 ms (misses)")
               for line in lines)


@pytest.mark.parametrize(("first_ms", "last_ms", "progress", "expected"), [
    (0, 30_000, 500_000, True),  # (b0): 30 s of output for a fifth of the backlog, ~160 s for all of it
    (0, 20_000, 100_000, False),  # not yet 30 s of output: too early to tell
    (0, 30_000, 1_000_000, False),  # ~80 s for all of it: N will do
    (0, 0, 0, False),  # no output yet
])
def test_a_first_run_far_too_slow_for_n_is_stopped_once_it_has_shown_its_rate(first_ms, last_ms, progress, expected):
    from streamapp_bench.measure import too_long

    assert too_long(first_ms, last_ms, progress, 2_713_075, 30) is expected


@pytest.mark.parametrize(("events_per_s", "expected"), [
    (19_000.0, 1_000_000),  # ~37.5 s of output: (b0) at Spark's defaults
    (40_000.0, 2_000_000),  # 1.5 million, rounded up to a million
    (60_000.0, None),  # 2.25 million, rounded up: N itself
    (None, None),
])
def test_a_slow_engine_gets_a_backlog_it_works_about_min_seconds_on(events_per_s, expected):
    from streamapp_bench.measure import smaller_n

    assert smaller_n(3_000_000, events_per_s, 30) == expected


def test_a_latency_runs_events_are_measured_only_between_the_warm_up_and_the_cool_down():
    from streamapp_bench import clicks

    events = [json.loads(value) for _, value in
              clicks.warm_then_measured(rate=200, seconds=0.1, warm_seconds=0.05, cool_seconds=0.05)]
    assert [clicks.measured(e) for e in events] == [False] * 10 + [True] * 20 + [False] * 10
    measured_users = {e["uuid"] for e in events[10:30]}
    assert not measured_users & {e["uuid"] for e in events[:10] + events[30:]}  # populations of their own


@pytest.mark.parametrize(("first_run", "expected"), [
    ({"finished": False, "stopped_early": True, "events_per_s": 15_000.0}, 1_000_000),  # (b0): smaller
    ({"finished": False, "stopped_early": True, "events_per_s": 150_000.0}, 5_000_000),  # 5.6 million: N itself
    ({"finished": True, "output_seconds": 20.0}, 10_000_000),  # Kafka Streams: larger
    ({"finished": True, "output_seconds": 35.0}, 5_000_000),  # N
])
def test_an_engines_first_run_decides_the_backlog_of_its_rounds(first_run, expected):
    from streamapp_bench.measure import decided_n

    assert decided_n(5_000_000, first_run, 30) == expected


def test_first_runs_start_from_the_backlogs_the_previous_results_decided_for_the_same_n(tmp_path):
    from streamapp_bench.dataplane import previous_sizes

    path = tmp_path / "dataplane.json"
    assert previous_sizes(path, 5_000_000, 30) == {}  # no previous results
    throughput = {"runtime": {"n": 7_000_000}, "handwritten": {}, "handwritten-plain": {"n": 1_000_000},
                  "raw": {"passes": 4}}
    path.write_text(json.dumps({"args": {"n": 5_000_000, "min_seconds": 30}, "result": {"throughput": throughput}}))
    assert previous_sizes(path, 5_000_000, 30) == {"runtime": 7_000_000, "handwritten-plain": 1_000_000}
    assert previous_sizes(path, 1_000_000, 30) == {}  # another N (--quick): decided afresh
    assert previous_sizes(path, 5_000_000, 60) == {}
    path.write_text("{not json")
    assert previous_sizes(path, 5_000_000, 30) == {}
