"""Smoke runs of every benchmark harness on the real test bed: tiny inputs, seconds of work each.

They check that each harness starts its engine, reads what the broker recorded and produces figures
of the right shape. No assertion is about speed: the benchmark itself is `make bench`.
"""

from __future__ import annotations

import json

import pytest

from streamapp_testbed.bed import TestBed

pytestmark = [pytest.mark.integration, pytest.mark.slow]
N = 3000


@pytest.fixture(scope="module")
def backlog(kafka):
    from streamapp_bench import clicks, topics

    topic = topics.create(kafka.bootstrap, "smoke-backlog", 2)
    events = list(clicks.backlog(N, seed=0, users=100))
    topics.produce(kafka.bootstrap, topic, events)
    return topic, sum(clicks.counted(v) for _, v in events)


def _run(kafka, tmp_path, source: str, target: str, **kw):
    from streamapp_bench import engines

    return engines.Run(kafka.bootstrap, source, target, tmp_path, kw.pop("mode", "updates"), kw.pop("max_offsets", 1000), 2, **kw)


# runtime, runtime-eos and runtime-avro are the runtime through this same harness: the latency smoke below
# runs runtime-eos, the DB-write smoke runtime, and the throughput smoke runtime-avro, which reads the
# backlog's events as Avro through the schema registry (its own topic, produced by the bench's code).
@pytest.mark.parametrize("engine", ["runtime-avro", "handwritten", "handwritten-plain", "kstreams"])
def test_throughput_harness_accounts_for_every_event(engine, kafka, schema_registry, backlog, tmp_path):
    from streamapp_bench import dataplane, engines

    topic, counted = backlog
    if engine in engines.INPUT_FORMATS:
        topic, produced, counted = dataplane.produce_backlog(kafka.bootstrap, f"smoke-backlog-{engine}", N, 100, 2,
                                                             engines.INPUT_FORMATS[engine], schema_registry.url)
        assert (produced, counted) == (N, backlog[1])  # the same events
    # Spark's default 200 shuffle partitions make each batch of the plain job cost minutes on the test
    # bed: one batch of the whole backlog checks its harness as well as three.
    limit = {"max_offsets": 0} if engine == "handwritten-plain" else {}
    run = _run(kafka, tmp_path, topic, f"smoke-out-{engine}", registry=schema_registry.url, **limit)
    out = dataplane.throughput(TestBed(tmp_path, kafka=kafka), run, engine, counted, N, timeout=300)
    assert out["finished"], out.get("log_tail")
    assert out["events_accounted"] == counted
    assert out["output_rows"] > 0 and (out["events_per_s"] is None or out["events_per_s"] > 0)
    if engine.startswith("runtime"):  # where its batches went, from Spark's progress
        profile = out["batch_profile"]
        assert profile["batches"] >= 1 and profile["ms"]["addBatch"] > 0 and profile["rows_per_batch"] <= 1000


def test_raw_consumer_reads_the_topic_in_several_passes(kafka, backlog, tmp_path):
    from streamapp_bench import dataplane

    topic, _ = backlog
    out = dataplane.raw_throughput(_run(kafka, tmp_path, topic, ""), N, min_seconds=0.5, timeout=120)
    assert out["finished"] and out["records_read"] == N * out["passes"]
    assert out["events_per_s"] > 0


def test_rounds_run_every_engine_on_the_whole_backlog_in_each_round(kafka, tmp_path):
    from streamapp_bench import dataplane

    # min_seconds=0: an engine's first run is never too short for N. With 0.5, a first run that wrote
    # its output within half a second asked for a larger backlog, which measure.larger_n rounds up to
    # 1,000,000 events: minutes of producing and running here. Sizing is tested in test_bench_rounds.py.
    out = dataplane.run(TestBed(tmp_path, kafka=kafka), tmp_path, n=N, partitions=2, live_seconds=1, max_offsets=1000,
                        users=100, timeout=300, rounds_of_each=2, min_seconds=0, only=("kstreams", "raw"))
    assert out["order"] == [(0, "kstreams"), (0, "raw"), (1, "raw"), (1, "kstreams")]  # every other round reversed
    ks, raw = out["throughput"]["kstreams"], out["throughput"]["raw"]
    assert [r["round"] for r in ks["runs"]] == [0, 1] and all(r["finished"] for r in ks["runs"] + raw["runs"])
    # the backlog the first run decided (here always N) is the backlog of both rounds
    assert len({r.get("n") for r in ks["runs"]}) == 1
    assert all(r["events_accounted"] == r["counted_events"] for r in ks["runs"])
    assert len({r["passes"] for r in raw["runs"]}) == 1 and raw["events_per_s"]["runs"] == 2
    assert "latency" not in out and out["ratios"] == {}


def test_latency_harness_matches_every_event_to_its_window_row(kafka, tmp_path):
    """On the exactly-once runtime (the delivery bench's a-eos): the window rows count once committed."""
    from streamapp_bench import dataplane

    out = dataplane.latency(_run(kafka, tmp_path, "smoke-live-in", "smoke-live-out", max_offsets=0), "runtime-eos",
                            rate=200, seconds=3, timeout=300, warm_seconds=1)
    assert out["finished"], out.get("log_tail")
    assert out["events"] == 600  # the measured seconds only, not the warm-up before them
    assert out["missing"] == 0 and out["latencies"] > 0
    assert 0 <= out["p50_ms"] <= out["p99_ms"] <= out["max_ms"]


def test_db_write_harness_counts_upserts_of_the_example(kafka, postgres, backlog, tmp_path):
    from streamapp_bench import dataplane

    topic, counted = backlog
    out = dataplane.db_writes(_run(kafka, tmp_path, topic, "smoke-db-out"), N, postgres.dsn, timeout=300)
    assert out["exit_code"] == 0
    assert 0 < out["rows_upserted"] < N and 0 < out["db_write_ratio"] < 1
    assert 0 < out["events_in_closed_windows"] <= counted


def test_controlplane_harness_measures_applies_and_failures(kafka, control_plane, kwok, tmp_path):
    from streamapp_bench import controlplane, report

    testbed = TestBed(tmp_path, kafka=kafka, control_plane=control_plane, kwok=kwok)
    out = controlplane.run(testbed, tmp_path, total=4, batch=2, fail=2, nodes=0, settle=1, timeout=120)
    assert [s["apps"] for s in out["steps"]] == [2, 4]
    assert all(s["n"] == 2 and s["p99_s"] is not None and s["rss_mib"] > 0 for s in out["steps"])
    assert {k: v["n"] for k, v in out["failures"].items()} == {"2": 2, "4": 2}
    table = report.controlplane({"result": json.loads(json.dumps(out))})
    assert any(line.startswith("| 4 |") for line in table)


def test_realtime_harness_matches_every_record_in_both_modes(kafka, tmp_path):
    from streamapp_bench import realtime

    for mode in realtime.MODES:
        run = realtime.Run(kafka.bootstrap, f"smoke-rt-in-{mode}", f"smoke-rt-out-{mode}", tmp_path / mode, mode, 2)
        out = realtime.one_run(run, rate=500, seconds=3, timeout=300, warm_seconds=1)
        assert out["finished"], out.get("log_tail")
        assert out["missing"] == 0 and out["latencies"] > 1000  # the clicks and page views of 1,500 events
        assert 0 <= out["p50_ms"] <= out["p99_ms"] <= out["max_ms"]
        assert len(out["cdf"]) == 102
