"""Rendering: golden files for every example, plus the properties every driver must have.

Golden files live in tests/unit/operator/golden/; regenerate them deliberately with
STREAMAPP_UPDATE_GOLDEN=1 (the test then fails once, saying what it rewrote).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from streamapp_operator import names
from streamapp_operator.render import DRIVER_RULES, Launch, config_hash, network, render_all
from streamapp_operator.render.disruption import DECOMMISSION_CONF
from streamapp_api.contract import parse_properties
from streamapp_api.rules import SPARK_DECOMMISSION_CONF

from streamapp_testkit.operator_apps import app, example, example_names

pytestmark = pytest.mark.unit
GOLDEN = Path(__file__).resolve().parent / "golden"
UID = "00000000-0000-0000-0000-000000000000"


# What the chart's defaults give the operator (--network-policies, the default egress ports, its identity).
GOLDEN_NETWORK = network.NetworkPolicies(
    egress_ports=network.parse_ports(network.DEFAULT_EGRESS), operator_namespace="streamapp-system",
    operator_labels=(("app.kubernetes.io/name", "streamapp-operator"), ("app.kubernetes.io/instance", "streamapp")))


@pytest.mark.parametrize("name", example_names())
def test_rendering_matches_golden(name):
    rendered = yaml.safe_dump_all(render_all(example(name), UID, Launch(3, "streamapp/runtime:test"), GOLDEN_NETWORK),
                                  sort_keys=False)
    golden = GOLDEN / f"{name}.yaml"
    if os.environ.get("STREAMAPP_UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(rendered)
        pytest.fail(f"rewrote {golden}; unset STREAMAPP_UPDATE_GOLDEN and review the diff")
    assert golden.exists(), f"no golden file {golden}; generate with STREAMAPP_UPDATE_GOLDEN=1"
    assert rendered == golden.read_text()


def _objects(**spec):
    return {o["kind"]: o for o in render_all(app(**spec), UID, Launch(4))}


def test_driver_pod_is_locked_down():
    pod = _objects()["Pod"]
    container = pod["spec"]["containers"][0]
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"] == {"runAsNonRoot": True, "allowPrivilegeEscalation": False,
                                             "readOnlyRootFilesystem": True, "privileged": False,
                                             "capabilities": {"drop": ["ALL"]}}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes[mounts["/tmp"]] == {"name": "tmp", "emptyDir": {}}
    assert "emptyDir" in volumes[mounts[names.SPARK_LOCAL_DIR]]
    assert pod["spec"]["restartPolicy"] == "Never"


def test_the_schema_registry_credentials_reach_the_driver_from_their_secret_key():
    registry = {"url": "http://sr:8081", "secretRef": {"name": "sr-creds"}}
    container = _objects(kafka={"bootstrapServers": "k:9092", "schemaRegistry": registry})["Pod"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["STREAMAPP_SCHEMA_REGISTRY_USER_INFO"]["valueFrom"] == {
        "secretKeyRef": {"name": "sr-creds", "key": "basic.auth.user.info"}}
    without = _objects(kafka={"bootstrapServers": "k:9092", "schemaRegistry": {"url": "http://sr:8081"}})
    assert "STREAMAPP_SCHEMA_REGISTRY_USER_INFO" not in {e["name"] for e in without["Pod"]["spec"]["containers"][0]["env"]}


def test_descriptor_set_config_maps_are_mounted_in_the_driver_only_once_each():
    described = {"message": "shop.v1.Order", "descriptorSet": {"configMap": "shop-protos", "key": "shop.desc"}}
    sources = [{"name": n, "topic": n, "format": "protobuf", "schema": {"id": "string"}, "protobuf": described}
               for n in ("orders", "refunds")]
    objects = _objects(sources=sources, streams=[], sinks=[{"from": "orders", "kafka": {"topic": "out"}}])
    pod = objects["Pod"]["spec"]
    mounts = [m for m in pod["containers"][0]["volumeMounts"] if m["name"].startswith("descriptor-set-")]
    assert mounts == [{"name": "descriptor-set-0", "mountPath": "/opt/streamapp/descriptor-sets/shop-protos", "readOnly": True}]
    assert {"name": "descriptor-set-0", "configMap": {"name": "shop-protos"}} in pod["volumes"]
    # The driver ships the set's bytes with the decoder: the executors read no file.
    assert "descriptor-set" not in objects["ConfigMap"]["data"]["executor-template.yaml"]


def test_driver_pod_follows_the_runtime_contract():
    objects = _objects(state={"resetNonce": "7"}, kafka={"bootstrapServers": "k:9092", "secretRef": {"name": "creds"}})
    pod = objects["Pod"]
    container = pod["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["STREAMAPP_CHECKPOINT_DIR"]["value"] == "/var/lib/streamapp/checkpoint/gen-7"
    assert env["STREAMAPP_METRICS_PORT"]["value"] == "9090"
    assert env["STREAMAPP_POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert container["envFrom"] == [{"prefix": "STREAMAPP_KAFKA_", "secretRef": {"name": "creds"}}]
    assert container["command"] == ["streamapp", "run", "/etc/streamapp/streamapp.yaml",
                                    "--spark-conf", "/etc/streamapp/spark.properties"]
    annotations = pod["metadata"]["annotations"]
    assert (annotations["prometheus.io/scrape"], annotations["prometheus.io/port"]) == ("true", "9090")
    assert annotations[names.ANN_CONFIG_HASH] == config_hash(objects["ConfigMap"])
    props = parse_properties(objects["ConfigMap"]["data"]["spark.properties"])
    assert props["spark.kubernetes.driver.pod.name"] == "orders-driver"
    assert props["spark.executor.instances"] == "4"
    assert props["spark.kubernetes.executor.volumes.persistentVolumeClaim.checkpoint.options.claimName"] == "orders-checkpoint"
    assert "spark.driver.host" not in props  # the pod IP, from the environment
    manifest = yaml.safe_load(objects["ConfigMap"]["data"]["streamapp.yaml"])
    assert set(manifest) == {"apiVersion", "kind", "metadata", "spec"}


@pytest.mark.parametrize("retain, owned", [(True, False), (False, True)])
def test_checkpoint_claim_is_owned_only_without_retention(retain, owned):
    claim = _objects(state={"retainOnDelete": retain})["PersistentVolumeClaim"]
    assert ("ownerReferences" in claim["metadata"]) == owned
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_every_other_child_is_owned_by_the_app():
    for kind, obj in _objects().items():
        if kind != "PersistentVolumeClaim":
            assert obj["metadata"]["ownerReferences"] == [names.owner_reference("orders", UID)], kind


def test_driver_role_is_namespaced_and_limited_to_what_spark_uses():
    role = _objects()["Role"]
    assert role["kind"] == "Role"
    granted = {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}
    # Spark 4.0's driver, as configured (render/security.py), calls the API for executor pods only.
    assert {r for r, _ in granted} == {"pods"}
    assert not {v for _, v in granted} & {"*", "escalate", "bind", "impersonate", "update"}
    assert role["rules"] == [dict(r) for r in DRIVER_RULES]


def test_user_spark_conf_never_overrides_managed_keys():
    objects = _objects(sparkConf={"spark.ui.enabled": "false"})
    props = parse_properties(objects["ConfigMap"]["data"]["spark.properties"])
    assert props["spark.ui.enabled"] == "false"
    assert list(props) == sorted(props)


def test_memory_request_includes_spark_overhead():
    pod = _objects(driver={"memory": "2g"})["Pod"]
    assert pod["spec"]["containers"][0]["resources"]["limits"]["memory"] == f"{2048 + 384}Mi"


def test_executors_start_from_a_locked_down_pod_template():
    config = _objects()["ConfigMap"]
    props = parse_properties(config["data"]["spark.properties"])
    assert props["spark.kubernetes.executor.podTemplateFile"] == "/etc/streamapp/executor-template.yaml"
    template = yaml.safe_load(config["data"]["executor-template.yaml"])
    container = template["spec"]["containers"][0]
    assert container["name"] == props["spark.kubernetes.executor.podTemplateContainerName"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert template["spec"]["automountServiceAccountToken"] is False
    assert "&id" not in config["data"]["executor-template.yaml"]  # no YAML aliases of shared objects


def test_driver_and_executors_are_placed_where_the_spec_says_and_pull_with_its_secrets():
    spot = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
    objects = _objects(imagePullSecrets=["registry-creds"],
                       driver={"nodeSelector": {"pool": "on-demand"}, "annotations": {"sidecar.istio.io/inject": "false"}},
                       executor={"nodeSelector": {"pool": "spot"}, "tolerations": [spot], "labels": {"team": "obs"}})
    pod = objects["Pod"]
    template = yaml.safe_load(objects["ConfigMap"]["data"]["executor-template.yaml"])
    assert pod["spec"]["nodeSelector"] == {"pool": "on-demand"} and "tolerations" not in pod["spec"]
    assert template["spec"]["nodeSelector"] == {"pool": "spot"} and template["spec"]["tolerations"] == [spot]
    assert pod["spec"]["imagePullSecrets"] == template["spec"]["imagePullSecrets"] == [{"name": "registry-creds"}]
    assert pod["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
    assert pod["metadata"]["annotations"][names.ANN_CONFIG_HASH]  # the operator's own are all still there
    assert template["metadata"]["labels"] == {"team": "obs", **names.labels(pod["metadata"]["labels"][names.LABEL_APP],
                                                                             "executor")}


def test_an_app_without_placement_renders_no_placement_fields():
    pod, template = _objects()["Pod"], yaml.safe_load(_objects()["ConfigMap"]["data"]["executor-template.yaml"])
    for spec in (pod["spec"], template["spec"]):
        assert not {"nodeSelector", "tolerations", "imagePullSecrets"} & set(spec)

def test_node_scale_down_never_evicts_the_driver_and_executors_leave_gracefully():
    objects = _objects()
    budget = objects["PodDisruptionBudget"]
    # a number: the disruption controller then counts the pods instead of reading the StreamApp's scale
    assert budget["spec"]["minAvailable"] == 1 and "maxUnavailable" not in budget["spec"]
    # it selects the driver alone: the executors stay evictable
    assert budget["spec"]["selector"] == {"matchLabels": {names.LABEL_APP: "orders", names.LABEL_COMPONENT: "driver"}}
    assert budget["metadata"]["ownerReferences"] == [names.owner_reference("orders", UID)]
    driver = objects["Pod"]["metadata"]
    assert set(budget["spec"]["selector"]["matchLabels"].items()) <= set(driver["labels"].items())
    assert driver["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"
    assert driver["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    template = yaml.safe_load(objects["ConfigMap"]["data"]["executor-template.yaml"])
    assert template["metadata"]["annotations"] == {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    assert template["spec"]["terminationGracePeriodSeconds"] >= 60
    props = parse_properties(objects["ConfigMap"]["data"]["spark.properties"])
    assert props["spark.decommission.enabled"] == "true"
    assert props["spark.storage.decommission.shuffleBlocks.enabled"] == "true"
    # a user cannot turn them off: spec.sparkConf refuses each key the operator sets here
    assert set(DECOMMISSION_CONF) == set(SPARK_DECOMMISSION_CONF)
