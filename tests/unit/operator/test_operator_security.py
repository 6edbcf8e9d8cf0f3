"""Spark traffic and network: the per-app authentication Secret and its mounts, the Spark settings,
the NetworkPolicy and its command-line settings (render/security.py, render/network.py, act/)."""

from __future__ import annotations

import argparse
import base64
from dataclasses import replace

import pytest
import yaml

from streamapp_api import parse
from streamapp_api.contract import parse_properties
from streamapp_operator import names
from streamapp_operator.act.apply import with_key
from streamapp_operator.decide.children import plan_children
from streamapp_operator.render import Launch, render_all, render_children
from streamapp_operator.render import network as net

from streamapp_testkit.operator_apps import app, manifest

pytestmark = pytest.mark.unit
UID = "uid-1"
AUTH_FILE = "/var/run/secrets/streamapp.io/spark-auth/secret"


def objects(network=None, **spec) -> dict[str, dict]:
    return {o["kind"]: o for o in render_all(app(**spec), UID, Launch(2), network)}


def props(objs: dict) -> dict[str, str]:
    return parse_properties(objs["ConfigMap"]["data"]["spark.properties"])


def test_spark_authenticates_and_encrypts_with_a_key_file_on_every_pod():
    objs = objects()
    conf = props(objs)
    assert {k: conf[k] for k in conf if k.startswith(("spark.authenticate", "spark.network.crypto."))} == {
        "spark.authenticate": "true", "spark.authenticate.secret.file": AUTH_FILE,
        "spark.network.crypto.enabled": "true", "spark.network.crypto.authEngineVersion": "2",
        "spark.network.crypto.saslFallback": "false", "spark.network.crypto.cipher": "AES/GCM/NoPadding"}
    assert "spark.io.encryption.enabled" not in conf  # the user's choice (docs/operator.md)
    template = yaml.safe_load(objs["ConfigMap"]["data"]["executor-template.yaml"])
    # Without a spark.master of Kubernetes at start, Spark 4.0's executor ignores the key file.
    env = {e["name"]: e.get("value") for e in template["spec"]["containers"][0]["env"]}
    assert env["SPARK_JAVA_OPT_STREAMAPP_MASTER"].startswith("-Dspark.master=k8s://")
    for pod in (objs["Pod"], template):
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        mounts = {m["mountPath"]: m for m in pod["spec"]["containers"][0]["volumeMounts"]}
        mount = mounts[AUTH_FILE.rsplit("/", 1)[0]]
        assert mount["readOnly"] is True
        secret = volumes[mount["name"]]["secret"]
        assert secret == {"secretName": "orders-spark-auth", "defaultMode": 0o440}
        # readable by Spark's user through the pod's group, which the kubelet gives the files
        assert pod["spec"]["securityContext"]["fsGroup"] == pod["spec"]["securityContext"]["runAsUser"] == 185
        env = {e["name"] for e in pod["spec"]["containers"][0].get("env", [])}
        assert "_SPARK_AUTH_SECRET" not in env


def test_the_secret_is_rendered_without_a_key_and_owned_by_the_app():
    secret = objects()["Secret"]
    assert secret["metadata"]["name"] == names.spark_auth_secret("orders") == "orders-spark-auth"
    assert "data" not in secret and "stringData" not in secret
    assert secret["metadata"]["ownerReferences"] == [names.owner_reference("orders", UID)]


def test_act_gives_the_secret_a_fresh_random_key_and_leaves_other_objects_alone():
    secret = objects()["Secret"]
    one, two = with_key(secret), with_key(secret)
    keys = [base64.b64decode(s["data"]["secret"]) for s in (one, two)]
    assert len(keys[0]) == 32 and keys[0] != keys[1]
    assert "data" not in secret  # the rendering is not changed
    config = objects()["ConfigMap"]
    assert with_key(config) is config


def test_the_secret_is_created_if_absent_and_never_patched():
    rendered = render_children(app(), UID, Launch(2))
    create, _ = plan_children(rendered, {})
    assert "Secret" in [o["kind"] for o in create]
    observed = {f"{o['kind']}/{o['metadata']['name']}": o for o in rendered}
    key = "Secret/orders-spark-auth"
    observed[key] = {**observed[key], "metadata": {**observed[key]["metadata"], "labels": {}, "ownerReferences": []},
                     "data": {"secret": "b2xk"}}
    create, patches = plan_children(rendered, observed)
    assert not create and not [p for p in patches if p["kind"] == "Secret"]


@pytest.mark.parametrize("key", [
    "spark.authenticate", "spark.authenticate.secret", "spark.authenticate.secret.file",
    "spark.authenticate.secret.executor.file", "spark.network.crypto.enabled", "spark.network.crypto.cipher",
    "spark.kubernetes.executor.disableConfigMap", "spark.kubernetes.driver.ownPersistentVolumeClaim",
    "spark.kubernetes.allocation.pods.allocator",
])
def test_users_cannot_set_what_keeps_spark_traffic_and_the_driver_role_as_they_are(key):
    issues = [i for i in parse(manifest(sparkConf={key: "false"}))[1] if i.severity == "error"]
    assert [i.path for i in issues] == [f"spec.sparkConf[{key}]"], issues
    assert "managed by the operator" in issues[0].message and "docs/operator.md" in issues[0].message


def test_io_encryption_stays_the_users_choice():
    assert not [i for i in parse(manifest(sparkConf={"spark.io.encryption.enabled": "true"}))[1]
                if i.severity == "error"]
    assert props(objects(sparkConf={"spark.io.encryption.enabled": "true"}))["spark.io.encryption.enabled"] == "true"


# --- the NetworkPolicy -------------------------------------------------------------------------
SETTINGS = net.NetworkPolicies(egress_ports=net.parse_ports("53/UDP,443,9092-9098"),
                               operator_namespace="ops", operator_labels=(("app.kubernetes.io/name", "op"),))
APP_PODS = {"matchLabels": {"streamapp.io/app": "orders"},
            "matchExpressions": [{"key": "streamapp.io/component", "operator": "In", "values": ["driver", "executor"]}]}


def test_no_network_policy_without_the_setting():
    assert "NetworkPolicy" not in objects()


def test_network_policy_selects_the_apps_pods_the_driver_and_executors_carry():
    objs = objects(SETTINGS)
    policy = objs["NetworkPolicy"]
    assert policy["metadata"]["name"] == "orders-spark"
    assert policy["metadata"]["ownerReferences"] == [names.owner_reference("orders", UID)]
    assert policy["spec"]["podSelector"] == APP_PODS
    template = yaml.safe_load(objs["ConfigMap"]["data"]["executor-template.yaml"])
    conf = props(objs)
    executor_labels = {**template["metadata"]["labels"],
                       **{k.removeprefix("spark.kubernetes.executor.label."): v for k, v in conf.items()
                          if k.startswith("spark.kubernetes.executor.label.")}}
    for labels in (objs["Pod"]["metadata"]["labels"], executor_labels):
        assert labels[names.LABEL_APP] == "orders" and labels[names.LABEL_COMPONENT] in ("driver", "executor")


def test_network_policy_ingress_egress():
    spec = objects(SETTINGS)["NetworkPolicy"]["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    own, metrics, ui = spec["ingress"]
    assert own == {"from": [{"podSelector": APP_PODS}]}  # driver ⇄ executors on any port
    assert metrics["ports"] == [{"protocol": "TCP", "port": names.METRICS_PORT}]
    assert metrics["from"] == [
        {"namespaceSelector": {}},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ops"}},
         "podSelector": {"matchLabels": {"app.kubernetes.io/name": "op"}}}]
    assert ui == {"from": [{"namespaceSelector": {}}], "ports": [{"protocol": "TCP", "port": names.UI_PORT}]}
    assert spec["egress"] == [
        {"to": [{"podSelector": APP_PODS}]},
        {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 443},
                   {"protocol": "TCP", "port": 9092, "endPort": 9098}]}]


@pytest.mark.parametrize("settings, egress, metrics_from", [
    (net.NetworkPolicies(), [{}], [{"namespaceSelector": {}}]),  # egress 'all', no operator known
    (net.NetworkPolicies(egress_ports=(net.Port(9092),), egress_cidrs=("10.0.0.0/8",),
                         metrics_namespaces=(("team", "monitoring"),)),
     [{"to": [{"podSelector": APP_PODS}]},
      {"ports": [{"protocol": "TCP", "port": 9092}], "to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}],
     [{"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}]),
    (net.NetworkPolicies(egress_ports=()), [{"to": [{"podSelector": APP_PODS}]}], [{"namespaceSelector": {}}]),
])
def test_network_policy_settings(settings, egress, metrics_from):
    spec = objects(settings)["NetworkPolicy"]["spec"]
    assert spec["egress"] == egress
    assert spec["ingress"][1]["from"] == metrics_from


def test_a_change_of_settings_converges_the_policy():
    rendered = render_children(app(), UID, Launch(2), SETTINGS)
    observed = {f"{o['kind']}/{o['metadata']['name']}": o
                for o in render_children(app(), UID, Launch(2), replace(SETTINGS, egress_ports=None))}
    _, patches = plan_children(rendered, observed)
    (patch,) = patches
    assert patch["kind"] == "NetworkPolicy" and patch["spec"]["egress"][1]["ports"][0]["port"] == 53


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    net.add_arguments(parser)
    return parser.parse_args(argv)


def test_command_line_settings():
    assert net.from_arguments(_args()) is None
    default = net.from_arguments(_args("--network-policies"))
    assert [p.render() for p in default.egress_ports] == [
        {"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}, {"protocol": "TCP", "port": 443},
        {"protocol": "TCP", "port": 6443}, {"protocol": "TCP", "port": 5432},
        {"protocol": "TCP", "port": 9092, "endPort": 9098}]
    assert default.metrics_namespaces is None and default.operator_namespace is None
    given = net.from_arguments(_args("--network-policies", "--network-policy-egress=all",
                                     "--network-policy-metrics-from=kubernetes.io/metadata.name=monitoring",
                                     "--network-policy-operator=ops/a=b,c=d",
                                     "--network-policy-egress-cidrs=10.0.0.0/8, fd00::/8"))
    assert given == net.NetworkPolicies(None, ("10.0.0.0/8", "fd00::/8"),
                                        (("kubernetes.io/metadata.name", "monitoring"),), "ops", (("a", "b"), ("c", "d")))


@pytest.mark.parametrize("argv", [("--network-policy-egress=http",), ("--network-policy-egress=70000",),
                                  ("--network-policy-egress=9098-9092",), ("--network-policy-egress-cidrs=10.0.0/8",),
                                  ("--network-policy-operator=ops",), ("--network-policy-metrics-from=monitoring",)])
def test_malformed_settings_are_refused(argv):
    with pytest.raises(ValueError):
        net.from_arguments(_args("--network-policies", *argv))
