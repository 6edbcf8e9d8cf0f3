"""Crash and restart: kill -9 the driver mid-run, SIGTERM it later (it stops after the batch in
flight), finish on the same checkpoint.

Postgres must then hold exactly what the click stream gives when computed here in plain Python (the
uninterrupted result), and every expected key must be on the Kafka topic (at-least-once: duplicates
are allowed there, missing keys are not).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import psycopg
import pytest
import yaml

from streamapp_testkit.manifests import click_sessions_manifest
from streamapp_testkit.runtime import closed_click_windows as expected
from streamapp_testkit.runtime import consume, s3_checkpoint, start_run, wait_while_running, watermark_flush
from streamapp_testbed import clickstream
from streamapp_testbed.kafka_admin import create_topic, produce

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def committed_batches(dsn: str, query: str) -> int:
    with psycopg.connect(dsn) as conn:
        exists = conn.execute("SELECT to_regclass('streamapp_batches')").fetchone()[0]
        if exists is None:
            return 0
        return conn.execute("SELECT count(DISTINCT batch_id) FROM streamapp_batches WHERE query = %s", (query,)).fetchone()[0]


@pytest.mark.parametrize("store", ["volume", "s3"])
def test_kill_9_then_sigterm_then_finish_gives_the_uninterrupted_result(kafka, postgres, names, tmp_path, store, request):
    topic, out, table = names("clicks"), names("summaries"), f"stats_{os.urandom(3).hex()}"
    create_topic(kafka.bootstrap, topic, partitions=2)
    events = clickstream.generate(seed=3, users=12, minutes=5)
    produce(kafka.bootstrap, topic, [(e.session_id, e.to_json()) for e in events])
    path = tmp_path / "app.yaml"
    doc = click_sessions_manifest(topic, out, table, max_offsets_per_trigger=250)
    checkpoint, env = tmp_path / "checkpoint", {}
    if store == "s3":  # the app's own object-store location; the key pair as a driver pod gets it from its Secret
        checkpoint, env = s3_checkpoint(request.getfixturevalue("object_store"), doc)
    path.write_text(yaml.safe_dump(doc))
    log = tmp_path / "run.log"
    query = f"sessions-{table}"

    progress = tmp_path / "progress.jsonl"
    first = start_run(path, kafka.bootstrap, checkpoint, log, postgres=postgres.dsn, STREAMAPP_PROGRESS_JSON=str(progress),
                      **env)
    wait_while_running(lambda: committed_batches(postgres.dsn, query) >= 2 and progress.exists()
                       and query in progress.read_text(), first, log)
    os.killpg(first.pid, signal.SIGKILL)  # the driver and its JVM, as when a pod dies
    first.wait(30)
    # Spark's whole progress per batch, for profiling: each phase's duration, the state operator's figures.
    batches = [json.loads(line) for line in progress.read_text().splitlines()]
    ours = [b for b in batches if b["name"] == query]
    assert ours and all(b["durationMs"]["triggerExecution"] >= b["durationMs"]["addBatch"] for b in ours)
    assert [b["batchId"] for b in ours] == sorted({b["batchId"] for b in ours})
    assert all(b["stateOperators"] and "commitTimeMs" in b["stateOperators"][0] for b in ours)
    killed_at = committed_batches(postgres.dsn, query)

    second = start_run(path, kafka.bootstrap, checkpoint, log, postgres=postgres.dsn, **env)
    wait_while_running(lambda: committed_batches(postgres.dsn, query) > killed_at, second, log)
    at_sigterm = committed_batches(postgres.dsn, query)
    second.send_signal(signal.SIGTERM)
    assert second.wait(120) == 0, log.read_text()[-3000:]
    assert "stop requested" in log.read_text()
    # the backlog is several batches (maxOffsetsPerTrigger): stop means after the batch in flight
    assert committed_batches(postgres.dsn, query) - at_sigterm <= 1

    flush = watermark_flush(events)
    produce(kafka.bootstrap, topic, [(flush.session_id, flush.to_json())])
    third = start_run(path, kafka.bootstrap, checkpoint, log, available_now=True, postgres=postgres.dsn, **env)
    assert third.wait(400) == 0, log.read_text()[-3000:]

    want = expected([*events, flush])  # every window of the events: the flush closed them all
    with psycopg.connect(postgres.dsn) as conn:
        rows = conn.execute(f"SELECT session_id, uuid, window_start, clicks, page_views, time_spent FROM {table}").fetchall()
    got = {(s, u, w): (c, p, t) for s, u, w, c, p, t in rows}
    assert len(got) == len(rows) == len(want) > 30
    assert got == want
    # At-least-once: the restarted runs may write some summaries twice, so read all the runs wrote
    # instead of stopping after len(want) records (that missed the tail once).
    summaries = consume(kafka.bootstrap, out, timeout=120, to_end=True)
    seen = {(r["key"], r["value"]["window_start"]) for r in summaries}
    assert {(s, clickstream.iso(w).replace("000Z", "Z")) for s, _, w in want} <= seen


def test_a_second_driver_on_one_s3_checkpoint_fences_the_first_out(kafka, postgres, object_store, names, tmp_path):
    """What a pod force-deleted from a partitioned node would do: keep running while the operator starts
    its successor on the same object-store checkpoint. The newer driver takes the checkpoint's owner
    marker; the older one sees it within seconds, stops every query and exits 1."""
    topic, out, table = names("clicks"), names("summaries"), f"fence_{os.urandom(3).hex()}"
    create_topic(kafka.bootstrap, topic, partitions=2)
    events = clickstream.generate(seed=5, users=8, minutes=5)
    produce(kafka.bootstrap, topic, [(e.session_id, e.to_json()) for e in events])
    doc = click_sessions_manifest(topic, out, table, max_offsets_per_trigger=250)
    checkpoint, env = s3_checkpoint(object_store, doc)
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(doc))
    old_log, new_log = tmp_path / "old.log", tmp_path / "new.log"
    query = f"sessions-{table}"
    old = start_run(path, kafka.bootstrap, checkpoint, old_log, postgres=postgres.dsn, **env)
    wait_while_running(lambda: committed_batches(postgres.dsn, query) >= 1, old, old_log)

    new = start_run(path, kafka.bootstrap, checkpoint, new_log, postgres=postgres.dsn, **env)
    try:
        # From the takeover on, not from the new driver's start: a JVM start on a busy machine took 70 s.
        wait_while_running(lambda: "waiting 10s for it to see the takeover" in new_log.read_text(), new, new_log,
                           timeout=300, what="the new driver's takeover")
        try:
            assert old.wait(90) == 1, old_log.read_text()[-3000:]
        except subprocess.TimeoutExpired:
            pytest.fail(f"the fenced-out driver still runs 90 s after the takeover:\n{old_log.read_text()[-3000:]}")
        assert "fenced out: another driver" in old_log.read_text()
        at_handover = committed_batches(postgres.dsn, query)
        produce(kafka.bootstrap, topic, [(f.session_id, f.to_json()) for f in [watermark_flush(events)]])
        wait_while_running(lambda: committed_batches(postgres.dsn, query) > at_handover, new, new_log)
    finally:
        new.send_signal(signal.SIGTERM)
        assert new.wait(120) == 0, new_log.read_text()[-3000:]
