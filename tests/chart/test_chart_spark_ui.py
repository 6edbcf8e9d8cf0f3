"""The chart's ui values reach the operator as the Spark UI settings they name."""

from __future__ import annotations

import argparse

import pytest

from streamapp_operator.render import SparkUI, UIIngress, network, ui

from streamapp_testkit.chart_bed import one, render

pytestmark = pytest.mark.integration


def operator_settings(*sets: str) -> tuple[SparkUI, network.NetworkPolicies | None]:
    """What the operator makes of the flags the chart gives it (its own parsers)."""
    container = one(render(*sets), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    parser = argparse.ArgumentParser()
    ui.add_arguments(parser)
    network.add_arguments(parser)
    args, _ = parser.parse_known_args(container["args"])
    return ui.from_arguments(args), network.from_arguments(args)


def test_by_default_every_driver_has_its_ui_and_no_ingress():
    spark_ui, policies = operator_settings()
    assert spark_ui == SparkUI()
    assert policies is not None and policies.ui_namespaces is None  # the UI port open to every namespace


def test_ui_values_become_the_operators_settings():
    spark_ui, policies = operator_settings(
        "ui.enabled=false", "ui.ingress.enabled=true", "ui.ingress.className=nginx",
        # (--set reads a value that starts with '{' as a list: in values.yaml, {name}.{namespace}... is fine)
        "ui.ingress.host=ui-{name}.{namespace}.spark.example.com", "ui.ingress.tlsSecretName=ui-{name}-tls",
        "ui.ingress.annotations.nginx\\.ingress\\.kubernetes\\.io/auth-url=https://auth.example.com/check",
        "ui.networkPolicyNamespaceSelector.kubernetes\\.io/metadata\\.name=ingress-nginx")
    assert spark_ui == SparkUI(enabled=False, ingress=UIIngress(
        host="ui-{name}.{namespace}.spark.example.com", class_name="nginx", tls_secret="ui-{name}-tls",
        annotations=(("nginx.ingress.kubernetes.io/auth-url", "https://auth.example.com/check"),)))
    assert policies is not None and policies.ui_namespaces == (("kubernetes.io/metadata.name", "ingress-nginx"),)
