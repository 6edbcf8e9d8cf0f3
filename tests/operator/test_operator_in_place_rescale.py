"""Rescale in place on the test bed: `kubectl scale` reaches the running driver as its pod's annotation,
and the driver's metrics say when it applied the count. The runtime's own metrics endpoint stands in
for the driver at its kwok pod's loopback address (as in test_operator_metrics.py), and a thread of
the test does what the runtime's rescaler does with the annotation: report the count it reads there
as applied. A driver that answers without that metric (a runtime older than rescale in place) is
restarted with the count, and status says it was the fallback."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import pytest

from streamapp_operator import names
from streamapp_runtime.run import http_server
from streamapp_runtime.run.metrics import Metrics
from streamapp_testbed.kafka_admin import create_topic

from streamapp_testkit.operator_bed import simple_app, unique
from streamapp_testbed.waiting import wait_for

pytestmark = pytest.mark.integration


def started(cluster, kafka) -> dict:
    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=2)
    cluster.pv_for("app")
    cluster.apply(simple_app("app", cluster.namespace, kafka.bootstrap, topic))
    return wait_for("a running driver with 2 executors", lambda: (
        (p := cluster.running_driver("app")) and p["metadata"]["annotations"].get(names.ANN_EXECUTORS) == "2" and p),
        timeout=120)


def touched(cluster, check):
    """``check`` that also touches the app each time: the operator reads a driver's metrics after a
    reconcile that saw it running, and touching the app makes reconciles come sooner (as in
    test_operator_metrics.py); the figures still come only from the driver's endpoint."""
    def look():
        cluster.kubectl("annotate", "--overwrite", "sapp/app", f"test.streamapp.io/touched={time.monotonic()}")
        return check()
    return look


@contextmanager
def driver_metrics(cluster, pod: dict, applies: bool):
    """The driver's metrics endpoint at its pod address; ``applies``: it reports the count annotated
    on its pod as applied (read every second, as the runtime reads it every two)."""
    metrics = Metrics("app", {}, {})
    stop = threading.Event()

    def follow() -> None:
        while not stop.wait(1):
            now = cluster.driver("app")
            if now and now["metadata"]["uid"] == pod["metadata"]["uid"]:
                metrics.executors_target.labels("app").set(int(now["metadata"]["annotations"][names.ANN_EXECUTORS]))

    server = http_server.serve(metrics, names.METRICS_PORT, lambda: (True, "ok"), host=pod["status"]["podIP"])
    follower = threading.Thread(target=follow, daemon=True)
    if applies:
        metrics.executors_target.labels("app").set(2)  # the count it started with
        follower.start()
    try:
        yield metrics
    finally:
        stop.set()
        if applies:
            follower.join(timeout=10)
        server.shutdown()
        server.server_close()


def test_kubectl_scale_is_applied_by_the_running_driver_without_a_restart(cluster, kafka):
    pod = started(cluster, kafka)
    with driver_metrics(cluster, pod, applies=True):
        cluster.kubectl("scale", "sapp/app", "--replicas=4")
        status = wait_for("the rescale applied in place", touched(cluster, lambda: (
            (s := cluster.status("app")).get("executors") == 4
            and ((s.get("scaling") or {}).get("lastRescale") or {}).get("appliedTime") and s)), timeout=90, every=3)
    assert status["scaling"]["lastRescale"]["from"] == 2 and status["scaling"]["lastRescale"]["method"] == "InPlace"
    assert "lastRestart" not in status
    now = cluster.driver("app")
    assert now["metadata"]["uid"] == pod["metadata"]["uid"], "the driver was replaced"
    assert now["metadata"]["annotations"][names.ANN_EXECUTORS] == "4"
    assert cluster.config_properties("app")["spark.executor.instances"] == "4"  # what a next driver starts with
    cluster.event("app", "Rescaling", "2 → 4 executors in place")
    cluster.event("app", "Rescaled", "2 → 4 executors in place (the driver applied it within")
    assert not [e for e in cluster.events("app") if e["reason"] in ("Restarting", "RescaleFallback")]


def test_a_second_rescale_in_place_is_recorded_as_applied_too(cluster, kafka):
    pod = started(cluster, kafka)
    with driver_metrics(cluster, pod, applies=True):
        for before, count in ((2, 4), (4, 3)):
            cluster.kubectl("scale", "sapp/app", f"--replicas={count}")
            status = wait_for(f"the rescale to {count} applied in place", touched(cluster, lambda: (
                (s := cluster.status("app")).get("executors") == count
                and ((s.get("scaling") or {}).get("lastRescale") or {}).get("to") == count
                and s["scaling"]["lastRescale"].get("appliedTime") and s)), timeout=90, every=3)
            last = status["scaling"]["lastRescale"]
            assert (last["from"], last["method"]) == (before, "InPlace") and last["appliedTime"] >= last["time"], last
            cluster.event("app", "Rescaled", f"{before} → {count} executors in place (the driver applied it within")
    assert cluster.driver("app")["metadata"]["uid"] == pod["metadata"]["uid"], "the driver was replaced"


def test_a_driver_that_cannot_rescale_in_place_is_restarted_with_the_count_and_that_is_recorded(cluster, kafka):
    pod = started(cluster, kafka)
    with driver_metrics(cluster, pod, applies=False) as metrics:
        metrics.executors.labels("app").set_function(lambda: 2)  # it answers, but reports no count applied
        cluster.kubectl("scale", "sapp/app", "--replicas=3")
        status = wait_for("the fallback", touched(cluster, lambda: (
            (s := cluster.status("app")).get("lastRestart", {}).get("reason") == "RescaleFallback" and s)), timeout=90,
            every=3)
    assert status["scaling"]["lastRescale"]["method"] == "Fallback" and status["scaling"]["lastRescale"]["to"] == 3
    assert status.get("restarts", 0) == 0, "a rescale is not a failure"
    event = cluster.event("app", "RescaleFallback", "a runtime older than rescale in place")
    assert event["type"] == "Warning"
    wait_for("a new driver with 3 executors", lambda: (
        (p := cluster.running_driver("app", not_uid=pod["metadata"]["uid"]))
        and p["metadata"]["annotations"][names.ANN_EXECUTORS] == "3"), timeout=90)
