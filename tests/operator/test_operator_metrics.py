"""The operator's own metrics, scraped from its port while it runs an app."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streamapp_testbed.kafka_admin import create_topic

from operator_bed import simple_app, unique, wait_for

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
