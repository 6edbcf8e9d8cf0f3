"""Snapshots a running driver takes by itself, and a new state generation restored from one at start,
on a volume: the app asks in its manifest (snapshotNonce, snapshots {every, keep}) as a local run
does; a driver pod reads the same ask from its pod (run/own_pod.py). The copy itself on S3:
tests/runtime/test_snapshot_restore.py.

In this process on the session's Spark, as tests/runtime/test_snapshot_restore.py runs its app.
"""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
from prometheus_client import generate_latest

from streamapp_api import contract, load
from streamapp_api.checkpoint import SNAPSHOTS, join, snapshot_location
from streamapp_testkit.manifests import click_sessions_manifest
from streamapp_testkit.runtime import run_available_now, watermark_flush
from streamapp_runtime.checkpoint import files
from streamapp_runtime.run import restoring, runner
from streamapp_runtime.run.settings import Settings
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
