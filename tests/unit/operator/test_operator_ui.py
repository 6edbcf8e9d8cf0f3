"""The Spark UI: its Spark settings, the Service <app>-ui, the Ingress when the operator is given one, status.uiURL."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone

import pytest

from streamapp_api import parse
from streamapp_api.contract import parse_properties
from streamapp_operator import names
from streamapp_operator.decide.children import converge
from streamapp_operator.decide.plan import plan
from streamapp_operator.decide.restarts import PodObservation
from streamapp_operator.decide.world import Driver, Kafka, Memory, Observed, Settings
from streamapp_operator.observe.kube import child_keys, remembered
from streamapp_operator.render import Launch, SparkUI, UIIngress, render_all, render_children, ui

from streamapp_testkit.operator_apps import BASE, app, merge

pytestmark = pytest.mark.unit
UID = "uid-1"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
INGRESS = UIIngress(host="{name}.{namespace}.spark.example.com", class_name="nginx",
                    annotations=(("nginx.ingress.kubernetes.io/auth-url", "https://auth.example.com/check"),),
                    tls_secret="{name}-ui-tls")


def objects(spark_ui: SparkUI = SparkUI(), **spec) -> dict[str, dict]:
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in render_all(app(**spec), UID, Launch(2), None, spark_ui)}


def spark_conf(spark_ui: SparkUI = SparkUI(), **spec) -> dict[str, str]:
    return parse_properties(objects(spark_ui, **spec)["ConfigMap/orders-config"]["data"]["spark.properties"])


def test_every_driver_gets_a_ui_service_that_selects_it():
    rendered = objects()
    service, pod = rendered["Service/orders-ui"], rendered["Pod/orders-driver"]
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [{"name": "ui", "port": 4040, "targetPort": "ui", "protocol": "TCP"}]
    assert all(pod["metadata"]["labels"][k] == v for k, v in service["spec"]["selector"].items())
    ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    assert ports["ui"] == 4040
    assert service["metadata"]["ownerReferences"] == [names.owner_reference("orders", UID)]
    assert not any(key.startswith("Ingress/") for key in rendered)  # no Ingress unless the operator is given one


def test_the_ui_is_on_with_the_operators_settings_and_an_app_may_turn_it_off():
    conf = spark_conf()
    assert (conf["spark.ui.enabled"], conf["spark.ui.port"], conf["spark.ui.killEnabled"]) == ("true", "4040", "false")
    assert spark_conf(sparkConf={"spark.ui.enabled": "False"})["spark.ui.enabled"] == "false"
    assert spark_conf(SparkUI(enabled=False))["spark.ui.enabled"] == "false"  # --no-spark-ui
    assert spark_conf(SparkUI(enabled=False), sparkConf={"spark.ui.enabled": "true"})["spark.ui.enabled"] == "true"


@pytest.mark.parametrize("key", ["spark.ui.port", "spark.ui.killEnabled"])
def test_the_ui_port_and_kill_links_are_the_operators(key):
    _, issues = parse(merge(BASE, {"spec": {"sparkConf": {key: "4041"}}}))
    assert [i.path for i in issues if i.severity == "error"] == [f"spec.sparkConf[{key}]"]
    assert "Spark UI" in issues[0].message


def test_an_ingress_per_app_when_the_operator_is_given_a_host():
    ingress = objects(SparkUI(ingress=INGRESS))["Ingress/orders-ui"]
    assert ingress["apiVersion"] == "networking.k8s.io/v1"
    assert ingress["metadata"]["annotations"] == {"nginx.ingress.kubernetes.io/auth-url": "https://auth.example.com/check"}
    assert ingress["spec"] == {
        "ingressClassName": "nginx",
        "rules": [{"host": "orders.shop.spark.example.com", "http": {"paths": [{
            "path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "orders-ui", "port": {"name": "ui"}}}}]}}],
        "tls": [{"hosts": ["orders.shop.spark.example.com"], "secretName": "orders-ui-tls"}],
    }


def test_the_ingress_converges_without_undoing_a_default_class_or_others_annotations():
    rendered = objects(SparkUI(ingress=UIIngress(host="{name}.example.com", annotations=(("a", "2"),))))["Ingress/orders-ui"]
    observed = {**rendered, "metadata": {**rendered["metadata"], "annotations": {"a": "1", "theirs": "x"}},
                "spec": {**rendered["spec"], "ingressClassName": "default-class",
                         "tls": [{"hosts": ["old.example.com"], "secretName": "old"}]}}
    patch = converge(rendered, observed)
    assert patch["metadata"]["annotations"] == {"a": "2"}
    assert patch["spec"] == {"tls": None}  # the class the cluster's default filled in stays
    assert converge(rendered, remembered({"Ingress/orders-ui": rendered})["Ingress/orders-ui"]) is None


def test_the_operator_reads_the_ui_children():
    assert "Service/orders-ui" in child_keys("orders")
    assert "Ingress/orders-ui" not in child_keys("orders")
    assert "Ingress/orders-ui" in child_keys("orders", ingress=True)
    rendered = {f"{o['kind']}/{o['metadata']['name']}" for o in render_children(app(), UID, Launch(2), None, SparkUI(ingress=INGRESS))}
    assert rendered >= set(child_keys("orders", ingress=True))


def _status(settings: Settings, **spec) -> dict:
    obs = Observed(name="orders", namespace="shop", uid=UID, generation=1, status={}, app=app(**spec),
                   driver=Driver(PodObservation("absent")), kafka=Kafka(partitions=3))
    return plan(obs, settings, Memory(), T0).status


@pytest.mark.parametrize("spark_ui, spec, url", [
    (SparkUI(), {}, "http://orders-ui.shop.svc:4040"),
    (SparkUI(ingress=INGRESS), {}, "https://orders.shop.spark.example.com/"),
    (SparkUI(ingress=UIIngress(host="ui-{name}.example.com")), {}, "http://ui-orders.example.com/"),
    (SparkUI(), {"sparkConf": {"spark.ui.enabled": "false"}}, None),
    (SparkUI(enabled=False), {}, None),
])
def test_status_says_where_the_ui_is(spark_ui, spec, url):
    status = _status(Settings(default_image="runtime:1", ui=spark_ui), **spec)
    assert status.get("uiURL") == url


def _arguments(*argv: str) -> SparkUI:
    parser = argparse.ArgumentParser()
    ui.add_arguments(parser)
    return ui.from_arguments(parser.parse_args(list(argv)))


def test_the_operators_options():
    assert _arguments() == SparkUI()
    assert _arguments("--no-spark-ui") == SparkUI(enabled=False)
    assert _arguments("--spark-ui-ingress-host={name}.{namespace}.spark.example.com", "--spark-ui-ingress-class=nginx",
                      "--spark-ui-ingress-annotation=nginx.ingress.kubernetes.io/auth-url=https://auth.example.com/check",
                      "--spark-ui-ingress-tls-secret={name}-ui-tls") == SparkUI(ingress=INGRESS)
    with pytest.raises(ValueError, match=r"only \{name\} and \{namespace\}"):
        _arguments("--spark-ui-ingress-host={app}.example.com")
    with pytest.raises(ValueError, match="KEY=VALUE"):
        _arguments("--spark-ui-ingress-host={name}.example.com", "--spark-ui-ingress-annotation=novalue")
