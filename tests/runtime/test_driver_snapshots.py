"""Snapshots a running driver takes by itself, and a new state generation restored from one at start,
on a volume: the app asks in its manifest (snapshotNonce, snapshots {every, keep}) as a local run
does; a driver pod reads the same ask from its pod (run/own_pod.py). And a rollback's restore, which
replaces the generation's checkpoint with the snapshot taken before the change. The copy itself on S3:
tests/runtime/test_snapshot_restore.py.

In this process on the session's Spark, as tests/runtime/test_snapshot_restore.py runs its app.
"""

from __future__ import annotations

import json
import logging
import threading
import time

import psycopg
import pytest
from prometheus_client import generate_latest

from streamapp_api import contract, load
from streamapp_api.checkpoint import SNAPSHOTS, join, pre_change_snapshot_name, query_checkpoint, snapshot_location
from streamapp_testkit.manifests import click_sessions_manifest
from streamapp_testkit.runtime import closed_click_windows as expected
from streamapp_testkit.runtime import run_available_now, watermark_flush
from streamapp_runtime.checkpoint import files, layout
from streamapp_runtime.run import restoring, runner
from streamapp_runtime.run.settings import Settings
from streamapp_runtime.run.snapshot_schedule import Ask
from streamapp_runtime.run.snapshots import Snapshotter
from streamapp_testbed import clickstream
from streamapp_testbed.kafka_admin import create_topic, produce

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NONCE = "before-load"
EVERY = 2.0  # seconds between periodic snapshots: the API's minimum (a minute) would make a slow test


def samples(running: runner.Running, metric: str) -> list[tuple[dict[str, str], float]]:
    """The series of ``metric`` the driver serves: (labels, value)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = generate_latest(running.metrics.registry).decode()
    return [(s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples
            if s.name == metric]


def snapshot_folders(base: str) -> list[str]:
    return [name for name, is_folder in files.entries(join(base, SNAPSHOTS)) if is_folder]


def batches_of(location: str) -> dict[str, int]:
    return json.loads(files.read_text(join(location, "_snapshot.json")) or "{}").get("batches", {})


def last_commit(root: str, query: str) -> int:
    """The query's last committed batch in the checkpoint at ``root`` (-1: none)."""
    found = layout.last_committed(files.names(join(query_checkpoint(root, query), layout.COMMITS)))
    return -1 if found is None else found


def windows(dsn: str, table: str) -> dict:
    """The click-sessions windows in the Postgres table, keyed as plain Python's."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f"SELECT session_id, uuid, window_start, clicks, page_views, time_spent FROM {table}").fetchall()
    found = {(s, u, w): (c, p, t) for s, u, w, c, p, t in rows}
    assert len(found) == len(rows), "one row per window"
    return found


def test_a_running_driver_takes_the_snapshots_asked_and_a_new_generation_starts_from_one(
        spark, kafka, postgres, names, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="streamapp.runtime")
    topic, out = names("clicks"), names("summaries")
    table = out.replace("-", "_")
    create_topic(kafka.bootstrap, topic, partitions=2)
    events = clickstream.generate(seed=11, users=8, minutes=4)
    produce(kafka.bootstrap, topic, [(e.session_id, e.to_json()) for e in events])
    doc = click_sessions_manifest(topic, out, table, max_offsets_per_trigger=40)  # a backlog of many batches
    base = str(tmp_path / "app")  # as a volume's mount: the generations and the snapshots under it
    root = f"{base}/gen-0"
    doc["spec"]["state"].update(snapshotNonce=NONCE, snapshots={"every": "1m", "keep": 2})
    the_app = load(doc)
    settings = Settings(checkpoint_root=root, kafka_override=kafka.bootstrap, metrics_port=None,
                        postgres_uris={"*": postgres.dsn})
    assert settings.app_base == base

    running = runner.start(spark, the_app, settings, quiet=True, wait_for_topics=False)
    assert running.snapshotter is not None, "the manifest asks for snapshots: the driver takes them"
    running.snapshotter.stop()  # the same ask, every EVERY seconds rather than the manifest's minute
    running.snapshotter = Snapshotter(running.snapshotter.ask, root, base, lambda: runner.commits(running),
                                      running.metrics, poll=0.3, every=EVERY).start()
    result: list[int] = []
    supervisor = threading.Thread(target=lambda: result.append(runner.supervise(spark, running)), daemon=True)
    supervisor.start()
    periodic_seen: set[str] = set()
    try:
        deadline = time.monotonic() + 150
        while len(periodic_seen) < 3 or NONCE not in snapshot_folders(base):
            assert supervisor.is_alive() and time.monotonic() < deadline, \
                f"snapshots within 150 s: {sorted(periodic_seen)}, {snapshot_folders(base)}"
            periodic_seen |= {name for name in snapshot_folders(base) if name.startswith("every-")}
            time.sleep(0.3)
    finally:
        running.stop_requested.set()
        supervisor.join(120)
    assert result == [0], [str(q.exception()).splitlines()[:3] for q in running.queries if q.exception()]

    # the nonce's snapshot, and the newest two periodic ones: the older ones were deleted, oldest first
    left = sorted(snapshot_folders(base))
    periodic = [name for name in left if name.startswith("every-")]
    assert left == sorted([NONCE, *periodic]) and len(periodic) == 2, left
    seen = sorted(periodic_seen)
    assert seen[0] not in left and periodic[0] >= seen[-2], (periodic, seen)
    queries = {qp.name for qp in running.plans}
    for name in left:  # each complete: every query at a committed batch
        assert set(batches_of(snapshot_location(base, name))) == queries, name
    nonce_batches = batches_of(snapshot_location(base, NONCE))

    # the metrics report the last one: where, how big, each query's batch
    [(labels, taken_at)] = samples(running, contract.METRIC_SNAPSHOT_TIME)
    last = labels["snapshot"]
    assert last == periodic[-1] and labels["location"] == snapshot_location(base, last)
    assert time.time() - 150 < taken_at <= time.time()
    [(_, size)] = samples(running, contract.METRIC_SNAPSHOT_BYTES)
    assert size > 1000
    assert {labels["query"]: value for labels, value in samples(running, contract.METRIC_SNAPSHOT_BATCH)} \
        == {query: float(batch) for query, batch in batches_of(snapshot_location(base, last)).items()}
    assert samples(running, contract.METRIC_SNAPSHOT_FAILED) == []
    # and every snapshot kept: exactly those left, each with the batches its folder holds
    kept = {labels["snapshot"]: value for labels, value in samples(running, contract.METRIC_SNAPSHOT_KEPT)}
    assert set(kept) == set(left) and all(time.time() - 200 < at <= time.time() for at in kept.values()), kept
    assert samples(running, contract.METRIC_SNAPSHOTS_KEPT) == [({"app": the_app.metadata.name}, float(len(left)))]
    for name in left:
        assert {labels["query"]: value for labels, value in samples(running, contract.METRIC_SNAPSHOT_KEPT_BATCH)
                if labels["snapshot"] == name} == {q: float(-1 if b is None else b) for q, b in batches_of(snapshot_location(base, name)).items()}
    assert any(f"snapshot {NONCE}: {len(queries)} queries at batches" in r.getMessage() for r in caplog.records)

    # a new generation from the nonce's snapshot: each query resumes at the snapshot's batch + 1
    doc["spec"]["state"].update(resetNonce="1", restoreFrom={"snapshot": NONCE})
    doc["spec"]["state"].pop("snapshotNonce")
    doc["spec"]["state"].pop("snapshots")
    doc["spec"]["sources"][0]["maxOffsetsPerTrigger"] = 10_000  # the rest of the backlog in one batch
    restored_app, restored_root = load(doc), f"{base}/gen-1"
    progress = run_available_now(spark, restored_app, kafka, restored_root, dsn=postgres.dsn)
    assert {query: runs[0]["batchId"] for query, runs in progress.items()} \
        == {query: batch + 1 for query, batch in nonce_batches.items()}
    last_batches = {query: runs[-1]["batchId"] for query, runs in progress.items()}

    # started again on that generation, it is not restored again: each query goes on after its own last batch
    produce(kafka.bootstrap, topic, [("flush-s0", watermark_flush(events).to_json())])
    caplog.clear()
    again = run_available_now(spark, restored_app, kafka, restored_root, dsn=postgres.dsn)
    assert {query: runs[0]["batchId"] for query, runs in again.items()} \
        == {query: batch + 1 for query, batch in last_batches.items()}
    assert any("skipped" in r.getMessage() and restored_root in r.getMessage() for r in caplog.records)

    # a snapshot that is not there: the driver refuses to start, naming the field and the location
    doc["spec"]["state"].update(resetNonce="2", restoreFrom={"snapshot": "never-taken"})
    with pytest.raises(restoring.RestoreRefused) as refused:
        runner.start(spark, load(doc), Settings(checkpoint_root=f"{base}/gen-2", kafka_override=kafka.bootstrap,
                                                metrics_port=None, postgres_uris={"*": postgres.dsn}),
                     quiet=True, wait_for_topics=False)
    assert str(refused.value) == f"spec.state.restoreFrom: {base}/snapshots/never-taken: no snapshot there"


def test_a_rollback_restores_the_pre_change_snapshot_over_the_generation_once(
        spark, kafka, postgres, names, tmp_path, caplog, monkeypatch):
    """The operator's rollback on a volume: the driver snapshotted before the change, the changed version
    ran on (its state moved past the snapshot), and a driver started with the restore id replaces the
    generation's checkpoint with the snapshot; a later start under the same id goes on from there."""
    caplog.set_level(logging.INFO, logger="streamapp.runtime")
    topic, out = names("clicks"), names("summaries")
    table = out.replace("-", "_")
    create_topic(kafka.bootstrap, topic, partitions=2)
    events = clickstream.generate(seed=13, users=6, minutes=3)
    flush = watermark_flush(events)  # in the topic from the start: every window is closed by the end
    produce(kafka.bootstrap, topic, [(e.session_id, e.to_json()) for e in [*events, flush]])
    doc = click_sessions_manifest(topic, out, table, max_offsets_per_trigger=30)  # a backlog of ~10 batches
    base = str(tmp_path / "app")
    root = f"{base}/gen-0"
    settings = Settings(checkpoint_root=root, kafka_override=kafka.bootstrap, metrics_port=None,
                        postgres_uris={"*": postgres.dsn})
    running = runner.start(spark, load(doc), settings, quiet=True, wait_for_topics=False)
    asked: list[Ask] = []  # the ask on the driver pod: none until the operator is about to change the spec
    running.snapshotter = Snapshotter(lambda: asked[-1] if asked else None, root, base,
                                      lambda: runner.commits(running), running.metrics, poll=0.3).start()
    result: list[int] = []
    supervisor = threading.Thread(target=lambda: result.append(runner.supervise(spark, running)), daemon=True)
    supervisor.start()
    queries = [qp.name for qp in running.plans]
    pre = pre_change_snapshot_name(7, time.time())
    try:
        deadline = time.monotonic() + 90
        while not (taken := batches_of(snapshot_location(base, pre))) \
                or any(last_commit(root, q) <= taken[q] for q in queries):  # the state moved on past it
            assert supervisor.is_alive() and time.monotonic() < deadline, \
                f"2 batches, {pre}, a batch more within 90 s: {[last_commit(root, q) for q in queries]}"
            if not asked and all(last_commit(root, q) >= 1 for q in queries):
                asked.append(Ask(nonce=pre))
            time.sleep(0.2)
    finally:
        running.stop_requested.set()
        supervisor.join(120)
    assert result == [0], [str(q.exception()).splitlines()[:3] for q in running.queries if q.exception()]
    assert set(taken) == set(queries)

    # the rollback's driver: the last stable spec (here the same) on the same generation, from the snapshot
    monkeypatch.setenv(contract.ENV_RESTORE_FROM, snapshot_location(base, pre))
    monkeypatch.setenv(contract.ENV_RESTORE_ID, "rollback-7")
    doc["spec"]["sources"][0]["maxOffsetsPerTrigger"] = 10_000  # the rest of the backlog in one batch
    stable = load(doc)
    progress = run_available_now(spark, stable, kafka, root, dsn=postgres.dsn)
    assert {query: runs[0]["batchId"] for query, runs in progress.items()} == {q: b + 1 for q, b in taken.items()}
    assert any(r.getMessage() == f"restore id rollback-7: replacing checkpoint {root} with snapshot "
               f"{snapshot_location(base, pre)}" for r in caplog.records)
    want = expected([*events, flush])
    assert windows(postgres.dsn, table) == want and len(want) > 10

    # the rollback's driver restarted (a failure, a node lost): not restored again, it goes on
    produce(kafka.bootstrap, topic, [(events[0].session_id, events[0].to_json())])  # late: changes no window
    again = run_available_now(spark, stable, kafka, root, dsn=postgres.dsn)
    assert {query: runs[0]["batchId"] for query, runs in again.items()} \
        == {query: runs[-1]["batchId"] + 1 for query, runs in progress.items()}
    assert windows(postgres.dsn, table) == want
