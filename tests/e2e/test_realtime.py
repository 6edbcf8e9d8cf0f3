"""Real-time mode on the real cluster: examples/click-feed.yaml (`trigger: realtime`) applied as a user
would. The operator sizes the executors for the task slots the app holds (2 partitions × 2 queries =
4 slots, 2 cores per executor: 2 executors) and says so in status; the driver checks it has them and
runs its queries in real-time mode; records flow to the output topic and malformed ones to the
dead-letter topic. Other apps are suspended (a 2-core node holds one driver)."""

from __future__ import annotations

import json

import pytest
import yaml

from streamapp_testkit.e2e_clicks import CLASS, NS, REPO, RUN, app_object, running, spark_conf, suspend_click_sessions
from streamapp_testbed.waiting import NotYet, wait_for
from streamapp_testbed import cluster_apps, kafka_admin

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

APP = "click-feed"
TOPIC, OUT, DLQ, VOLUME = f"rt-clicks-{RUN}", f"rt-feed-{RUN}", f"rt-feed-{RUN}.dlq", f"streamapp-e2e-rt-{RUN}"


def manifest(bootstrap: str) -> dict:
    doc = yaml.safe_load((REPO / "examples" / "click-feed.yaml").read_text())
    doc["metadata"]["namespace"] = NS
    spec = doc["spec"]
    spec["kafka"]["bootstrapServers"] = bootstrap
    spec["sources"][0].update(topic=TOPIC, startingOffsets="earliest")
    spec["sinks"][0]["kafka"]["topic"] = OUT
    spec.update({
        "deadLetter": {"topic": DLQ},
        "state": {"checkpoint": {"size": "1Gi", "accessModes": ["ReadWriteMany"], "storageClassName": CLASS}},
        "driver": {"cores": 1, "memory": "1g"},
        "executor": {"cores": 2, "memory": "1g"},
        # a 2-core node: the executors' slots are threads that mostly wait, so they ask for little CPU
        "sparkConf": spark_conf("200m"),
        "restartPolicy": {"backoff": "1s", "maxBackoff": "10s", "maxRestarts": 0},
    })
    return doc


def read(c, topic: str, expect: int) -> list:
    return kafka_admin.consume_all(c.kafka_bootstrap, topic, expect=expect, timeout=60)


def test_a_realtime_app_gets_a_slot_per_partition_and_query_and_passes_records_on(operator):
    c = operator
    suspend_click_sessions(c)
    c.apply(cluster_apps.hostpath_volume(VOLUME, c.volume_dir(f"rt-{RUN}"), CLASS))
    for topic in (TOPIC, OUT, DLQ):
        kafka_admin.create_topic(c.kafka_bootstrap, topic, partitions=2 if topic == TOPIC else 1)
    try:
        c.apply(manifest(c.kafka_bootstrap))

        def sized():
            status = app_object(c, APP).get("status", {})
            scaling = status.get("scaling") or {}
            if status.get("phase") == "Running" and scaling.get("target") == 2 and len(running(c, "executor", APP)) == 2:
                return status
            return NotYet(f"phase {status.get('phase')}, scaling={scaling}, {len(running(c, 'executor', APP))} executors")

        status = wait_for("two executors for four task slots", sized, timeout=600, every=2)
        assert "4 task slots of real-time queries" in status["scaling"]["reason"], status["scaling"]
        driver = running(c, "driver", APP)[0]["metadata"]["name"]
        wait_for("the driver holding its slots", lambda: "real-time mode: 4 task slots held of 4" in c.kubectl(
            "logs", "-n", NS, driver, "-c", "driver").stdout, timeout=300, every=2)

        clicks = [(f"s{i % 7}", json.dumps({"uuid": f"u{i}", "session_id": f"s{i % 7}", "event": kind, "time_spent": i,
                                            "ts": "2026-11-24T10:00:00.000Z"}))
                  for i, kind in enumerate(["click", "page_view", "scroll"] * 40)]
        kafka_admin.produce(c.kafka_bootstrap, TOPIC, clicks + [("bad", "{not json")])
        passed = read(c, OUT, expect=80)
        assert len(passed) == 80, len(passed)
        values = [json.loads(v) for _, v in passed]
        assert {v["event"] for v in values} == {"click", "page_view"}
        assert sorted(v["uuid"] for v in values) == sorted(json.loads(v)["uuid"] for _, v in clicks
                                                           if json.loads(v)["event"] != "scroll")
        assert [k for k, _ in read(c, DLQ, expect=1)] == [b"bad"]
        log = c.kubectl("logs", "-n", NS, driver, "-c", "driver").stdout
        assert "(kafka, update mode)" in log and "refused" not in log, log[-2000:]
    finally:
        c.kubectl("delete", "streamapp", APP, "-n", NS, "--wait=true", "--timeout=120s", check=False)
        c.kubectl("delete", "pv", VOLUME, "--wait=false", check=False)
