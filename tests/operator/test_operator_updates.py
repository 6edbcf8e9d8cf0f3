"""Spec updates, suspend, deletion and bad input, against the real API server, kwok and Kafka."""

from __future__ import annotations

import json

import pytest

from streamapp_testbed.kafka_admin import create_topic
from streamapp_testbed.process import free_port

from streamapp_testkit.operator_bed import simple_app, unique
from streamapp_testbed.waiting import wait_for

pytestmark = pytest.mark.integration


def _started(cluster, kafka, **spec):
    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=2)
    cluster.pv_for("app")
    cluster.apply(simple_app("app", cluster.namespace, kafka.bootstrap, topic, **spec))
    return wait_for("a running driver", lambda: cluster.running_driver("app"), timeout=90)


def _patch(cluster, spec: dict) -> None:
    cluster.kubectl("patch", "sapp/app", "--type=merge", "-p", json.dumps({"spec": spec}))


def test_incompatible_change_is_refused_then_accepted_with_a_state_reset(cluster, kafka):
    first = _started(cluster, kafka)
    _patch(cluster, {"shufflePartitions": 7})

    refused = wait_for("the change refused", lambda: (
        (c := cluster.condition("app", "SpecValid")).get("reason") == "IncompatibleChange" and c))
    assert refused["status"] == "False" and "spec.shufflePartitions" in refused["message"]
    cluster.event("app", "IncompatibleChange")
    # where people look: `kubectl get sapp` says the driver runs, and that the change was refused
    table = cluster.kubectl("get", "sapp", "app").stdout.split("\n")
    header, row = table[0].split(), table[1].split()
    assert header[:3] == ["NAME", "PHASE", "REASON"] and row[:3] == ["app", "Running", "IncompatibleChange"], table
    assert "change refused: spec.shufflePartitions" in cluster.kubectl("get", "sapp", "app", "-o", "wide").stdout
    assert cluster.driver("app")["metadata"]["uid"] == first["metadata"]["uid"], "the running driver is left alone"
    assert "shufflePartitions" not in cluster.config_spec("app"), "the ConfigMap keeps what was applied"

    _patch(cluster, {"state": {"resetNonce": "r1"}})

    second = wait_for("a driver on a fresh checkpoint path", lambda: cluster.running_driver("app", not_uid=first["metadata"]["uid"]),
                      timeout=60)
    env = {e["name"]: e.get("value") for e in second["spec"]["containers"][0]["env"]}
    assert env["STREAMAPP_CHECKPOINT_DIR"] == "/var/lib/streamapp/checkpoint/gen-r1"
    assert cluster.config_spec("app")["shufflePartitions"] == 7
    wait_for("spec valid again", lambda: cluster.condition("app", "SpecValid").get("status") == "True")
    wait_for("the reason column empty again", lambda: "reason" not in cluster.status("app"))
    assert cluster.status("app")["state"]["resetNonce"] == "r1"


def test_compatible_change_restarts_gracefully(cluster, kafka):
    first = _started(cluster, kafka)
    _patch(cluster, {"trigger": "5s"})
    wait_for("a new driver", lambda: cluster.running_driver("app", not_uid=first["metadata"]["uid"]), timeout=60)
    assert cluster.status("app").get("restarts", 0) == 0
    cluster.event("app", "Restarting", "spec.trigger")


def test_suspend_stops_the_driver_and_resume_starts_it_on_the_same_claim(cluster, kafka):
    first = _started(cluster, kafka)
    _patch(cluster, {"suspend": True})

    wait_for("no driver", lambda: not cluster.driver_pods("app"), timeout=60)
    wait_for("phase Suspended", lambda: cluster.status("app").get("phase") == "Suspended")
    for kind, name in (("PersistentVolumeClaim", "app-checkpoint"), ("ConfigMap", "app-config"), ("Service", "app-driver")):
        assert cluster.get(kind, name) is not None, f"{kind} kept while suspended"

    _patch(cluster, {"suspend": False})

    second = wait_for("a driver again", lambda: cluster.running_driver("app", not_uid=first["metadata"]["uid"]), timeout=60)
    assert second["spec"]["volumes"][1]["persistentVolumeClaim"]["claimName"] == "app-checkpoint"
    wait_for("phase Running", lambda: cluster.status("app").get("phase") == "Running")
    assert cluster.status("app").get("restarts", 0) == 0


@pytest.mark.parametrize("retain", [True, False])
def test_delete_keeps_the_checkpoint_claim_only_when_retained(cluster, kafka, retain):
    _started(cluster, kafka, state={"retainOnDelete": retain})
    cluster.kubectl("delete", "sapp/app", "--wait=true", "--timeout=60s")

    wait_for("driver and config gone", lambda: cluster.driver("app") is None and cluster.get("ConfigMap", "app-config") is None,
             timeout=60)
    if retain:
        wait_for("the claim still there a while later", lambda: cluster.get("Role", "app-driver") is None)
        claim = cluster.get("PersistentVolumeClaim", "app-checkpoint")
        assert claim is not None and not claim["metadata"].get("deletionTimestamp")
    else:
        wait_for("the claim gone", lambda: cluster.get("PersistentVolumeClaim", "app-checkpoint") is None, timeout=60)


def test_semantically_invalid_spec_creates_nothing_and_says_where(cluster, kafka):
    doc = simple_app("app", cluster.namespace, kafka.bootstrap, unique("lines"))
    doc["spec"]["sinks"] = [{"from": "nowhere", "kafka": {"topic": "out"}}]
    cluster.apply(doc)

    condition = wait_for("SpecValid False", lambda: (c := cluster.condition("app", "SpecValid")).get("status") == "False" and c)
    assert condition["reason"] == "Invalid" and "spec.sinks[0].from" in condition["message"]
    assert cluster.status("app")["phase"] == "Invalid"
    cluster.event("app", "InvalidSpec")
    for kind, name in (("Pod", "app-driver"), ("ConfigMap", "app-config"), ("PersistentVolumeClaim", "app-checkpoint"),
                       ("ServiceAccount", "app-driver")):
        assert cluster.get(kind, name) is None, f"{kind} created for an invalid app"


def test_unreachable_kafka_degrades_and_starts_nothing(cluster):
    doc = simple_app("app", cluster.namespace, f"127.0.0.1:{free_port()}", "lines")
    cluster.apply(doc)

    condition = wait_for("Degraded", lambda: (c := cluster.condition("app", "Degraded")).get("status") == "True" and c, timeout=60)
    assert condition["reason"] == "KafkaUnreachable"
    assert cluster.condition("app", "Ready")["reason"] == "WaitingForKafka"
    assert cluster.driver("app") is None
