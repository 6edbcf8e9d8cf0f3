"""An app that is not running says why: failure modes made for real on the test bed (the real
scheduler and volume controller, kwok's nodes, real Kafka), all at once, each within 30 s in the Ready
or Degraded condition, status.reason (the REASON column of `kubectl get sapp`), status.message and one
event. Those only a real kubelet can make (an image that cannot be pulled, an out-of-memory kill, a
pipeline Spark refuses) are in tests/e2e/test_failures.py."""

from __future__ import annotations

import pytest

from streamapp_testbed.kafka_admin import create_topic
from streamapp_testbed.process import free_port

from streamapp_testkit.operator_bed import simple_app, unique
from streamapp_testbed.waiting import wait_for

pytestmark = pytest.mark.integration
WITHIN = 30  # seconds from the cause to the reason in status (the bed's operator resyncs every 2 s, but
# a cause no watch event brings is looked at every 10 s while an app is not running, whatever the resync)
POSTGRES = {"from": "counts", "postgres": {"secretRef": {"name": "pg"}, "table": "counts", "primaryKey": ["value"]}}


def _cases(bootstrap: str, topic: str) -> dict[str, tuple[dict, str, str, list[str]]]:
    """app -> (spec changes, condition, reason, what the message names)."""
    sink = {"from": "counts", "kafka": {"topic": f"{topic}-out", "key": "value"}}
    return {
        "no-class": ({"state": {"checkpoint": {"storageClassName": "no-such-class"}}}, "Ready", "ClaimPending",
                     ['storage class "no-such-class" does not exist', "spec.state.checkpoint.storageClassName"]),
        "no-volume": ({}, "Ready", "ClaimPending", ["no storage class is set", "PersistentVolume"]),
        "too-big": ({"driver": {"memory": "300g"}}, "Ready", "Unschedulable",
                    ["Insufficient memory", "spec.driver.memory 300g"]),
        "too-many-cores": ({"driver": {"cores": 64}}, "Ready", "Unschedulable",
                           ["Insufficient cpu", "spec.driver.cores"]),
        "no-pool": ({"driver": {"nodeSelector": {"pool": "none"}}}, "Ready", "Unschedulable",
                    ["didn't match Pod's node affinity/selector", "spec.driver.nodeSelector (pool=none)"]),
        "no-pg": ({"sinks": [sink, POSTGRES]}, "Ready", "SecretMissing",
                  ['Secret "pg" not found (spec.sinks[1].postgres.secretRef)', "create secret generic pg"]),
        "no-key": ({"sinks": [sink, {**POSTGRES, "postgres": {**POSTGRES["postgres"],
                                                              "secretRef": {"name": "pg-other", "key": "dsn"}}}]},
                   "Ready", "SecretMissing", ['Secret "pg-other" has no key "dsn"']),
        "no-kafka-auth": ({"kafka": {"bootstrapServers": bootstrap, "secretRef": {"name": "kafka-auth"}}},
                          "Degraded", "SecretMissing", ["Secret kafka-auth (spec.kafka.secretRef) not found"]),
        "no-kafka": ({"kafka": {"bootstrapServers": f"127.0.0.1:{free_port()}"}}, "Degraded", "KafkaUnreachable",
                     ["127.0.0.1"]),
        # the driver pod mounts the descriptor set's ConfigMap: without it, it could never start
        "no-protos": ({"sources": [{"name": "lines", "topic": topic, "format": "protobuf", "schema": {"value": "string"},
                                    "protobuf": {"message": "test.Line",
                                                 "descriptorSet": {"configMap": "protos", "key": "lines.pb"}}}]},
                      "Ready", "ConfigMapMissing",
                      ['ConfigMap "protos" not found (spec.sources[0].protobuf.descriptorSet)', "create configmap protos"]),
    }


def test_each_failure_mode_is_named_in_condition_reason_message_and_one_event(cluster, kafka):
    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=1)
    cases = _cases(kafka.bootstrap, topic)
    for name in cases:
        if name not in ("no-class", "no-volume"):
            cluster.pv_for(name)  # its claim binds: what stops it is something else
    cluster.kubectl("create", "secret", "generic", "pg-other", "--from-literal=uri=postgresql://x")
    for name, (spec, _, _, _) in cases.items():
        cluster.apply(simple_app(name, cluster.namespace, kafka.bootstrap, topic, **spec))

    for name, (_, kind, reason, says) in cases.items():
        # the scheduler may first see a claim not bound yet, then the cause: the message follows it
        condition = wait_for(f"{name}: {kind} {reason} naming {says[0]!r}", lambda: (
            (c := cluster.condition(name, kind)).get("reason") == reason and says[0] in c.get("message", "") and c),
            timeout=WITHIN)
        status = cluster.status(name)
        assert status["reason"] == reason, (name, status)
        for text in says:
            assert text in condition["message"] and text in status["message"], (name, text, condition)
        assert cluster.event(name, reason)  # one per reason: its message is the first cause seen
    for name in ("no-pg", "no-key", "no-kafka-auth", "no-kafka", "no-protos"):
        assert cluster.driver(name) is None, f"{name}: a driver that could not start was created"
    rows = cluster.kubectl("get", "sapp").stdout
    assert all(reason in rows for _, _, reason, _ in cases.values()), rows

    # one event per cause, not one per reconcile (the bed's operator reconciles every 2 s)
    before = {name: len([e for e in cluster.events(name) if e["reason"] == cases[name][2]]) for name in cases}
    assert all(count == 1 for count in before.values()), before

    # the cause goes: the app starts, and the reason is gone
    cluster.kubectl("create", "secret", "generic", "pg", "--from-literal=uri=postgresql://x")
    wait_for("no-pg started once its Secret exists", lambda: cluster.driver("no-pg"), timeout=WITHIN)
    wait_for("no-pg's reason gone", lambda: "reason" not in cluster.status("no-pg"), timeout=WITHIN)


def test_a_failed_driver_is_kept_for_inspection_and_its_last_words_reach_status_and_an_event(cluster, kafka):
    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=1)
    cluster.pv_for("app")
    cluster.apply(simple_app("app", cluster.namespace, kafka.bootstrap, topic,
                             restartPolicy={"backoff": "8s", "maxBackoff": "8s"}))
    first = wait_for("a running driver", lambda: cluster.running_driver("app"), timeout=60)
    # kwok plays the kubelet: the driver container ends with exit code 1 and a termination message
    cluster.kubectl("annotate", "pod", "app-driver", "testbed.streamapp.io/exit-code=1")
    cluster.kubectl("label", "pod", "app-driver", "testbed.streamapp.io/fail=true")

    status = wait_for("the failure recorded", lambda: (s := cluster.status("app")).get("restarts") == 1 and s,
                      timeout=WITHIN)
    said = "failed on purpose by the test bed's pod-fail stage"
    assert status["lastRestart"]["message"] == said and status["lastRestart"]["exitCode"] == 1
    assert said in status["message"] and status["reason"] == "DriverFailed"
    assert said in cluster.event("app", "DriverFailed", said)["message"]
    kept = cluster.driver("app")
    assert kept["metadata"]["uid"] == first["metadata"]["uid"] and kept["status"]["phase"] == "Failed", \
        "the failed driver is kept during the backoff, for `kubectl logs app-driver`"
    second = wait_for("the replacement once the backoff has passed",
                      lambda: cluster.running_driver("app", not_uid=first["metadata"]["uid"]), timeout=40)
    assert second and len(cluster.driver_pods("app")) == 1
    assert cluster.status("app")["lastRestart"]["message"] == said  # kept until the next restart


def test_a_kafka_secret_with_a_refused_option_marks_the_app_invalid_and_starts_no_driver(cluster, kafka):
    """The Secret's keys become the driver's Kafka client options: they pass the policy as spec.kafka.options
    do (credentials aside), read by the operator before a driver starts."""
    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=1)
    cluster.pv_for("bad-secret")
    cluster.kubectl("create", "secret", "generic", "kafka-opts", "--from-literal=CONFIG_PROVIDERS=file",
                    "--from-literal=security.protocol=PLAINTEXT")
    cluster.apply(simple_app("bad-secret", cluster.namespace, kafka.bootstrap, topic,
                             kafka={"bootstrapServers": kafka.bootstrap, "secretRef": {"name": "kafka-opts"}}))
    condition = wait_for("SpecValid False naming the Secret's key", lambda: (
        (c := cluster.condition("bad-secret", "SpecValid")).get("status") == "False"
        and "CONFIG_PROVIDERS" in c.get("message", "") and c), timeout=WITHIN)
    assert "spec.kafka.secretRef" in condition["message"] and "loads code" in condition["message"]
    assert cluster.status("bad-secret")["phase"] == "Invalid"
    assert cluster.driver("bad-secret") is None

    # the key goes: the app starts
    cluster.kubectl("delete", "secret", "kafka-opts")
    cluster.kubectl("create", "secret", "generic", "kafka-opts", "--from-literal=security.protocol=PLAINTEXT")
    wait_for("a driver once the Secret holds only safe options", lambda: cluster.driver("bad-secret"), timeout=WITHIN)
