"""The Spark UI as a user finds it: the Service <app>-ui in front of the driver, its address in status and
in `kubectl get sapp -o wide`, and the Ingress when the operator is given a host.

The test bed's pods run on kwok nodes (no process behind them), so these tests check what points at the
UI, not that it answers: tests/e2e runs real drivers.
"""

from __future__ import annotations

import pytest

from streamapp_api import load
from streamapp_operator.decide.children import converge
from streamapp_operator.render import Launch, SparkUI, UIIngress, render_children
from streamapp_testbed.kafka_admin import create_topic
from streamapp_testbed.waiting import wait_for

from streamapp_testkit.operator_bed import OperatorProcess, simple_app, unique

pytestmark = pytest.mark.integration
HOST = "{name}.{namespace}.spark.example.com"


def _selected_pods(cluster, service: dict) -> list[str]:
    """The pods the Service's selector picks, as `kubectl get pods -l` lists them (the kwok bed keeps no
    EndpointSlices: its pods have loopback addresses)."""
    selector = ",".join(f"{k}={v}" for k, v in service["spec"]["selector"].items())
    return cluster.kubectl("get", "pods", "-l", selector, "-o", "name").stdout.split()


def test_the_ui_service_selects_the_driver_and_status_says_where_it_is(cluster, kafka):
    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=2)
    cluster.pv_for("app")
    doc = simple_app("app", cluster.namespace, kafka.bootstrap, topic)
    cluster.apply(doc)
    pod = wait_for("a running driver", lambda: cluster.running_driver("app"), timeout=90)
    url = f"http://app-ui.{cluster.namespace}.svc:4040"
    wait_for("status.uiURL", lambda: cluster.status("app").get("uiURL") == url, timeout=30)
    service = cluster.get("Service", "app-ui")
    assert service["spec"]["type"] == "ClusterIP"
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("ui", 4040)]
    assert _selected_pods(cluster, service) == ["pod/app-driver"]  # on the driver's port named ui:
    ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    assert ports["ui"] == 4040
    assert cluster.config_properties("app")["spark.ui.enabled"] == "true"
    # as the API server holds it (validated, defaulted), nothing is left to converge
    uid = cluster.app("app")["metadata"]["uid"]
    rendered = next(o for o in render_children(load(doc), uid, Launch(1)) if o["metadata"]["name"] == "app-ui")
    assert converge(rendered, service) is None
    wide = cluster.kubectl("get", "sapp", "app", "-o", "wide").stdout.splitlines()
    assert wide[0].split()[-1] == "UI" and wide[1].split()[-1] == url


def test_an_app_that_turns_its_ui_off_has_no_address(cluster, kafka):
    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=2)
    cluster.pv_for("quiet")
    cluster.apply(simple_app("quiet", cluster.namespace, kafka.bootstrap, topic, sparkConf={"spark.ui.enabled": "false"}))
    wait_for("a running driver", lambda: cluster.running_driver("quiet"), timeout=90)
    wait_for("status written", lambda: cluster.status("quiet").get("driverPod") == "quiet-driver", timeout=30)
    assert "uiURL" not in cluster.status("quiet")
    assert cluster.config_properties("quiet")["spark.ui.enabled"] == "false"


def test_with_a_host_every_app_gets_an_ingress_to_its_ui(own_namespace, kafka, control_plane, tmp_path):
    cluster = own_namespace
    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=2)
    cluster.pv_for("app")
    operator = OperatorProcess(tmp_path, cluster.namespace, control_plane.kubeconfig)
    operator.argv += [f"--spark-ui-ingress-host={HOST}", "--spark-ui-ingress-class=nginx",
                      "--spark-ui-ingress-tls-secret={name}-ui-tls",
                      "--spark-ui-ingress-annotation=nginx.ingress.kubernetes.io/auth-url=https://auth.example.com/check"]
    operator.start()
    try:
        doc = simple_app("app", cluster.namespace, kafka.bootstrap, topic)
        cluster.apply(doc)
        host = f"app.{cluster.namespace}.spark.example.com"
        wait_for("status.uiURL", lambda: cluster.status("app").get("uiURL") == f"https://{host}/", timeout=90)
        ingress = cluster.get("Ingress", "app-ui")
        assert ingress["spec"]["ingressClassName"] == "nginx"
        assert [r["host"] for r in ingress["spec"]["rules"]] == [host]
        backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
        assert backend == {"name": "app-ui", "port": {"name": "ui"}}
        assert ingress["spec"]["tls"] == [{"hosts": [host], "secretName": "app-ui-tls"}]
        assert ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/auth-url"] == "https://auth.example.com/check"
        uid = cluster.app("app")["metadata"]["uid"]
        spark_ui = SparkUI(ingress=UIIngress(host=HOST, class_name="nginx", tls_secret="{name}-ui-tls", annotations=(
            ("nginx.ingress.kubernetes.io/auth-url", "https://auth.example.com/check"),)))
        rendered = next(o for o in render_children(load(doc), uid, Launch(1), None, spark_ui)
                        if o["kind"] == "Ingress")
        assert converge(rendered, ingress) is None
    finally:
        operator.stop()
