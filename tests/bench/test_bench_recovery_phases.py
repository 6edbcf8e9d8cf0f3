"""A driver's start in phases, from the pod's timestamps and the driver log's (recovery bench)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit

KILLED = 1795838291.742236  # 2026-11-28T03:58:11.742236Z


def pod(created: str, started: str | None) -> dict:
    status = {"containerStatuses": [{"name": "driver", "state": {"running": {"startedAt": started}} if started else
                                     {"waiting": {"reason": "ContainerCreating"}}}]}
    return {"metadata": {"creationTimestamp": created}, "status": status}


LOG = [
    "2026-11-28T03:58:20.870512345Z 2026-11-28 03:58:20,870 INFO checkpoint ... was held by 8c39 (not released)",
    "2026-11-28T03:58:33.100000001Z 2026-11-28 03:58:33,100 INFO Spark session started",
    "2026-11-28T03:58:34.000000000Z 26/11/28 03:58:34 ERROR Utils: Uncaught exception in thread Thread-3",
    "2026-11-28T03:58:46.704000000Z 2026-11-28 03:58:46,704 INFO shuffle partitions: 2",
    "2026-11-28T03:58:53.182000000Z 2026-11-28 03:58:53,182 INFO started query sessions-out (kafka, append mode) checkpoint /c",
    "2026-11-28T03:58:53.500000000Z 2026-11-28 03:58:53,500 INFO started query sessions-dlq (dlq, append mode) checkpoint /c",
    "2026-11-28T03:58:53.600000000Z 2026-11-28 03:58:53,600 INFO metrics and health on :9090 (/metrics, /healthz)",
]


def test_a_kill_is_split_into_operator_pod_session_start_up_and_first_batch():
    from streamapp_bench.recovery_phases import PHASES, phases

    parts = phases(pod("2026-11-28T03:58:18Z", "2026-11-28T03:58:19Z"), LOG, KILLED, KILLED + 80.0)
    assert list(parts) == list(PHASES)
    assert parts == {"operator": pytest.approx(6.26, abs=0.01), "pod start": 1.0,
                     "Spark session": pytest.approx(14.1, abs=0.01), "driver start-up": pytest.approx(20.4, abs=0.01),
                     "first batch": pytest.approx(38.24, abs=0.01)}  # to the last query started, then to the commit
    assert sum(parts.values()) == pytest.approx(80.0, abs=0.01)


def test_whole_second_pod_times_before_the_kill_count_as_no_time_and_a_missing_mark_gives_none():
    from streamapp_bench.recovery_phases import phases

    early = phases(pod("2026-11-28T03:58:11Z", "2026-11-28T03:58:11Z"), LOG, KILLED, KILLED + 80.0)
    assert early["operator"] == 0 and early["pod start"] == 0 and sum(early.values()) == pytest.approx(80.0, abs=0.01)
    assert phases(pod("2026-11-28T03:58:18Z", None), LOG, KILLED, KILLED + 80.0) is None  # not started
    without_session = [line for line in LOG if "Spark session" not in line]  # an image from before the mark
    assert phases(pod("2026-11-28T03:58:18Z", "2026-11-28T03:58:19Z"), without_session, KILLED, KILLED + 80.0) is None


def test_the_report_shows_each_phase_and_the_figure(tmp_path):
    from streamapp_bench import report
    from streamapp_bench.recovery_phases import phases, plot

    parts = phases(pod("2026-11-28T03:58:18Z", "2026-11-28T03:58:19Z"), LOG, KILLED, KILLED + 80.0)
    result = {"cold": {"to_running_s": 10.0, "to_first_batch_s": 118.6, "phases": None},
              "restarts": [{"to_running_s": 8.0, "to_first_batch_s": 80.0, "phases": parts}],
              "trigger_s": 5.0, "rate": 20, "restart_backoff": "1s", "cluster": "kind",
              "restart_p50_to_first_batch_s": 80.0, "target_s": 123.6}
    lines = report.recovery({"result": result})
    assert "| kill 1 | 8.0 s | 80.0 s | 6.3 s | 1.0 s | 14.1 s | 20.4 s | 38.2 s |" in lines
    assert "| cold start (`kubectl apply`) | 10.0 s | 118.6 s | — | — | — | — | — |" in lines
    assert lines[-1] == "![recovery: each start in phases](bench/results/recovery.png)"
    plot(tmp_path / "recovery.png", [("kill 1", parts)], "t")
    assert (tmp_path / "recovery.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
