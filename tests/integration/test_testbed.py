"""Smoke tests of the test bed: each part used for real, the way the product will use it."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from streamapp_testbed.kafka_admin import consume_all, create_topic, produce
from streamapp_testbed.kwok import wait_for_pod_phase

pytestmark = pytest.mark.integration


def test_kafka_round_trip_keeps_every_record_and_its_partition_key(kafka):
    topic = f"smoke-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap, topic, partitions=3)
    sent = {(f"k{i % 7}".encode(), f"v{i}".encode()) for i in range(300)}
    assert produce(kafka.bootstrap, topic, sorted(sent)) == 300

    received = consume_all(kafka.bootstrap, topic, expect=300)

    assert set(received) == sent


@pytest.mark.slow
def test_spark_streams_a_kafka_topic_into_an_aggregate_topic(kafka, spark, tmp_path):
    from pyspark.sql import functions as F

    source, sink = f"words-{uuid.uuid4().hex[:8]}", f"word-counts-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap, source, partitions=2)
    words = "the quick brown fox jumps over the lazy dog the end".split()
    produce(kafka.bootstrap, source, [(None, w) for w in words])

    counts = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select(F.col("value").cast("string").alias("word"))
        .groupBy("word")
        .count()
    )
    query = (
        counts.select(F.col("word").alias("key"), F.to_json(F.struct("word", "count")).alias("value"))
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .outputMode("update")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None

    latest = {}
    for key, value in consume_all(kafka.bootstrap, sink, expect=len(set(words))):
        latest[key.decode()] = json.loads(value)["count"]
    assert latest == {w: words.count(w) for w in set(words)}


def _deployment(name: str, replicas: int) -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": "registry.invalid/never-pulled:1"}]},
            },
        },
    }


def test_deployment_pods_reach_running_on_kwok_nodes(control_plane, kwok):
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(_deployment("smoke", 3)))

    pods = wait_for_pod_phase(control_plane, "default", "app=smoke", "Running", count=3)

    assert {p["spec"]["nodeName"] for p in pods} <= set(kwok.node_names)
    assert all(p["status"]["podIP"] for p in pods)
    control_plane.kubectl("delete", "deployment", "smoke", "--wait=false")


def test_kwok_chaos_stage_fails_the_labelled_pod_only(control_plane, kwok):
    for name in ("victim", "bystander"):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"smoke": "chaos"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "registry.invalid/x:1"}]},
        }
        control_plane.kubectl("apply", "-f", "-", input=json.dumps(pod))
    wait_for_pod_phase(control_plane, "default", "smoke=chaos", "Running", count=2)

    kwok.fail_pod("default", "victim", exit_code=137)

    failed = wait_for_pod_phase(control_plane, "default", "smoke=chaos", "Failed", count=1)
    assert [p["metadata"]["name"] for p in failed] == ["victim"]
    terminated = failed[0]["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 137
    time.sleep(1)
    bystander = json.loads(control_plane.kubectl("get", "pod", "bystander", "-o", "json").stdout)
    assert bystander["status"]["phase"] == "Running"
    control_plane.kubectl("delete", "pod", "victim", "bystander", "--wait=false")


def _ready(pod: dict) -> str | None:
    return next((c["status"] for c in pod["status"].get("conditions", []) if c["type"] == "Ready"), None)


def test_a_pod_marked_not_ready_by_a_node_lapse_turns_ready_again_in_place(control_plane, kwok):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "lapse", "namespace": "default", "labels": {"smoke": "lapse"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "registry.invalid/x:1"}]},
    }
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(pod))
    [before] = wait_for_pod_phase(control_plane, "default", "smoke=lapse", "Running", count=1)

    assert _ready(kwok.mark_not_ready("default", "lapse")) == "False"

    deadline, after = time.monotonic() + 30, before
    while time.monotonic() < deadline:
        after = json.loads(control_plane.kubectl("get", "pod", "lapse", "-o", "json").stdout)
        if _ready(after) == "True":
            break
        time.sleep(0.3)
    assert _ready(after) == "True", after["status"]
    # the same pod, not a restarted one: a kubelet re-reports readiness, it does not start the pod again
    assert (after["metadata"]["uid"], after["status"]["podIP"], after["status"]["startTime"]) == (
        before["metadata"]["uid"], before["status"]["podIP"], before["status"]["startTime"])
    control_plane.kubectl("delete", "pod", "lapse", "--wait=false")


WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.testbed.streamapp.io"},
    "spec": {
        "group": "testbed.streamapp.io",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "properties": {"size": {"type": "integer", "minimum": 1}}}
                        },
                    }
                },
            }
        ],
    },
}


def test_custom_resource_definition_installs_and_objects_are_validated(control_plane):
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(WIDGET_CRD))
    control_plane.kubectl("wait", "--for=condition=Established", "crd/widgets.testbed.streamapp.io", "--timeout=60s")

    widget = {"apiVersion": "testbed.streamapp.io/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}}
    control_plane.kubectl("apply", "-n", "default", "-f", "-", input=json.dumps(widget))
    listed = json.loads(control_plane.kubectl("get", "widgets", "-n", "default", "-o", "json").stdout)
    assert [(w["metadata"]["name"], w["spec"]["size"]) for w in listed["items"]] == [("w1", 3)]

    bad = {**widget, "metadata": {"name": "w2"}, "spec": {"size": 0}}
    refused = control_plane.kubectl("apply", "-n", "default", "-f", "-", input=json.dumps(bad), check=False)
    assert refused.returncode != 0 and "spec.size" in refused.stderr


def test_prometheus_scrapes_a_target(prometheus):
    from prometheus_client import CollectorRegistry, Counter, start_http_server

    from streamapp_testbed.process import free_port

    registry = CollectorRegistry()
    Counter("testbed_smoke_events", "events seen by the smoke test", registry=registry).inc(5)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        prometheus.scrape("smoke", [f"127.0.0.1:{port}"])

        series = prometheus.wait_for('testbed_smoke_events_total{job="smoke"}', timeout=30)

        assert float(series[0]["value"][1]) == 5.0
        assert prometheus.query('up{job="smoke"}')[0]["value"][1] == "1"
    finally:
        server.shutdown()
        thread.join(5)


def test_postgres_accepts_connections_and_upserts(postgres):
    import psycopg

    with psycopg.connect(postgres.dsn) as conn:
        conn.execute("CREATE TABLE smoke (k text PRIMARY KEY, n int)")
        for n in (1, 2):
            conn.execute("INSERT INTO smoke VALUES ('a', %s) ON CONFLICT (k) DO UPDATE SET n = excluded.n", (n,))
        assert conn.execute("SELECT k, n FROM smoke").fetchall() == [("a", 2)]


def test_the_venv_that_make_deps_builds_has_the_streamapp_command(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    command = Path(sys.executable).parent / "streamapp"
    assert command.exists(), f"{command}: make deps writes it"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as from a user's shell
    done = subprocess.run([str(command), "validate", str(repo / "examples" / "click-sessions.yaml")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 0 and "click-sessions: valid" in done.stdout, done.stdout + done.stderr
