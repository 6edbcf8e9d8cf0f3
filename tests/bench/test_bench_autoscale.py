"""The autoscale bench's figures from per-second samples: decision, executors running tasks, lag back,
restarts, changes under steady load; the exact row reference; the table bench/README.md shows."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit
STEP, BACK, TRIGGER = 30.0, 90.0, 4.0


def run_samples(decided: float = 40.0, tasks_at: float = 52.0, uids: tuple[str, ...] = ("a",), restart_at: float = 1e9,
                lag_back_at: float = 75.0) -> list[dict]:
    """A run sampled once a second: 1 executor, ×4 at STEP, 3 executors decided at `decided` (shown a
    second later), running tasks at `tasks_at`, lag high after the step until `lag_back_at`; back at BACK."""
    out = []
    for t in range(0, 120):
        phase = "base" if t < STEP else "step" if t < BACK else "back"
        # lag saws up between triggers: 0 after a batch, up to 400 before the next
        saw = (t % int(TRIGGER)) * 100
        lag = saw + (5000 if STEP + 3 <= t < lag_back_at else 0)
        target = 3 if decided + 1 <= t < 110 else 1
        out.append({"t": float(t), "phase": phase, "produced": 100 if phase != "step" else 400, "lag": lag,
                    "target": target, "decided_at": decided if target == 3 else (110.0 if t >= 110 else None),
                    "pods": target if t >= tasks_at or target == 1 else 1,
                    "with_tasks": 3 if tasks_at <= t < 110 else 1, "registered": 1, "batch_s": 1.0,
                    "driver_uid": uids[0] if t < restart_at else uids[-1], "driver_restarts": 0, "last_batch": t - 1.0})
    return out


def test_the_step_is_timed_to_the_decision_the_executors_running_tasks_and_the_lag_back():
    from streamapp_bench.autoscale_analysis import analyse

    f = analyse(run_samples(), STEP, BACK, TRIGGER)
    assert f["pre_step_lag"] == 300  # the highest lag in the 30 s before the step: one trigger's arrivals
    assert (f["target_before_step"], f["target_after_step"]) == (1, 3)
    assert f["step_to_decision_s"] == 10.0  # lastDecisionTime, not the sample that first showed it
    assert f["decision_to_tasks_s"] == 12.0 and f["step_to_tasks_s"] == 22.0
    assert f["step_to_lag_back_s"] == 45.0  # the low point per trigger back at 300 or less
    assert f["back_to_scale_down_s"] == 20.0
    assert f["driver_restarts"] == 0 and f["changes_under_steady_load"] == 0


def test_a_new_driver_pod_counts_as_a_restart_and_a_change_in_the_base_phase_as_flapping():
    from streamapp_bench.autoscale_analysis import analyse, restarts_at

    samples = run_samples(uids=("a", "b"), restart_at=45.0)
    for s in samples:
        if 10 <= s["t"] < 15:
            s["target"] = 2
    f = analyse(samples, STEP, BACK, TRIGGER)
    assert f["driver_restarts"] == 1 and f["driver_pods"] == 2
    assert f["changes_under_steady_load"] == 2  # 1 → 2 and back, both under the base rate
    assert restarts_at({"samples": samples, "step_at": STEP}) == [15.0]


def test_without_spark_rest_api_the_registered_executors_and_a_batch_after_them_count():
    from streamapp_bench.autoscale_analysis import analyse

    samples = run_samples()
    for s in samples:
        s["with_tasks"] = None
        s["registered"] = 3 if s["t"] >= 50 else 1
        s["last_batch"] = 4.0 * (s["t"] // 4)  # a batch every trigger
    assert analyse(samples, STEP, BACK, TRIGGER)["decision_to_tasks_s"] == 12.0  # registered at 50, a batch at 52


def test_a_lag_that_never_comes_back_has_no_figure_and_misses_the_bar():
    from streamapp_bench.autoscale_analysis import analyse, summary

    f = analyse(run_samples(lag_back_at=1e9), STEP, BACK, TRIGGER)
    assert f["step_to_lag_back_s"] is None
    rows = {"produced": 10, "in_table": 10, "lost": 0, "duplicated": 0}
    s = summary([{"method": "inPlace", "round": 1, "figures": f, "rows": rows}])["inPlace"]
    assert s["meets"] == {"decision_to_tasks_le_30s": True, "lag_back_le_3min": False,
                          "seconds_behind_back_le_3min": False, "no_rows_lost_or_duplicated": True,
                          "no_driver_restart": True}


def test_an_app_that_keeps_up_at_x4_is_back_in_seconds_behind_though_not_in_records():
    """×4 input: four times the records arrive while a batch runs, so the lag right after each batch
    stays above its pre-step level in records; in seconds of input behind it is back once the
    backlog of the step is gone."""
    from streamapp_bench.autoscale_analysis import analyse

    samples = run_samples(lag_back_at=75.0)
    for s in samples:
        if s["phase"] == "step":
            s["lag"] = (s["t"] % int(TRIGGER)) * 400 + 400 + (5000 if s["t"] < 75 else 0)
    f = analyse(samples, STEP, BACK, TRIGGER)
    # before the step: at most 300 records behind at 100/s; during it the low point is 400 records at 400/s
    assert f["pre_step_lag"] == 300 and f["pre_step_behind_s"] == 3.0
    assert f["step_to_lag_back_s"] is None
    assert f["step_to_behind_back_s"] == 46.0  # the first low after the backlog went (75 s): 400 at 400/s


def test_a_lag_thrown_up_again_by_a_later_rescale_counts_from_when_it_stays_back():
    from streamapp_bench.autoscale_analysis import analyse

    samples = run_samples(lag_back_at=50.0)  # back once at 50 s ...
    for s in samples:
        if 60 <= s["t"] < 80:  # a driver restart: no batch, the backlog grows
            s["lag"] += 9000
    assert analyse(samples, STEP, BACK, TRIGGER)["step_to_lag_back_s"] == 50.0  # 80, not 75


def test_rows_are_compared_per_key_with_what_the_broker_acknowledged():
    from streamapp_testbed.load_app import compare

    assert compare({"k1": 5, "k2": 3, "k3": 1}, {"k1": 5, "k2": 4}) == {
        "produced": 9, "in_table": 9, "lost": 1, "duplicated": 1}


def test_csv_round_trip_and_readme_table(tmp_path):
    from streamapp_bench import autoscale_analysis as a
    from streamapp_bench import report

    samples = run_samples()
    figures = a.analyse(samples, STEP, BACK, TRIGGER)
    run = {"method": "restart", "round": 1, "step_at": STEP, "back_at": BACK, "figures": figures,
           "rows": {"produced": 10, "in_table": 10, "lost": 0, "duplicated": 0}, "samples": samples}
    a.write_csv(tmp_path / "autoscale.csv", [run])
    saved = {k: v for k, v in run.items() if k != "samples"}
    again = a.read_csv(tmp_path / "autoscale.csv", {"runs": [saved]})
    assert a.analyse(again[0]["samples"], STEP, BACK, TRIGGER) == figures
    options = {"rate": 100, "factor": 4, "work": 10, "partitions": 8, "trigger": "4s", "base_s": 30, "step_s": 60,
               "back_s": 30, "up_window": "15s", "down_window": "60s", "executor_cpu": "150m", "max_executors": 4}
    result = {"options": options, "node_allocatable": {"cpu": "2"}, "summary": a.summary([run]), "runs": [saved],
              "skipped": {"inPlace": "not in this tree"}}
    lines = report.autoscale({"result": result})
    assert "| restart | 1→3 | 10 s | 12 s | 45 s | 45 s | 5,300 | 0 | 0 / 0 | 0 |" in lines
    assert any("Not run: inPlace" in line for line in lines)
