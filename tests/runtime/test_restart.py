"""Crash and restart of real Spark drivers, with the checkpoint on a volume and on the test bed's S3
server: kill -9s of `streamapp run` at random moments (two on the volume, the second one of a driver
that itself restored a killed one's checkpoint; one on S3, after a batch of the windows, whose state,
replayed batch and owner marker are then read back from the object store); then, on the volume, a
SIGTERM, which stops the driver after the batch in flight, and on S3 a second driver on the same
checkpoint, which fences the first out; a last run finishes the input.

One app goes through all of it: click-sessions (a windowed aggregation, emit: final) to a Kafka
topic, a Postgres table and a Parquet folder partitioned by window_start, and a stateless filter to
another topic and table and into a Delta table upserted by key (a Delta append, whose replays Delta's
own streaming sink guards, is replayed in test_tables.py); every Kafka sink
and the dead-letter topic exactly-once. A reader with isolation.level=read_committed must then see
every window, click and malformed record exactly once, and every table must hold exactly the same
pipeline computed here in plain Python (the uninterrupted result); the Parquet and Delta tables are
read through their logs without Spark (streamapp_testkit.tables).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import time
from collections import Counter

import psycopg
import pytest
import yaml
from confluent_kafka import Producer

from streamapp_testkit.manifests import click_sessions_manifest
from streamapp_testkit.tables import TableFiles, delta_log, delta_rows, parquet_rows, utc
from streamapp_testkit.runtime import (
    closed_click_windows, read_to_end, s3_checkpoint, start_run, wait_while_running, watermark_flush,
)
from streamapp_testbed import clickstream
from streamapp_testbed.kafka_admin import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]
# Each store's kills land at moments of their own (the seed names the store). A kill of a driver that
# itself restored a killed one's checkpoint runs the same code whatever the store: the volume has
# that one. What is S3's own, its files read back after a kill, one kill shows.
KILLS = {"volume": 2, "s3": 1}
MALFORMED = 5
KILLED_BATCH, LAST_BATCH = 60, 3000  # offsets per trigger: small while kills land, then the rest at once


def committed_batches(dsn: str, query: str) -> int:
    with psycopg.connect(dsn) as conn:
        exists = conn.execute("SELECT to_regclass('streamapp_batches')").fetchone()[0]
        if exists is None:
            return 0
        return conn.execute("SELECT count(DISTINCT batch_id) FROM streamapp_batches WHERE query = %s", (query,)).fetchone()[0]


def manifest(topic: str, windows: str, clicks: str, dead: str, windows_table: str, clicks_table: str) -> dict:
    """click-sessions (its windows to Kafka and Postgres) plus a stateless filter (to Kafka and
    Postgres); both Kafka sinks and the dead-letter topic exactly-once (Postgres' batch ledger has the
    same need: a replay must give each partition the same rows); small batches, so that the kills
    land in the middle of the data."""
    doc = click_sessions_manifest(topic, windows, windows_table, name="crash-" + os.urandom(3).hex(),
                                  max_offsets_per_trigger=KILLED_BATCH, delivery="exactly-once")
    spec = doc["spec"]
    spec["streams"].append({"name": "clicks-only", "from": "clicks", "steps": [{"filter": "event = 'click'"}]})
    spec["sinks"] += [
        {"from": "clicks-only", "kafka": {"topic": clicks, "key": "uuid", "delivery": "exactly-once"}},
        {"from": "clicks-only", "postgres": {"secretRef": {"name": "pg"}, "table": clicks_table, "primaryKey": ["uuid", "ts"]}},
        # Tables: relative paths, under the app's own storage (the volume's or the S3 location's tables/).
        {"from": "sessions", "parquet": {"path": "windows/parquet", "partitionBy": ["window_start"]}},
        {"from": "clicks-only", "delta": {"path": "clicks", "mode": "upsert", "key": ["uuid", "ts"]}},
    ]
    spec["deadLetter"] = {"topic": dead, "delivery": "exactly-once"}
    return doc


def produce_in_turn(bootstrap: str, topic: str, records: list, partitions: int) -> None:
    """Record i to partition i mod ``partitions``: every partition advances through event time at the
    same pace, so no batch sees one partition's events so far ahead of another's that the 30 s
    watermark drops some as late (with partitions by key, it did: the reference here has no late rows)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i, (key, value) in enumerate(records):
        producer.produce(topic, key=key, value=value, partition=i % partitions)
    assert producer.flush(60) == 0


def batches_logged(log) -> int:
    return len(re.findall(r"\] batch \d+: in ", log.read_text())) if log.exists() else 0


def duplicates_and_missing(got: Counter, want: Counter) -> str:
    twice = sum(n - 1 for k, n in got.items() if n > 1)
    return f"{sum((want - got).values())} missing, {twice} duplicated, {sum((got - want).values())} not expected"


@pytest.mark.parametrize("store", ["volume", "s3"])
def test_kill_9s_then_a_stop_or_a_takeover_leave_every_row_exactly_once(kafka, postgres, names, tmp_path, store, request):
    topic, windows, clicks, dead = names("in"), names("windows"), names("clicks"), names("dlq")
    windows_table, clicks_table = f"windows_{os.urandom(3).hex()}", f"clicks_{os.urandom(3).hex()}"
    create_topic(kafka.bootstrap, topic, partitions=3)
    for out in (windows, clicks, dead):
        create_topic(kafka.bootstrap, out, partitions=2)
    events = clickstream.generate(seed=19, users=20, minutes=8)
    records = [(e.session_id, e.to_json()) for e in events]
    for k in range(MALFORMED):  # spread through the data
        records.insert(len(records) * (k + 1) // (MALFORMED + 1), ("bad", f"{{not json {k}"))
    produce_in_turn(kafka.bootstrap, topic, records, partitions=3)
    path, checkpoint, log, new_log = tmp_path / "app.yaml", tmp_path / "checkpoint", tmp_path / "run.log", tmp_path / "new.log"
    doc, env = manifest(topic, windows, clicks, dead, windows_table, clicks_table), {}
    if store == "s3":  # the app's own object-store location; the key pair as a driver pod gets it from its Secret
        checkpoint, env = s3_checkpoint(request.getfixturevalue("object_store"), doc)
    path.write_text(yaml.safe_dump(doc))
    query = f"sessions-{windows_table}"  # the windows' Postgres query, whose progress is checked
    # The filter's Postgres query commits a batch each time it reads clicks (the windows' only once the
    # watermark closes some): its batch ledger counts how far the runs got.
    ledger = f"clicks-only-{clicks_table}"
    progress = tmp_path / "progress.jsonl"
    runs: list[subprocess.Popen] = []
    try:
        rng = random.Random(f"kills-{store}")
        for kill in range(KILLS[store]):
            before = batches_logged(log)
            first = {"STREAMAPP_PROGRESS_JSON": str(progress)} if kill == 0 else {}
            run = start_run(path, kafka.bootstrap, checkpoint, log, postgres=postgres.dsn, **first, **env)
            runs.append(run)
            # the first kill after a batch of the windows' Postgres query, whose progress is checked below
            wait_while_running(lambda before=before, any_batch=kill > 0: batches_logged(log) > before and (
                any_batch or (progress.exists() and query in progress.read_text())), run, log)
            time.sleep(rng.uniform(0, 3))  # somewhere in a batch: before, during or after its transactions
            os.killpg(run.pid, signal.SIGKILL)  # the driver and its JVM, as when a pod dies
            run.wait(30)
        # Spark's whole progress per batch, for profiling: each phase's duration, the state operator's figures.
        ours = [b for b in map(json.loads, progress.read_text().splitlines()) if b["name"] == query]
        assert ours and all(b["durationMs"]["triggerExecution"] >= b["durationMs"]["addBatch"] for b in ours)
        assert [b["batchId"] for b in ours] == sorted({b["batchId"] for b in ours})
        assert all(b["stateOperators"] and "commitTimeMs" in b["stateOperators"][0] for b in ours)

        killed_at = committed_batches(postgres.dsn, ledger)
        run = start_run(path, kafka.bootstrap, checkpoint, log, postgres=postgres.dsn, **env)
        runs.append(run)
        wait_while_running(lambda: committed_batches(postgres.dsn, ledger) > killed_at, run, log,
                           what="a batch after the kills")
        flush = watermark_flush(events)
        events.append(flush)
        # The rest in one batch: the batch a kill left planned is replayed as it was planned.
        doc["spec"]["sources"][0]["maxOffsetsPerTrigger"] = LAST_BATCH
        path.write_text(yaml.safe_dump(doc))
        if store == "volume":
            at_sigterm = committed_batches(postgres.dsn, ledger)
            run.send_signal(signal.SIGTERM)
            assert run.wait(120) == 0, log.read_text()[-3000:]
            assert "stop requested" in log.read_text()
            # the backlog is many batches (maxOffsetsPerTrigger): stop means after the batch in flight
            assert committed_batches(postgres.dsn, ledger) - at_sigterm <= 1
            produce_in_turn(kafka.bootstrap, topic, [(flush.session_id, flush.to_json())], partitions=1)
            last = start_run(path, kafka.bootstrap, checkpoint, log, available_now=True, postgres=postgres.dsn, **env)
            runs.append(last)
        else:
            # What a pod force-deleted from a partitioned node would do: keep running while the operator
            # starts its successor on the same checkpoint. The newer driver takes the checkpoint's owner
            # marker; the older one sees it within seconds, stops every query and exits 1. It reads 60
            # offsets a batch, some 40 batches for the whole input: the new one finds batches left.
            produce_in_turn(kafka.bootstrap, topic, [(flush.session_id, flush.to_json())], partitions=1)
            last = start_run(path, kafka.bootstrap, checkpoint, new_log, available_now=True, postgres=postgres.dsn, **env)
            runs.append(last)
            # From the takeover on, not from the new driver's start: a JVM start on a busy machine took 70 s.
            wait_while_running(lambda: "giving it 10s to see the takeover" in new_log.read_text(), last, new_log,
                               timeout=300, what="the new driver's takeover")
            try:
                assert run.wait(90) == 1, log.read_text()[-3000:]
            except subprocess.TimeoutExpired:
                pytest.fail(f"the fenced-out driver still runs 90 s after the takeover:\n{log.read_text()[-3000:]}")
            assert "fenced out: another driver" in log.read_text()
            at_handover = committed_batches(postgres.dsn, ledger)
        try:
            last.wait(400)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the available-now run did not end in 400 s:\n{(new_log if new_log.exists() else log).read_text()[-3000:]}")
        text = log.read_text() + (new_log.read_text() if new_log.exists() else "")
        assert last.returncode == 0, text[-3000:]
        if store == "s3":
            assert committed_batches(postgres.dsn, ledger) > at_handover, "the new driver went on from the old one's batches"
    finally:
        for proc in runs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
    replays = text.count("already committed to Kafka by this checkpoint")
    assert "late dropped" not in text  # else the plain-Python reference below would not apply

    want = closed_click_windows(events)  # every window of the events: the flush closed them all
    with psycopg.connect(postgres.dsn) as conn:
        stored = conn.execute(f"SELECT session_id, uuid, window_start, clicks, page_views, time_spent FROM {windows_table}").fetchall()
    got = {(s, u, w): (c, p, t) for s, u, w, c, p, t in stored}
    assert len(got) == len(stored) == len(want) > 100
    assert got == want

    want_windows = Counter({(s, u, clickstream.iso(w).replace("000Z", "Z")): 1 for s, u, w in want})
    rows = [json.loads(v) for _, v, _ in read_to_end(kafka.bootstrap, windows)]
    got_windows = Counter((r["session_id"], r["uuid"], r["window_start"]) for r in rows)
    assert got_windows == want_windows, f"windows: {duplicates_and_missing(got_windows, want_windows)} ({replays} replays skipped)"
    values = {(r["session_id"], r["uuid"], r["window_start"]): (r["clicks"], r["page_views"], r["time_spent"]) for r in rows}
    assert values == {(s, u, clickstream.iso(w).replace("000Z", "Z")): v for (s, u, w), v in want.items()}

    want_clicks = Counter((e.uuid, e.session_id, clickstream.iso(e.ts)[:23]) for e in events if e.event == "click")
    got_clicks = Counter((r["uuid"], r["session_id"], r["ts"][:23])
                         for r in (json.loads(v) for _, v, _ in read_to_end(kafka.bootstrap, clicks)))
    assert got_clicks == want_clicks, f"clicks: {duplicates_and_missing(got_clicks, want_clicks)} ({replays} replays skipped)"

    with psycopg.connect(postgres.dsn) as conn:
        stored = conn.execute(f"SELECT uuid, session_id, ts FROM {clicks_table}").fetchall()
    assert sorted(stored) == sorted((e.uuid, e.session_id, e.ts) for e in events if e.event == "click")

    base, store_client = (str(tmp_path), None) if store == "volume" else (checkpoint.rsplit("/", 1)[0], request.getfixturevalue("object_store"))
    windows_parquet, clicks_delta = (TableFiles(f"{base}/tables/{p}", store_client) for p in ("windows/parquet", "clicks"))
    rows = parquet_rows(windows_parquet)
    got_rows = Counter((r["session_id"], r["uuid"], utc(r["window_start"])) for r in rows)
    assert got_rows == Counter(want.keys()), f"parquet windows: {duplicates_and_missing(got_rows, Counter(want.keys()))}"
    assert {(r["session_id"], r["uuid"], utc(r["window_start"])): (r["clicks"], r["page_views"], r["time_spent"])
            for r in rows} == want
    # Each batch committed to Delta once, under the query's id: a replay after a kill committed nothing.
    log = delta_log(clicks_delta)
    assert log.transactions and len(log.transactions) == len(set(log.transactions)) == len(log.operations)
    got_clicks = Counter((r["uuid"], r["session_id"], utc(r["ts"])) for r in delta_rows(clicks_delta))
    want_clicks = Counter((e.uuid, e.session_id, utc(e.ts)) for e in events if e.event == "click")
    assert got_clicks == want_clicks, f"delta clicks: {duplicates_and_missing(got_clicks, want_clicks)}"

    letters = read_to_end(kafka.bootstrap, dead)
    assert sorted(v for _, v, _ in letters) == sorted(f"{{not json {k}" for k in range(MALFORMED))
    assert all(h["streamapp.error"] for _, _, h in letters)
