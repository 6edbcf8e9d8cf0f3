"""The operator on the real API server, kwok nodes and Kafka: children, restore, scaling."""

from __future__ import annotations

import base64
import json

import pytest
import yaml

from streamapp_api import load
from streamapp_operator.decide.children import converge
from streamapp_operator.names import ANN_CONFIG_HASH
from streamapp_operator.render import Launch, config_hash, render_children
from streamapp_testbed.kafka_admin import add_partitions, create_topic
from streamapp_testbed.kwok import EXIT_CODE_ANNOTATION, FAIL_LABEL

from streamapp_testkit.operator_bed import example, input_topics, network_settings, simple_app, unique
from streamapp_testbed.waiting import wait_for

pytestmark = pytest.mark.integration
# (kind, name suffix) of every child of an app named <name>: <name>-<suffix>
CHILDREN = (("ServiceAccount", "driver"), ("Role", "driver"), ("RoleBinding", "driver"), ("Secret", "spark-auth"),
            ("ConfigMap", "config"), ("Service", "driver"), ("Service", "ui"), ("NetworkPolicy", "spark"),
            ("PodDisruptionBudget", "driver"), ("Pod", "driver"))
EXAMPLES = ("word-count", "click-sessions", "log-routing", "not-looking-at-facebook", "pos-invoices",
            "profile-enrichment", "search-clicks", "stock-stats")


@pytest.mark.slow
def test_every_example_gets_its_children_owned_and_a_running_driver(cluster, kafka):
    apps = {}
    # the Secret the examples' Postgres sinks name: without it the operator holds their drivers back
    cluster.kubectl("create", "secret", "generic", "pg", "--from-literal=uri=postgresql://127.0.0.1:5432/streamapp")
    for name in EXAMPLES:
        doc = example(name, cluster.namespace, kafka.bootstrap)
        for topic in input_topics(doc):
            create_topic(kafka.bootstrap, f"{topic}", partitions=2) if not _exists(kafka, topic) else None
        cluster.pv_for(name)
        cluster.apply(doc)
        apps[name] = doc
    for name in apps:
        wait_for(f"{name} Running", lambda: cluster.status(name).get("phase") == "Running", timeout=120)
        uid = cluster.app(name)["metadata"]["uid"]
        rendered = {(o["kind"], o["metadata"]["name"]): o
                    for o in render_children(load(apps[name]), uid, Launch(1), network_settings())}
        for kind, suffix in CHILDREN:
            child = cluster.get(kind, f"{name}-{suffix}")
            assert child is not None, f"{name}: no {kind} {name}-{suffix}"
            owners = child["metadata"].get("ownerReferences") or []
            assert [(o["uid"], o.get("controller")) for o in owners] == [(uid, True)], f"{name}: {kind} owners {owners}"
            # As the API server holds it (validated, defaulted), nothing is left to converge.
            if (kind, f"{name}-{suffix}") in rendered:
                assert converge(rendered[kind, f"{name}-{suffix}"], child) is None, \
                    f"{name}: {kind} {name}-{suffix} would be patched again"
        assert len(base64.b64decode(cluster.get("Secret", f"{name}-spark-auth")["data"]["secret"])) == 32
        # Kubernetes' disruption controller counts the driver (no scale of the StreamApp asked): while
        # it is Ready, no eviction is allowed
        wait_for(f"{name}: budget counts the driver", lambda: (cluster.get("PodDisruptionBudget", f"{name}-driver")
                                                                .get("status") or {}).get("expectedPods") == 1)
        claim = cluster.get("PersistentVolumeClaim", f"{name}-checkpoint")
        assert claim["status"]["phase"] == "Bound"
        assert not claim["metadata"].get("ownerReferences"), "retained by default: not garbage-collected"
        assert len(cluster.driver_pods(name)) == 1
        # A node heartbeat lapse on a starved machine marks kwok pods NotReady; the test bed's
        # pod-ready-again stage turns them Ready again as a kubelet would, so Ready must follow.
        wait_for(f"{name} Ready", lambda: cluster.condition(name, "Ready").get("status") == "True", timeout=60)


def test_a_new_app_whose_config_map_is_left_over_starts_on_its_own_config(cluster, kafka):
    # An app deleted and made again before the old one's ConfigMap was collected. The operator takes
    # a new app's children as absent (no reads before its first driver), so its create of the
    # ConfigMap meets the old one: the driver must wait for a decision on what is really there.
    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=2)
    cluster.pv_for("app")
    cluster.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app-config", "namespace": cluster.namespace},
                   "data": {"streamapp.yaml": "left: over", "spark.properties": "spark.executor.instances=7\n"}})
    cluster.apply(simple_app("app", cluster.namespace, kafka.bootstrap, topic))
    pod = wait_for("a running driver", lambda: cluster.running_driver("app"), timeout=90)
    config = cluster.get("ConfigMap", "app-config")
    assert yaml.safe_load(config["data"]["streamapp.yaml"])["spec"]["sources"][0]["topic"] == topic
    assert cluster.config_properties("app")["spark.executor.instances"] == "2"
    assert pod["metadata"]["annotations"][ANN_CONFIG_HASH] == config_hash(config), "driver started on another config"
    assert [o["uid"] for o in config["metadata"].get("ownerReferences") or []] == [cluster.app("app")["metadata"]["uid"]]
    assert len(cluster.driver_pods("app")) == 1


def _exists(kafka, topic: str) -> bool:
    from confluent_kafka.admin import AdminClient

    return topic in AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(timeout=10).topics


def _started(cluster, kafka, partitions=2, **spec):
    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=partitions)
    cluster.pv_for("app")
    cluster.apply(simple_app("app", cluster.namespace, kafka.bootstrap, topic, **spec))
    # Settled: the running driver has the executors the plan wants. A first driver sized from partition
    # counts read while the new topic's metadata was still incomplete was once replaced by a rescale
    # during the test (seen: 1 executor for 2 partitions), which a test then took for its own doing.
    pod = wait_for("a running driver of the size the plan wants", lambda: (
        (p := cluster.running_driver("app"))
        and p["metadata"]["annotations"].get("streamapp.io/executors") == str(cluster.status("app").get("desiredExecutors"))
        and p), timeout=120)
    return topic, pod


def test_failed_then_deleted_driver_is_replaced_on_the_same_claim_and_counted(cluster, kafka, control_plane):
    _, first = _started(cluster, kafka)
    wait_for("phase Running", lambda: cluster.status("app").get("phase") == "Running")
    since = cluster.app("app")["metadata"]["resourceVersion"]
    control_plane.kubectl("-n", cluster.namespace, "annotate", "pod", "app-driver", f"{EXIT_CODE_ANNOTATION}=137")
    control_plane.kubectl("-n", cluster.namespace, "label", "pod", "app-driver", f"{FAIL_LABEL}=true")

    second = wait_for("a new driver after the failure",
                      lambda: cluster.running_driver("app", not_uid=first["metadata"]["uid"]), timeout=60)
    status = wait_for("restart counted", lambda: cluster.status("app").get("restarts") == 1 and cluster.status("app"))
    assert status["lastRestart"]["exitCode"] == 137 and status["lastRestart"]["reason"] == "DriverFailed"
    assert status["lastRestart"]["time"]
    phases = cluster.phases("app", since, until="Running")
    assert phases[-3:] == ["Restarting", "Starting", "Running"], phases
    claim = lambda pod: next(v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"] if v["name"] == "checkpoint")  # noqa: E731
    assert claim(second) == claim(first) == "app-checkpoint"
    cluster.event("app", "DriverFailed", "137")

    cluster.kubectl("delete", "pod", "app-driver", "--wait=false")
    wait_for("a third driver after the deletion",
             lambda: cluster.running_driver("app", not_uid=second["metadata"]["uid"]), timeout=60)
    status = wait_for("second restart counted", lambda: (s := cluster.status("app")).get("restarts") == 2 and s)
    assert status["lastRestart"]["reason"] == "DriverDeleted" and "exitCode" not in status["lastRestart"]
    assert len(cluster.driver_pods("app")) == 1


@pytest.mark.slow
def test_a_driver_on_a_lost_node_is_replaced_only_once_the_pod_is_gone(cluster, kafka, control_plane, kwok):
    _, first = _started(cluster, kafka)
    lost = first["spec"]["nodeName"]
    # Counted from here: the node's loss is one restart, whatever the start-up went through.
    before = cluster.status("app").get("restarts", 0)
    control_plane.kubectl("delete", "node", lost, "--wait=false")  # the machine is gone for good
    try:
        # The controller-manager's pod GC removes pods bound to a node that no longer exists (after
        # its quarantine); only then may a driver start elsewhere on the same claim.
        second = wait_for("a new driver on another node",
                          lambda: cluster.running_driver("app", not_uid=first["metadata"]["uid"]), timeout=150)
        assert second["spec"]["nodeName"] != lost
        claim = lambda pod: next(v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"] if v["name"] == "checkpoint")  # noqa: E731
        assert claim(second) == claim(first)
        status = wait_for("restart counted once", lambda: (s := cluster.status("app")).get("restarts") == before + 1 and s)
        # Pod GC marks an orphaned pod Failed (condition DisruptionTarget, DeletionByPodGC) before it
        # deletes it; the operator may see either step first.
        assert status["lastRestart"]["reason"] in ("DriverDeleted", "DriverFailed", "NodeLost")
        assert len(cluster.driver_pods("app")) == 1
    finally:
        control_plane.kubectl("apply", "-f", "-", input=json.dumps(kwok.node(lost)))
        wait_for(f"{lost} back", lambda: any(
            c["type"] == "Ready" and c["status"] == "True" for c in json.loads(control_plane.kubectl(
                "get", "node", lost, "-o", "json").stdout).get("status", {}).get("conditions", [])), timeout=60)


def test_executors_follow_the_partition_count(cluster, kafka):
    # scaling.rescale restart: a new driver with the count (in place: test_operator_in_place_rescale.py)
    topic, first = _started(cluster, kafka, partitions=2, scaling={"rescale": "restart"})
    assert first["metadata"]["annotations"]["streamapp.io/executors"] == "2"
    assert cluster.config_properties("app")["spark.executor.instances"] == "2"

    add_partitions(kafka.bootstrap, topic, 5)

    second = wait_for("a driver with 5 executors", lambda: (
        (pod := cluster.running_driver("app")) and pod["metadata"]["annotations"]["streamapp.io/executors"] == "5" and pod),
        timeout=90)
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert cluster.config_properties("app")["spark.executor.instances"] == "5"
    wait_for("status shows it", lambda: (s := cluster.status("app")).get("partitions") == 5 and s.get("executors") == 5
             and s.get("desiredExecutors") == 5)
    assert cluster.status("app")["lastRestart"]["reason"] == "Rescale"
    assert cluster.status("app").get("restarts", 0) == 0, "a rescale is not a failure"


def test_kubectl_scale_sets_the_executor_count(cluster, kafka):
    _, first = _started(cluster, kafka, partitions=1)
    cluster.kubectl("scale", "sapp/app", "--replicas=4")
    wait_for("a driver with 4 executors", lambda: (
        (pod := cluster.running_driver("app")) and pod["metadata"]["annotations"]["streamapp.io/executors"] == "4"),
        timeout=60)
    assert cluster.config_properties("app")["spark.executor.instances"] == "4"
    # The test bed's driver never applies a count in place: status keeps the count it runs with until
    # the operator restarts it with the new one (after its rescale timeout, 60 s).
    assert cluster.status("app").get("executors") in (0, 1), "a count asked but not applied is not shown as running"
    scale = wait_for("scale subresource", lambda: (
        (out := cluster.kubectl("get", "sapp/app", "-o", "jsonpath={.status.executors}").stdout) == "4" and out),
        timeout=150)
    assert scale == "4"
    assert cluster.status("app")["scaling"]["lastRescale"]["method"] == "Fallback"


def test_an_older_budget_with_max_unavailable_is_patched_to_min_available(cluster):
    """Operators before 2026-11-25 rendered the driver's budget with maxUnavailable 0: the merge patch
    that converges it names the field to remove (the API refuses a budget with both)."""
    old = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": "upgraded-driver", "namespace": cluster.namespace},
           "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"streamapp.io/app": "upgraded"}},
                    "unhealthyPodEvictionPolicy": "AlwaysAllow"}}
    cluster.apply(old)
    rendered = {**old, "spec": {**{k: v for k, v in old["spec"].items() if k != "maxUnavailable"}, "minAvailable": 1}}
    cluster.kube.patch(converge(rendered, cluster.get("PodDisruptionBudget", "upgraded-driver")))
    spec = cluster.get("PodDisruptionBudget", "upgraded-driver")["spec"]
    assert spec["minAvailable"] == 1 and "maxUnavailable" not in spec
    assert converge(rendered, cluster.get("PodDisruptionBudget", "upgraded-driver")) is None
