"""Rounds of interleaved runs: the order they run in, medians with their spread, ratios within a round,
the data plane's figures and bench/README.md table from a saved results file, and what --quick changes."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.unit


def test_every_engine_runs_once_per_round_in_the_same_order():
    from streamapp_bench.rounds import interleave

    order = interleave(("a", "a2", "b", "c", "d"), 3)
    assert [e for _, e in order] == ["a", "a2", "b", "c", "d"] * 3
    assert [i for i, _ in order] == [0] * 5 + [1] * 5 + [2] * 5
    assert interleave(("a", "b"), 0) == []


def test_alternating_rounds_let_neither_engine_of_a_pair_always_go_first():
    from streamapp_bench.rounds import interleave

    assert interleave(("alo", "eos"), 3, alternate=True) == [(0, "alo"), (0, "eos"), (1, "eos"), (1, "alo"),
                                                             (2, "alo"), (2, "eos")]


def test_spread_is_the_median_lowest_and_highest_of_what_was_measured():
    from streamapp_bench.rounds import spread

    assert spread([3.0, None, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "runs": 3}
    assert spread([4.0, 1.0])["median"] == 2.5
    assert spread([None]) == {"median": None, "min": None, "max": None, "runs": 0}


def test_a_ratio_is_taken_within_each_round_not_between_medians():
    from streamapp_bench.rounds import per_round_ratio

    # the machine slows down in round 1 for both engines: per round the ratio stays 2
    top, bottom = [200.0, 100.0, 210.0], [100.0, 50.0, 105.0]
    out = per_round_ratio(top, bottom)
    assert out["per_round"] == [2.0, 2.0, 2.0] and out["median"] == out["min"] == out["max"] == 2.0
    # a round where either run gave no figure has no ratio, and is not counted
    out = per_round_ratio([100.0, None, 90.0], [50.0, 40.0, 30.0])
    assert out["per_round"] == [2.0, None, 3.0] and out["runs"] == 2 and out["median"] == 2.5


def test_quantiles_keep_a_distribution_to_draw_its_cdf_from():
    from streamapp_bench.rounds import quantile_levels, quantiles

    values = list(range(1, 1001))  # 1 … 1000 ms
    q = quantiles(values)
    levels = quantile_levels()
    assert len(q) == len(levels) == 102 and levels[-2:] == [0.999, 1.0]
    assert q[0] == 1 and q[50] == 501 and q[99] == 990 and q[-2] == 999 and q[-1] == 1000
    assert q == sorted(q)
    assert quantiles([]) == []


def runs_of(rates: dict[str, list[float]], **first_extra) -> dict[str, list[dict]]:
    return {e: [{"events_per_s": r, "measured_seconds": 30.0 + i, "output_seconds": 40.0, "finished": True, "round": i,
                 **(first_extra.get(e, {}) if i == 0 else {})} for i, r in enumerate(rs)] for e, rs in rates.items()}


RATES = {"runtime": [60_000.0, 30_000.0, 66_000.0], "runtime-nodlq": [62_000.0, 31_000.0, 64_000.0],
         "handwritten": [50_000.0, 30_000.0, 60_000.0], "handwritten-plain": [40_000.0, 25_000.0, 50_000.0],
         "kstreams": [240_000.0, 120_000.0, 264_000.0],
         "raw": [1_500_000.0, 1_000_000.0, 2_000_000.0]}


def test_throughput_figures_give_each_engine_its_spread_its_backlog_and_the_median_runs_profile():
    from streamapp_bench.dataplane_figures import live_rate, ratios, throughput_figures

    runs = runs_of(RATES, kstreams={"n": 7_000_000, "at_default_n": {"events_per_s": 200_000.0, "output_seconds": 16.0,
                                                                       "measured_seconds": 11.0}},
                   raw={"passes": 20})
    for i, r in enumerate(runs["runtime"]):
        r["batch_profile"] = {"batches": 10 + i}
    t = throughput_figures(runs)
    assert t["runtime"]["events_per_s"] == {"median": 60_000.0, "min": 30_000.0, "max": 66_000.0, "runs": 3}
    assert t["runtime"]["measured_seconds"]["median"] == 31.0
    assert t["runtime"]["batch_profile"] == {"batches": 10}  # of the run at the median rate
    assert t["kstreams"]["n"] == 7_000_000 and t["kstreams"]["at_default_n"]["output_seconds"] == 16.0
    assert all("at_default_n" not in r for r in t["kstreams"]["runs"])
    assert t["raw"]["passes"] == 20 and "n" not in t["runtime"]
    r = ratios(runs)
    assert r["a_over_b"]["per_round"] == [1.2, 1.0, 1.1] and r["a_over_b"]["median"] == 1.1
    assert r["a_over_c"]["median"] == 0.25 and r["a_over_d"]["runs"] == 3
    assert r["a_over_b_plain"]["per_round"] == [1.5, 1.2, 1.32]
    assert set(r) == {"a_over_b", "a_over_b_plain", "a_over_c", "a_over_d", "a_over_a_nodlq", "a_nodlq_over_b",
                      "a_nodlq_over_c"}
    assert set(ratios(runs_of({"runtime": [1.0], "handwritten": [2.0]}))) == {"a_over_b"}
    assert live_rate(t, ("runtime", "handwritten", "kstreams")) == 25_000.0  # half (b)'s median
    assert live_rate({}, ("runtime",)) == 1000.0


def saved_dataplane(quick: bool = False) -> dict:
    """A results file as the data-plane bench writes it, 3 rounds."""
    from streamapp_bench.dataplane_figures import latency_figures, ratios, throughput_figures
    from streamapp_bench.rounds import quantiles

    runs = runs_of(RATES, kstreams={"n": 7_000_000, "at_default_n": {"events_per_s": 200_000.0, "output_seconds": 16.0,
                                                                       "measured_seconds": 11.0}},
                   raw={"passes": 20})
    runs["kstreams"][2]["output_seconds"] = 25.0
    lat = {e: [{"p50_ms": p50 + 100 * i, "p99_ms": 3 * p50, "cdf": quantiles([p50, 2 * p50, 3 * p50]), "round": i}
               for i in range(3)] for e, p50 in (("runtime", 1900.0), ("handwritten", 2000.0), ("kstreams", 500.0))}
    result = {"n": 3_000_000, "counted": 2_713_075, "partitions": 4, "users": 5000, "rounds": 3,
              "max_offsets_per_trigger": 100_000, "throughput": throughput_figures(runs), "ratios": ratios(runs),
              "live_rate": 25_000.0, "latency": latency_figures(lat)}
    return {"name": "dataplane", "command": "make bench", "started": "2026-11-24 20:00 UTC", "seconds": 1500.0,
            "machine": {"cpus": 2, "cpu": "AMD EPYC", "memory_gib": 24, "os": "Linux", "load_at_start": "0.5 0.5 0.5"},
            "versions": {"Spark (pyspark)": "4.0.0"}, "result": json.loads(json.dumps(result)),
            "args": {"live_seconds": 30, "min_seconds": 30, "quick": quick}}


class _Backlogs:
    """Backlogs of N events, 90 % of them counted, without a broker: the sizing rules only read sizes."""

    def of(self, n, value_format="json"):
        return f"backlog-{n}-{value_format}", n, n * 9 // 10


def test_the_first_run_of_each_engine_decides_the_backlog_of_all_its_rounds(monkeypatch, tmp_path):
    from streamapp_bench import dataplane, engines

    rates = {"fast": 300_000.0, "fine": 90_000.0, "slow": 19_000.0}  # events/s of each engine
    calls = []

    def run_at(bed, run, engine, counted, total, timeout, probe_seconds=0):
        calls.append((engine, total, probe_seconds))
        seconds = total / rates[engine]
        if probe_seconds and seconds > 3 * probe_seconds:  # what measure.too_long stops
            return {"finished": False, "stopped_early": True, "events_per_s": rates[engine], "output_seconds": 30.0,
                    "measured_seconds": 24.0}
        return {"finished": True, "events_per_s": rates[engine], "output_seconds": seconds, "measured_seconds": seconds}

    monkeypatch.setattr(dataplane, "throughput", run_at)
    base = engines.Run("127.0.0.1:9", "", "", tmp_path, "updates", 100_000, 4)
    each = dataplane.ThroughputRounds(None, base, _Backlogs(), 3_000_000, min_seconds=30, timeout=60)
    first = {e: each.run(0, e) for e in rates}
    assert [(e, n) for e, n, _ in calls] == [("fast", 3_000_000), ("fast", 12_000_000), ("fine", 3_000_000),
                                             ("slow", 3_000_000), ("slow", 1_000_000)]
    assert [p for _, _, p in calls] == [30, 0, 30, 30, 0]  # only a first run may be stopped early
    assert first["fast"]["n"] == 12_000_000 and first["fast"]["at_default_n"]["output_seconds"] == 10.0
    assert "n" not in first["fine"] and "at_default_n" not in first["fine"]
    assert first["slow"]["n"] == 1_000_000 and first["slow"]["at_default_n"]["stopped_early"]
    calls.clear()
    assert each.run(1, "slow")["n"] == 1_000_000 and calls == [("slow", 1_000_000, 0)]

    # started from the previous results' backlogs: kept where the rule keeps them, no sizing run
    calls.clear()
    each = dataplane.ThroughputRounds(None, base, _Backlogs(), 3_000_000, min_seconds=30, timeout=60,
                                      first_n={"fast": 12_000_000, "slow": 1_000_000, "fine": 30_000_000})
    first = {e: each.run(0, e) for e in rates}
    assert [(e, n) for e, n, _ in calls] == [("fast", 12_000_000), ("fine", 30_000_000), ("fine", 4_000_000),
                                             ("slow", 1_000_000)]
    assert first["fast"]["n"] == 12_000_000 and first["fast"]["first_n"] == 12_000_000 and "at_default_n" not in first["fast"]
    assert first["slow"]["n"] == 1_000_000 and not first["slow"].get("stopped_early")
    assert first["fine"]["n"] == 4_000_000 and first["fine"]["first_n"] == 30_000_000  # too slow for it: made smaller


def test_the_readme_table_shows_medians_with_their_spread_and_the_ratios_per_round(tmp_path):
    from streamapp_bench import report

    readme = tmp_path / "bench" / "README.md"
    results = tmp_path / "bench" / "results"
    results.mkdir(parents=True)
    readme.write_text(f"# x\n\n## Figures\n\n{report.BEGIN}\nold\n{report.END}\nafter\n")
    (results / "dataplane.json").write_text(json.dumps(saved_dataplane()))
    report.update_readme(readme, results)
    text = readme.read_text()
    assert "old" not in text and text.endswith(f"{report.END}\nafter\n")
    assert "3 rounds: every engine once per round, interleaved, every other round reversed (a, a′, b, c, d, d, c, …)" in text
    assert "| (a) StreamApp runtime | 60,000 (30,000–66,000) | 31 s | 1.00 | 2.00 s (1.90–2.10) | 5.70 s |" in text
    assert "| (b) hand-written PySpark | 50,000 (30,000–60,000) | 31 s | 1.10 (1.00–1.20) | 2.10 s (2.00–2.20) | 6.00 s |" in text
    assert "| (c) Kafka Streams | 240,000 (120,000–264,000) | 31 s (N = 7,000,000) | 0.25 | 0.60 s (0.50–0.70) | 1.50 s |" in text
    assert "| (d) raw consumer | 1,500,000 (1,000,000–2,000,000) | 31 s (20 passes) | 0.03 (0.03–0.04) | — | — |" in text
    assert "| (b₀) hand-written PySpark, Spark's defaults | 40,000 (25,000–50,000) | 31 s | 1.32 (1.20–1.50) | — | — |" in text
    assert "Per round: (a)/(b₀) = 1.32 (1.20–1.50) (meets ≥ 1.2 by its median: the compiler’s settings" in text
    assert "(a)/(b) = 1.10 (1.00–1.20) (the same job" in text and "(a)/(c) = 0.25 (misses ≥ 0.5 by its median; goal 1)" in text
    assert "Windowed p99 at 25,000 events/s: 5.70 s (misses ≤ 1 s)." in text
    assert "(c) at N = 3,000,000 wrote output for 16 s (200,000 events/s)" in text
    assert "Runs that still wrote output for less than 30 s: (c) 25 s (round 3)." in text
    assert "](results/dataplane-throughput.png)" in text and "](results/dataplane-latency.png)" in text
    assert "--quick" not in text


def test_a_quick_runs_figures_go_to_a_readme_of_their_own_labelled_as_such(tmp_path):
    from streamapp_bench import report

    (tmp_path / "dataplane.json").write_text(json.dumps(saved_dataplane(quick=True)))
    report.update_readme(tmp_path / "README.md", tmp_path)
    text = (tmp_path / "README.md").read_text()
    assert text.startswith("# Figures of a `--quick` bench run (not the project's figures)")
    assert "](./dataplane-throughput.png)" in text and "a `--quick` run: small inputs" in text


def test_quick_changes_only_what_the_command_line_left_open():
    from streamapp_bench.__main__ import BENCH_DIR, DEFAULT_BENCHES, parse

    full = parse([])
    assert full.benches == list(DEFAULT_BENCHES) and (full.n, full.rounds, full.min_seconds) == (5_000_000, 3, 30)
    assert full.results == BENCH_DIR / "results" and full.readme == BENCH_DIR / "README.md" and not full.quick
    quick = parse(["dataplane", "--quick", "--rounds", "3"])
    assert (quick.n, quick.rounds, quick.live_seconds) == (500_000, 3, 10)
    assert quick.results == BENCH_DIR / "results-quick" and quick.readme == BENCH_DIR / "results-quick" / "README.md"
    assert parse(["all", "--repeats", "4"]).rounds == 4 and len(parse(["all"]).benches) == 7
