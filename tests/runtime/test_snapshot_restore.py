"""Snapshot under load, restore into a new checkpoint, finish there: the windows in Postgres are exactly
plain Python's, on a volume and on the test bed's S3 server.

All in this process on the session's Spark (no `streamapp run` process: each would start a JVM); the
snapshot and the restore through the commands' own `run`, as `streamapp snapshot` and `streamapp
restore` call them.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time

import psycopg
import pytest
import yaml

from streamapp_api import load
from streamapp_api.cli import main
from streamapp_api.checkpoint import join, query_checkpoint
from streamapp_testkit.manifests import click_sessions_manifest
from streamapp_testkit.runtime import closed_click_windows as expected
from streamapp_testkit.runtime import run_available_now, s3_checkpoint, watermark_flush
from streamapp_runtime.checkpoint import files
from streamapp_runtime.cleanup import leftovers
from streamapp_runtime.run import runner
from streamapp_runtime.run.settings import Settings
from streamapp_runtime.snapshot import cli as snapshot_cli
from streamapp_runtime.snapshot import restore_cli
from streamapp_testbed import clickstream
from streamapp_testbed.kafka_admin import create_topic, produce

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def queries(root: str) -> list[str]:
    return [name for name, is_folder in files.entries(root) if is_folder]


def query_id(root: str, query: str) -> str | None:
    return leftovers.query_id(files.read_text(join(query_checkpoint(root, query), "metadata")))


def committed(root: str, query: str) -> int:
    return sum(name.isdigit() for name in files.names(join(query_checkpoint(root, query), "commits")))


@pytest.mark.parametrize("store", ["volume", "s3"])
def test_a_snapshot_taken_under_load_restores_to_exactly_its_batch(spark, kafka, postgres, names, tmp_path, store,
                                                                     request, capsys):
    topic, out, table = names("clicks"), names("summaries"), f"snap_{os.urandom(3).hex()}"
    create_topic(kafka.bootstrap, topic, partitions=2)
    events = clickstream.generate(seed=7, users=8, minutes=4)
    # The flush is in the topic from the start: it closes every window by the end of the restored run.
    flush = watermark_flush(events)
    produce(kafka.bootstrap, topic, [(e.session_id, e.to_json()) for e in [*events, flush]])
    doc = click_sessions_manifest(topic, out, table, max_offsets_per_trigger=120)  # a backlog of 5 batches
    root, snapshot, restored = str(tmp_path / "checkpoint"), str(tmp_path / "snapshot"), str(tmp_path / "restored")
    if store == "s3":  # the app's own bucket; the session's Spark reaches it as a driver does (keys in conf: tests only)
        object_store = request.getfixturevalue("object_store")
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
        for key, value in object_store.spark_conf().items():
            hadoop.set(key.removeprefix("spark.hadoop."), value)
        root, _ = s3_checkpoint(object_store, doc)
        base = root.rsplit("/", 1)[0]
        snapshot, restored = f"{base}/snapshots/under-load", f"{base}/gen-1"
    manifest = tmp_path / "app.yaml"
    manifest.write_text(yaml.safe_dump(doc))
    the_app, query = load(doc), f"sessions-{table}"
    settings = Settings(checkpoint_root=root, kafka_override=kafka.bootstrap, metrics_port=None,
                        postgres_uris={"*": postgres.dsn})

    running = runner.start(spark, the_app, settings, quiet=True, wait_for_topics=False)
    result: list[int] = []
    supervisor = threading.Thread(target=lambda: result.append(runner.supervise(spark, running)), daemon=True)
    supervisor.start()
    try:
        deadline = time.monotonic() + 120
        while committed(root, query) < 2:
            assert supervisor.is_alive() and time.monotonic() < deadline, "no 2 committed batches within 120 s"
            time.sleep(0.2)
        assert snapshot_cli.run(argparse.Namespace(file=str(manifest), checkpoint=root, dest=snapshot)) == 0
    finally:
        running.stop_requested.set()
        supervisor.join(120)
    assert result == [0], [str(q.exception()).splitlines()[:3] for q in running.queries if q.exception()]
    with psycopg.connect(postgres.dsn) as conn:
        written_before = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    taken = capsys.readouterr().out
    batch = int(taken.split(f"{query}: batch ")[1].split()[0])
    # `streamapp state` reads a snapshot as it reads a checkpoint: the state of the snapshot's batch
    assert main(["state", str(manifest), "--checkpoint", snapshot, "--stream", "sessions", "-o", "json"]) == 0
    state = json.loads(capsys.readouterr().out)
    assert f"{state['query']}: batch {state['batchId']}" in taken, (state["query"], state["batchId"], taken)

    restore = argparse.Namespace(file=str(manifest), snapshot=snapshot, checkpoint=restored)
    assert restore_cli.run(restore) == 0
    assert restore_cli.run(restore) == 2  # twice: the target holds a checkpoint now
    assert capsys.readouterr().err.startswith(f"streamapp restore: {restored}: the checkpoint is not empty")
    # each query restored under a new id: the ledger does not skip the batches after the snapshot, which
    # the restored run plans again and which may cover other offsets than the first run's did
    ids = {q: (query_id(snapshot, q), query_id(restored, q)) for q in queries(snapshot)}
    assert query in ids and all(None not in pair and pair[0] != pair[1] for pair in ids.values()), ids
    progress = run_available_now(spark, the_app, kafka, restored, dsn=postgres.dsn)

    # resumed at the snapshot's batch + 1, mid-backlog: records were still to be read
    assert progress[query][0]["batchId"] == batch + 1
    assert sum(p["numInputRows"] for p in progress[query]) > 0
    want = expected([*events, flush])
    assert written_before < len(want), "the first run wrote every window: the restored state would prove nothing"
    with psycopg.connect(postgres.dsn) as conn:
        rows = conn.execute(f"SELECT session_id, uuid, window_start, clicks, page_views, time_spent FROM {table}").fetchall()
    got = {(s, u, w): (c, p, t) for s, u, w, c, p, t in rows}
    assert len(got) == len(rows) == len(want) > 30
    assert got == want
