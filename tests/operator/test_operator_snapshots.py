"""Snapshots and restore on the test bed, the operator's side: a new spec.state.snapshotNonce reaches the
running driver as its pod's annotation (no restart), and what the driver reports of its snapshots
lands in status.state.lastSnapshot with an event, and those it keeps in status.state.snapshots;
restoreFrom is refused at apply without a new resetNonce, and an app restoring from another app that
is missing or keeps its state on a volume is not started, its status saying why.

kwok's pods run no containers but have loopback addresses of their own (as in
test_operator_in_place_rescale.py): the runtime's own metrics endpoint stands in for the driver at its
pod address, and the test reports a snapshot through it as the runtime's snapshot thread does."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager

import pytest

from streamapp_api import contract
from streamapp_operator import names
from streamapp_runtime.run import http_server
from streamapp_runtime.run.metrics import Metrics
from streamapp_testbed.kafka_admin import create_topic

from streamapp_testkit.operator_bed import simple_app, started_app as started, unique
from streamapp_testbed.waiting import NotYet, wait_for

pytestmark = pytest.mark.integration


def touched(cluster, name: str, check):
    """``check`` that also touches the app: the operator reads a driver's metrics after a reconcile that
    saw it running, and touching the app makes reconciles come sooner; what status says still comes
    from the driver's endpoint alone."""
    def look():
        cluster.kubectl("annotate", "--overwrite", f"sapp/{name}", f"test.streamapp.io/touched={time.monotonic()}")
        return check()
    return look


@contextmanager
def driver_metrics(pod: dict, app: str):
    metrics = Metrics(app, {}, {})
    server = http_server.serve(metrics, names.METRICS_PORT, lambda: (True, "ok"), host=pod["status"]["podIP"])
    try:
        yield metrics
    finally:
        server.shutdown()
        server.server_close()


def test_a_snapshot_nonce_reaches_the_running_driver_and_its_report_lands_in_status(cluster, kafka):
    pod = started(cluster, kafka, "app")
    uid = pod["metadata"]["uid"]
    cluster.kubectl("patch", "sapp/app", "--type=merge", "-p",
                    json.dumps({"spec": {"state": {"snapshotNonce": "before-upgrade"}}}))
    asked = wait_for("the ask on the driver pod", lambda: (
        json.loads((cluster.driver("app") or {}).get("metadata", {}).get("annotations", {}).get(names.ANN_SNAPSHOT)
                   or "{}").get("nonce") == "before-upgrade" and cluster.driver("app")), timeout=60)
    assert asked["metadata"]["uid"] == uid, "the driver was replaced for a snapshot"
    assert json.loads(asked["metadata"]["annotations"][names.ANN_SNAPSHOT]) == {"nonce": "before-upgrade",
                                                                                "every": None, "keep": 3}
    cluster.event("app", "SnapshotRequested", "before-upgrade")

    location = f"{contract.CHECKPOINT_MOUNT}/snapshots/before-upgrade"
    with driver_metrics(pod, "app") as metrics:
        metrics.snapshot_taken("before-upgrade", location, time.time(), 4096, {"counts": 17})
        last = wait_for("status.state.lastSnapshot", touched(cluster, "app", lambda: (
            (s := (cluster.status("app").get("state") or {}).get("lastSnapshot") or {}).get("name") == "before-upgrade"
            and s)), timeout=60, every=2)
        assert last["batches"] == {"counts": 17} and last["sizeBytes"] == 4096 and last["location"] == location
        event = cluster.event("app", "SnapshotTaken", "before-upgrade")
        assert event["type"] == "Normal" and "counts 17" in event["message"]

        metrics.snapshot_failed_at("every-20260101-000000", "java.io.IOException: disk full", time.time() + 1)
        wait_for("the failure in status", touched(cluster, "app", lambda: (
            ((cluster.status("app").get("state") or {}).get("lastSnapshotFailure") or {}).get("reason")
            == "java.io.IOException: disk full")), timeout=60, every=2)
        warning = cluster.event("app", "SnapshotFailed", "disk full")
        assert warning["type"] == "Warning"

        # every snapshot kept, newest first, as the driver lists them: the API server takes the list
        now = time.time()
        metrics.snapshots_kept({"every-20260101-000000": (now - 3600, 1024, {"counts": 9}),
                                "before-upgrade": (now, 4096, {"counts": 17})})
        kept = wait_for("status.state.snapshots", touched(cluster, "app", lambda: (
            len(s := (cluster.status("app").get("state") or {}).get("snapshots") or []) == 2 and s)), timeout=60, every=2)
        assert [k["name"] for k in kept] == ["before-upgrade", "every-20260101-000000"]
        assert kept[0]["location"] == location and kept[0]["sizeBytes"] == 4096 and kept[0]["batches"] == {"counts": 17}
        metrics.snapshots_kept({"before-upgrade": (now, 4096, {"counts": 17})})  # retention deleted the older one
        wait_for("the deleted snapshot gone from status", touched(cluster, "app", lambda: (
            [k["name"] for k in (cluster.status("app").get("state") or {}).get("snapshots") or []]
            == ["before-upgrade"])), timeout=60, every=2)
    assert [e["reason"] for e in cluster.events("app")].count("SnapshotTaken") == 1, "one event per snapshot"
    assert cluster.driver("app")["metadata"]["uid"] == uid, "no restart for a snapshot"


def _refused(cluster, name: str, patch: dict):
    return cluster.kubectl("patch", f"sapp/{name}", "--type=merge", "--dry-run=server", "-p", json.dumps(patch),
                           check=False)


def test_restore_from_needs_a_new_reset_nonce_and_an_app_with_an_object_store_checkpoint(cluster, kafka):
    started(cluster, kafka, "green")  # its checkpoint on a volume
    refused = _refused(cluster, "green", {"spec": {"state": {"restoreFrom": {"snapshot": "s1"}}}})
    assert refused.returncode != 0, "restoreFrom alone was admitted"
    assert "spec.state.restoreFrom" in refused.stderr and "resetNonce" in refused.stderr, refused.stderr
    admitted = _refused(cluster, "green", {"spec": {"state": {"restoreFrom": {"snapshot": "s1"}, "resetNonce": "2"}}})
    assert admitted.returncode == 0, admitted.stderr

    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=1)

    def restoring(name: str, source: str) -> None:
        cluster.apply(simple_app(name, cluster.namespace, kafka.bootstrap, topic, state={
            "checkpoint": {"location": f"s3a://ckpt/{cluster.namespace}/{name}"},
            "restoreFrom": {"app": source, "snapshot": "s1"}}))

    def held_back(name: str, says: str):
        def check():
            status = cluster.status(name)
            if status.get("reason") != "RestoreSourceUnavailable":
                return NotYet(f"status.reason {status.get('reason')!r}: {status.get('message')}")
            return status
        status = wait_for(f"{name} held back", check, timeout=60)
        assert "spec.state.restoreFrom.app" in status["message"] and says in status["message"], status["message"]
        assert cluster.driver(name) is None
        cluster.event(name, "RestoreSourceUnavailable", says)

    restoring("blue", "green")
    held_back("blue", "keeps its checkpoint on a volume")
    restoring("teal", "gone")
    held_back("teal", "'gone' not found")

    # the app appears, with an object-store checkpoint: teal starts from its snapshot
    cluster.apply(simple_app("gone", cluster.namespace, kafka.bootstrap, topic,
                             state={"checkpoint": {"location": f"s3a://ckpt/{cluster.namespace}/gone"}}))
    pod = wait_for("teal's driver", lambda: cluster.driver("teal"), timeout=60)
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env[contract.ENV_RESTORE_FROM] == f"s3a://ckpt/{cluster.namespace}/gone/snapshots/s1"
    recorded = wait_for("the resolution in status", lambda: (cluster.status("teal").get("state") or {}).get("restoreFrom"))
    assert recorded["location"] == env[contract.ENV_RESTORE_FROM]
