"""The operator's own metrics, scraped from its port while it runs an app."""

from __future__ import annotations

import ipaddress
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streamapp_operator import names
from streamapp_runtime.run import http_server
from streamapp_runtime.run.metrics import Metrics
from streamapp_testbed.kafka_admin import create_topic

from streamapp_testkit.operator_bed import simple_app, unique
from streamapp_testbed.waiting import wait_for

pytestmark = pytest.mark.integration


def _samples(port: int) -> dict[tuple[str, tuple], float]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    text = opener.open(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_operator_metrics_report_reconciles_phases_executors_and_partitions(cluster, kafka, operator_process):
    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=3)
    cluster.pv_for("app")
    cluster.apply(simple_app("app", cluster.namespace, kafka.bootstrap, topic))
    wait_for("a running driver", lambda: cluster.running_driver("app"), timeout=90)
    wait_for("phase Running", lambda: cluster.status("app").get("phase") == "Running")
    app = (("app", "app"), ("namespace", cluster.namespace))

    samples = wait_for("metrics of the app", lambda: (
        (s := _samples(operator_process.metrics_port)).get(("streamapp_operator_partitions", app)) == 3 and s))

    assert samples[("streamapp_operator_desired_executors", app)] == 3  # 3 partitions / 1 core
    assert samples[("streamapp_operator_apps", (("phase", "Running"),))] >= 1
    assert samples[("streamapp_operator_reconciles_total", (("result", "changed"),))] >= 1
    assert samples[("streamapp_operator_reconcile_duration_seconds_count", ())] >= 2


def test_a_drivers_runtime_metrics_reach_the_apps_status(cluster, kafka):
    """kwok's fake pods have loopback addresses (streamapp_testbed.networks), so the runtime's own
    metrics endpoint can stand in for the driver at its pod address, and what the operator reads
    from it (lag per query, the last batch, the checkpoint's shuffle partitions) is checked where a
    user looks: the app's status. The driver reports 5 shuffle partitions while the topic has 2 (a
    checkpoint kept from an earlier life of the app): status says what the checkpoint uses."""
    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=2)
    cluster.pv_for("app")
    cluster.apply(simple_app("app", cluster.namespace, kafka.bootstrap, topic))
    driver = wait_for("a running driver", lambda: cluster.running_driver("app"), timeout=90)
    ip = driver["status"]["podIP"]
    assert ipaddress.ip_address(ip).is_loopback, f"a fake pod's address must stay on this machine, not {ip}"

    metrics = Metrics("app", {topic: "lines"}, {})
    batch_time = time.time() - 5
    metrics.observe({
        "name": "counts-kafka", "batchId": 7, "numInputRows": 40, "batchDuration": 800,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(batch_time)),
        "sources": [{"endOffset": {topic: {"0": 100, "1": 50}}, "latestOffset": {topic: {"0": 1300, "1": 250}}}],
    })
    metrics.shuffle_partitions.labels("app").set(5)
    metrics.transactions("counts-kafka", 12, 1)  # as an exactly-once Kafka sink counts them
    metrics.written("counts-kafka", 7, 30, 2)
    server = http_server.serve(metrics, names.METRICS_PORT, lambda: (True, "ok"), host=ip)
    touched = [0.0]

    def reported():
        # The operator reads a driver's metrics after a reconcile that saw it running; between full
        # reconciles its periodic look may end at the partition counts (docs/operator.md). Touching the
        # app every few seconds makes those reconciles come sooner; the figures still come only from
        # the endpoint above.
        if time.monotonic() - touched[0] > 3:
            touched[0] = time.monotonic()
            cluster.kubectl("annotate", "--overwrite", "sapp/app", f"test.streamapp.io/touched={int(touched[0])}")
        s = cluster.status("app")
        return s.get("lag") == 1400 and s.get("sinks") and s

    try:
        status = wait_for("lag and the last batch in status", reported, timeout=90)
    finally:
        server.shutdown()
        server.server_close()
    assert status["sinks"] == [{"name": "counts-kafka", "lag": 1400,
                                "lastProgressTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(batch_time)),
                                "transactions": 12, "transactionsAborted": 1, "partitionsSkipped": 2}]
    assert status["phase"] == "Running"
    assert status["state"]["shufflePartitions"] == 5
