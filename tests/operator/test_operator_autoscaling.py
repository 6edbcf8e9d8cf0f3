"""scaling.mode load on the test bed: the operator reads the load from the driver's metrics endpoint
(the runtime's own, standing in for the driver at its kwok pod's loopback address, as in
test_operator_metrics.py), decides, and restarts the driver gracefully with the count the load needs
(scaling.rescale restart; in place: test_operator_in_place_rescale.py); the decision is in status.scaling and
in one Autoscale event."""

from __future__ import annotations

import time

import pytest

from streamapp_operator import names
from streamapp_runtime.run import http_server
from streamapp_runtime.run.metrics import Metrics
from streamapp_testbed.kafka_admin import create_topic

from streamapp_testkit.operator_bed import simple_app, unique
from streamapp_testbed.waiting import wait_for

pytestmark = pytest.mark.integration


class ThatDriversOnly:
    """The readings of ``driver`` while it is the app's driver pod: kwok may give the next driver the
    same address, and a real new driver would not answer with its predecessor's rates."""

    def __init__(self, metrics: Metrics, cluster, driver: dict):
        self.metrics, self.cluster, self.uid = metrics, cluster, driver["metadata"]["uid"]
        self.registry = self  # what http_server.serve reads: collect(), as a prometheus registry

    def collect(self):
        pod = self.cluster.driver("app")
        return self.metrics.registry.collect() if pod and pod["metadata"]["uid"] == self.uid else iter(())


def test_the_measured_load_sizes_the_app_through_a_graceful_rescale(cluster, kafka):
    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=8)
    cluster.pv_for("app")
    scaling = {"mode": "load", "maxExecutors": 6, "scaleUpWindow": "1s", "scaleDownWindow": "2s", "rescale": "restart"}
    cluster.apply(simple_app("app", cluster.namespace, kafka.bootstrap, topic, scaling=scaling))
    driver = wait_for("a running driver", lambda: cluster.running_driver("app"), timeout=90)
    # the first driver: from the partitions (8 over 1 core, at most 6), until the load is measured;
    # while it does not answer, that count is kept
    first = wait_for("the count kept", lambda: "no fresh metrics (the driver does not answer): keeping 6 executors" in
                     ((s := cluster.status("app")).get("scaling") or {}).get("reason", "") and s)
    assert first["scaling"]["target"] == 6 and first["desiredExecutors"] == 6

    # 1000 rows/s arrive; 6 executors process 6000/s while busy: 1000/s each, at 70 %: 2 are enough
    metrics = Metrics("app", {topic: "lines"}, {})
    for batch in range(3):  # past the warm-up
        metrics.observe({
            "name": "counts-kafka", "batchId": batch, "numInputRows": 1000, "batchDuration": 167,
            "inputRowsPerSecond": 1000.0, "processedRowsPerSecond": 6000.0,
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            "sources": [{"endOffset": {topic: {"0": 100}}, "latestOffset": {topic: {"0": 100}}}],
        })
    server = http_server.serve(ThatDriversOnly(metrics, cluster, driver), names.METRICS_PORT, lambda: (True, "ok"),
                               host=driver["status"]["podIP"])
    try:
        status = wait_for("the rescale decided", lambda: (
            (s := cluster.status("app")).get("lastRestart", {}).get("reason") == "Rescale" and s), timeout=90)
    finally:
        server.shutdown()
        server.server_close()
    # status.scaling.reason may already say what the next reconcile saw (the old driver stopping):
    # the decision's words are in its event
    assert status["scaling"]["target"] == 2 and status["desiredExecutors"] == 2
    wait_for("a driver with 2 executors", lambda: cluster.running_driver("app", not_uid=driver["metadata"]["uid"])
             and cluster.config_properties("app").get("spark.executor.instances") == "2", timeout=90)
    event = cluster.event("app", "Autoscale", "1.0 k rows/s arrive, 6.0 k rows/s processed → 2 executors; down from 6 to 2")
    assert len([e for e in cluster.events("app") if e["reason"] == "Autoscale"]) == 1, "one event per decision"
    assert event["type"] == "Normal"
    # the new driver does not answer yet: the decision is kept, and status says why
    kept = wait_for("the count kept", lambda: "no fresh metrics" in ((s := cluster.status("app")).get("scaling") or {})
                    .get("reason", "") and s, timeout=60)
    assert kept["scaling"]["target"] == 2
