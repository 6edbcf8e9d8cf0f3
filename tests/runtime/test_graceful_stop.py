"""Stopping as a user sees it: SIGTERM to `streamapp run` mid-backlog commits at most the batch in
flight and a restart finishes the rest, each window written once; a real-time app exits within
seconds of SIGTERM; `--available-now` on an app with a `ttl` ends by itself once its records are read."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import yaml

from streamapp_testkit.manifests import click_sessions_manifest
from streamapp_testkit.runtime import REPO, app, consume, produce, start_run, ts, wait_while_running, watermark_flush
from streamapp_testkit.runtime import closed_click_windows as expected
from streamapp_runtime.run import runner
from streamapp_runtime.run.settings import Settings
from streamapp_testbed import clickstream
from streamapp_testbed.kafka_admin import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def commits(checkpoint) -> int:
    """The batches the app's queries committed: the files of each query's commits/ folder."""
    return sum(1 for d in checkpoint.rglob("commits") for f in d.iterdir() if f.name.isdigit())


def test_sigterm_mid_backlog_commits_at_most_the_batch_in_flight_and_a_restart_finishes(kafka, names, tmp_path):
    topic, out = names("clicks"), names("summaries")
    create_topic(kafka.bootstrap, topic, partitions=2)
    events = clickstream.generate(seed=3, users=12, minutes=5)
    produce(kafka.bootstrap, topic, [(e.session_id, e.to_json()) for e in events])
    doc = click_sessions_manifest(topic, out, "unused", name=names("app")[:50].rstrip("-"), max_offsets_per_trigger=60)
    doc["spec"]["sinks"] = [s for s in doc["spec"]["sinks"] if "kafka" in s]  # Kafka only: duplicates would show
    path, checkpoint, log = tmp_path / "app.yaml", tmp_path / "checkpoint", tmp_path / "run.log"
    path.write_text(yaml.safe_dump(doc))

    first = start_run(path, kafka.bootstrap, checkpoint, log)
    wait_while_running(lambda: commits(checkpoint) >= 2, first, log, what="two committed batches")
    before = commits(checkpoint)
    first.send_signal(signal.SIGTERM)
    assert first.wait(120) == 0, log.read_text()[-3000:]
    after = commits(checkpoint)
    # ~16 batches of backlog: stopping "between batches" used to mean once the backlog was read
    assert after - before <= 1, f"{after - before} batches committed after SIGTERM"
    assert "stop requested" in log.read_text()

    flush = watermark_flush(events)
    produce(kafka.bootstrap, topic, [(flush.session_id, flush.to_json())])
    second = start_run(path, kafka.bootstrap, checkpoint, log, available_now=True)
    assert second.wait(400) == 0, log.read_text()[-3000:]
    assert commits(checkpoint) >= after + 10  # the rest of the backlog was left for the restart

    want = expected([*events, flush])
    written = consume(kafka.bootstrap, out, timeout=60, idle=10)
    keys = [(r["key"], r["value"]["uuid"], r["value"]["window_start"]) for r in written]
    assert len(keys) == len(set(keys)), "a window written twice: a batch was replayed after the stop"
    assert sorted(keys) == sorted((s, u, clickstream.iso(w).replace("000Z", "Z")) for s, u, w in want)


def test_a_realtime_app_exits_within_10s_of_sigterm(kafka, names, tmp_path):
    source, out = names("clicks"), names("feed")
    create_topic(kafka.bootstrap, source, partitions=1)
    doc = yaml.safe_load((REPO / "examples" / "click-feed.yaml").read_text())
    doc["metadata"]["name"] = names("app")[:50].rstrip("-")
    doc["spec"]["sources"][0].update(topic=source, startingOffsets="earliest")
    doc["spec"]["sinks"][0]["kafka"]["topic"] = out
    path, log = tmp_path / "app.yaml", tmp_path / "run.log"
    path.write_text(yaml.safe_dump(doc))
    events = [e for e in clickstream.generate(seed=4, users=3, minutes=1) if e.event == "click"][:5]
    produce(kafka.bootstrap, source, [(e.session_id, e.to_json()) for e in events])
    run = start_run(path, kafka.bootstrap, tmp_path / "checkpoint", log)
    try:
        assert len(consume(kafka.bootstrap, out, expect=len(events), timeout=120)) == len(events)
        wait_while_running(lambda: "started query" in log.read_text(), run, log)
        signalled = time.monotonic()
        run.send_signal(signal.SIGTERM)
        code = run.wait(60)
        took = time.monotonic() - signalled
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(30)
    assert code == 0, log.read_text()[-3000:]
    assert took < 10, f"exited {took:.1f}s after SIGTERM"


def test_available_now_with_a_ttl_ends_by_itself_with_every_record(kafka, spark, names, tmp_path):
    topic, out = names("invoices"), names("totals")
    create_topic(kafka.bootstrap, topic, partitions=1)
    the_app = app(names("app"), {
        "sources": [{"name": "invoices", "topic": topic, "schema": {"invoice": "string", "card": "string", "amount": "double",
                                                                    "ts": "timestamp"}}],
        "streams": [{"name": "totals", "from": "invoices", "steps": [
            {"accumulate": {"key": ["card"], "columns": {"total": "sum(amount)"}, "ttl": "1h"}}]}],
        "sinks": [{"from": "totals", "kafka": {"topic": out, "key": "invoice"}}],
    })
    invoices = [{"invoice": f"i{i:02d}", "card": f"c{i % 3}", "amount": float(i), "ts": ts(i)} for i in range(20)]
    produce(kafka.bootstrap, topic, [(v["card"], v) for v in invoices])
    settings = Settings(checkpoint_root=str(tmp_path), kafka_override=kafka.bootstrap, available_now=True, metrics_port=None)
    running = runner.start(spark, the_app, settings, quiet=True, wait_for_topics=False)
    result: list[int] = []
    supervisor = threading.Thread(target=lambda: result.append(runner.supervise(spark, running)), daemon=True)
    supervisor.start()
    supervisor.join(120)
    if supervisor.is_alive():  # what a ttl did before: an empty batch at every trigger, for ever
        running.stop_requested.set()
        supervisor.join(120)
        pytest.fail("the available-now run did not end by itself within 120 s")
    assert result == [0]

    written = consume(kafka.bootstrap, out, expect=len(invoices))
    last = {}
    for r in written:
        last[r["value"]["card"]] = max(last.get(r["value"]["card"], 0.0), r["value"]["total"])
    assert sorted(r["key"] for r in written) == sorted(v["invoice"] for v in invoices)
    assert last == {f"c{c}": float(sum(range(c, 20, 3))) for c in range(3)}
