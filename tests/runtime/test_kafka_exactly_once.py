"""Exactly-once delivery to Kafka (``delivery: exactly-once`` on Kafka sinks and the dead-letter topic)
on a real broker and real Spark.

A reader with isolation.level=read_committed must see every expected row exactly once, through
``KILLS`` kill -9s of ``streamapp run`` at random moments (with the checkpoint on a volume, and on the
test bed's S3 server), compared with the same pipeline computed here in plain Python; a replayed batch writes nothing twice, a zombie writer's transaction is fenced and its
rows are never visible, and a new checkpoint's batch 0 is not mistaken for the old one's.
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
from confluent_kafka import KafkaException, Producer

from streamapp_testkit.manifests import click_sessions_manifest
from streamapp_testkit.runtime import closed_click_windows, s3_checkpoint, start_run, wait_while_running, watermark_flush
from streamapp_runtime.sinks.kafka_transactions import PartitionWriter, Target, Written, write_partition
from streamapp_testbed import clickstream
from streamapp_testbed.kafka_admin import create_topic, read_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]
KILLS = 2  # per store; each store's kills land at moments of their own (the seed names the store)
MALFORMED = 5
KILLED_BATCH, LAST_BATCH = 60, 1000  # offsets per trigger: small while kills land, then the rest at once


def read(bootstrap: str, topic: str, isolation: str = "read_committed", timeout: float = 120) -> list:
    """Every record of ``topic`` as (key, value, headers), read from the start up to the end it has
    once the writers are done (a transaction a killed writer left open holds read_committed readers
    back until it is fenced or times out: they wait, they do not stop)."""
    def decode(b):
        return b.decode() if b is not None else None

    return [(decode(msg.key()), decode(msg.value()), dict(msg.headers() or []))
            for msg in read_topic(bootstrap, topic, idle=None, timeout=timeout, to_end=True,
                                  config={"isolation.level": isolation})]


def test_a_replayed_batch_is_skipped_and_a_zombie_writer_is_fenced(kafka, names):
    out = names("out")
    create_topic(kafka.bootstrap, out, partitions=2)
    target = Target({"bootstrap.servers": kafka.bootstrap}, out, "q")
    rows = [("k1", "v1"), ("k2", "v2")]
    assert write_partition(target, "ck-1", 0, 0, rows) == [Written(0, 2)]
    # Batch 0 replayed (a crash after Kafka's commit, before Spark's): its marker is there, nothing written.
    assert write_partition(target, "ck-1", 0, 0, rows) == [Written(0, 2, skipped=True)]
    assert write_partition(target, "ck-1", 1, 0, []) == []  # an empty partition opens no transaction

    # Two drivers alive on one checkpoint, both writing batch 1's partition 0: the one that starts later
    # fences the older, whose rows reached the log but are never visible to read_committed readers.
    older = PartitionWriter(target, "ck-1", 1, 0)
    assert older.begin()
    older.produce([("z", "zombie")])
    older.producer.flush(10)
    newer = PartitionWriter(target, "ck-1", 1, 0)
    assert newer.begin()
    newer.produce([("n", "new")])
    newer.commit()
    with pytest.raises(KafkaException) as fenced:
        older.commit()
    assert re.search(r"FENCED|EPOCH", fenced.value.args[0].name()), fenced.value
    older.close()
    newer.close()
    assert write_partition(target, "ck-1", 1, 0, [("n", "new")]) == [Written(0, 1, skipped=True)]

    # A new checkpoint (a state reset, a checkpoint deleted by hand) starts new writers: its batch 0 is written.
    assert write_partition(target, "ck-2", 0, 0, rows) == [Written(0, 2)]

    committed = sorted((k, v) for k, v, _ in read(kafka.bootstrap, out))
    assert committed == sorted(rows + [("n", "new")] + rows)
    assert ("z", "zombie") in [(k, v) for k, v, _ in read(kafka.bootstrap, out, isolation="read_uncommitted")]


def manifest(topic: str, windows: str, clicks: str, dead: str, table: str) -> dict:
    """click-sessions (a windowed aggregation) plus a stateless filter, both Kafka sinks and the
    dead-letter topic exactly-once, the filter also upserted into Postgres (whose batch ledger has the
    same need: a replay must give each partition the same rows); small batches, so that the kills land
    in the middle of the data."""
    doc = click_sessions_manifest(topic, windows, table, name="eos-" + os.urandom(3).hex(), max_offsets_per_trigger=KILLED_BATCH,
                                  delivery="exactly-once")
    spec = doc["spec"]
    spec["streams"].append({"name": "clicks-only", "from": "clicks", "steps": [{"filter": "event = 'click'"}]})
    spec["sinks"][1:] = [  # the table takes the filter's rows instead of the windows
        {"from": "clicks-only", "kafka": {"topic": clicks, "key": "uuid", "delivery": "exactly-once"}},
        {"from": "clicks-only", "postgres": {"secretRef": {"name": "pg"}, "table": table, "primaryKey": ["uuid", "ts"]}},
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
def test_kill_9s_at_random_moments_leave_every_row_exactly_once(kafka, postgres, names, tmp_path, store, request):
    topic, windows, clicks, dead = names("in"), names("windows"), names("clicks"), names("dlq")
    table = f"clicks_{os.urandom(3).hex()}"
    create_topic(kafka.bootstrap, topic, partitions=3)
    for out in (windows, clicks, dead):
        create_topic(kafka.bootstrap, out, partitions=2)
    events = clickstream.generate(seed=19, users=20, minutes=8)
    records = [(e.session_id, e.to_json()) for e in events]
    for k in range(MALFORMED):  # spread through the data
        records.insert(len(records) * (k + 1) // (MALFORMED + 1), ("bad", f"{{not json {k}"))
    produce_in_turn(kafka.bootstrap, topic, records, partitions=3)
    path, checkpoint, log = tmp_path / "app.yaml", tmp_path / "checkpoint", tmp_path / "run.log"
    doc, env = manifest(topic, windows, clicks, dead, table), {}
    if store == "s3":  # the key pair as a driver pod gets it from the app's Secret
        checkpoint, env = s3_checkpoint(request.getfixturevalue("object_store"), doc)
    path.write_text(yaml.safe_dump(doc))

    rng = random.Random(f"kills-{store}")
    for _ in range(KILLS):
        before = batches_logged(log)
        run = start_run(path, kafka.bootstrap, checkpoint, log, postgres=postgres.dsn, **env)
        wait_while_running(lambda: batches_logged(log) > before, run, log)
        time.sleep(rng.uniform(0, 3))  # somewhere in a batch: before, during or after its transactions
        os.killpg(run.pid, signal.SIGKILL)  # the driver and its JVM, as when a pod dies
        run.wait(30)
    flush = watermark_flush(events)
    produce_in_turn(kafka.bootstrap, topic, [(flush.session_id, flush.to_json())], partitions=1)
    events.append(flush)
    # The rest in a few large batches: the batch a kill left planned is replayed as it was planned.
    doc["spec"]["sources"][0]["maxOffsetsPerTrigger"] = LAST_BATCH
    path.write_text(yaml.safe_dump(doc))
    last = start_run(path, kafka.bootstrap, checkpoint, log, available_now=True, postgres=postgres.dsn, **env)
    try:
        last.wait(400)
    except subprocess.TimeoutExpired:
        os.killpg(last.pid, signal.SIGKILL)
        pytest.fail(f"the available-now run did not end in 400 s:\n{log.read_text()[-3000:]}")
    assert last.returncode == 0, log.read_text()[-3000:]
    replays = log.read_text().count("already committed to Kafka by this checkpoint")
    assert "late dropped" not in log.read_text()  # else the plain-Python reference below would not apply

    want_windows = Counter({(s, u, clickstream.iso(w).replace("000Z", "Z")): 1 for s, u, w in closed_click_windows(events)})
    rows = [json.loads(v) for _, v, _ in read(kafka.bootstrap, windows)]
    got_windows = Counter((r["session_id"], r["uuid"], r["window_start"]) for r in rows)
    assert len(want_windows) > 100
    assert got_windows == want_windows, f"windows: {duplicates_and_missing(got_windows, want_windows)} ({replays} replays skipped)"
    values = {(r["session_id"], r["uuid"], r["window_start"]): (r["clicks"], r["page_views"], r["time_spent"]) for r in rows}
    assert values == {(s, u, clickstream.iso(w).replace("000Z", "Z")): v for (s, u, w), v in closed_click_windows(events).items()}

    want_clicks = Counter((e.uuid, e.session_id, clickstream.iso(e.ts)[:23]) for e in events if e.event == "click")
    got_clicks = Counter((r["uuid"], r["session_id"], r["ts"][:23])
                         for r in (json.loads(v) for _, v, _ in read(kafka.bootstrap, clicks)))
    assert got_clicks == want_clicks, f"clicks: {duplicates_and_missing(got_clicks, want_clicks)} ({replays} replays skipped)"

    with psycopg.connect(postgres.dsn) as conn:
        stored = conn.execute(f"SELECT uuid, session_id, ts FROM {table}").fetchall()
    assert sorted(stored) == sorted((e.uuid, e.session_id, e.ts) for e in events if e.event == "click")

    letters = read(kafka.bootstrap, dead)
    assert sorted(v for _, v, _ in letters) == sorted(f"{{not json {k}" for k in range(MALFORMED))
    assert all(h["streamapp.error"] for _, _, h in letters)

