"""The chart's network policies: the operator's own (networkPolicy) and the flags that give every app
one (appNetworkPolicies), checked against what the operator renders from those flags."""

from __future__ import annotations

import argparse

import pytest

from streamapp_testkit.chart_bed import NAMESPACE, by_kind, one, render

pytestmark = pytest.mark.integration


def _args(docs: list[dict]) -> list[str]:
    return one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]


def _settings(docs: list[dict]):
    """What the operator makes of the chart's flags (its own parser)."""
    from streamapp_operator.render import network

    parser = argparse.ArgumentParser()
    network.add_arguments(parser)
    flags = [a for a in _args(docs) if a.startswith("--network-polic")]
    return network.from_arguments(parser.parse_args(flags))


def test_apps_get_network_policies_by_default_and_the_operator_may_read_their_metrics():
    docs = render()
    settings = _settings(docs)
    assert settings is not None
    pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert settings.operator_namespace == NAMESPACE
    assert dict(settings.operator_labels).items() <= pod_labels.items()
    assert settings.metrics_namespaces is None  # every namespace may scrape the drivers by default
    ports = {(p.port, p.protocol) for p in settings.egress_ports}
    assert {(53, "UDP"), (53, "TCP"), (443, "TCP"), (6443, "TCP"), (5432, "TCP"), (9092, "TCP")} <= ports
    assert not by_kind(docs, "NetworkPolicy")  # the operator's own is off by default


def test_app_network_policy_values_become_the_operators_settings():
    docs = render("appNetworkPolicies.egressPorts={all}", "appNetworkPolicies.egressCidrs={10.0.0.0/8}",
                  "appNetworkPolicies.metricsNamespaceSelector.team=monitoring")
    settings = _settings(docs)
    assert settings.egress_ports is None and settings.egress_cidrs == ("10.0.0.0/8",)
    assert settings.metrics_namespaces == (("team", "monitoring"),)
    assert _settings(render("appNetworkPolicies.enabled=false")) is None


def test_the_operators_own_policy():
    docs = render("networkPolicy.enabled=true", "networkPolicy.metricsNamespaceSelector.team=monitoring")
    policy = one(docs, "NetworkPolicy")
    pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert policy["metadata"]["namespace"] == NAMESPACE
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    metrics, webhook = policy["spec"]["ingress"]
    assert metrics == {"from": [{"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}],
                       "ports": [{"protocol": "TCP", "port": 8080}]}
    assert webhook == {"ports": [{"protocol": "TCP", "port": 9443}]}  # from anywhere: the API server
    (egress,) = policy["spec"]["egress"]
    assert "to" not in egress
    assert egress["ports"] == [
        {"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}, {"protocol": "TCP", "port": 443},
        {"protocol": "TCP", "port": 6443}, {"protocol": "TCP", "port": 9090},
        {"protocol": "TCP", "port": 9092, "endPort": 9098}]
    every = one(render("networkPolicy.enabled=true"), "NetworkPolicy")
    assert every["spec"]["ingress"][0]["from"] == [{"namespaceSelector": {}}]


def test_ports_given_with_set_are_numbers_and_work():
    """`--set 'appNetworkPolicies.egressPorts={53/UDP,9092}'` (what tests/e2e does) gives 9092 as a number."""
    docs = render("appNetworkPolicies.egressPorts={53/UDP,40123}", "networkPolicy.enabled=true",
                  "networkPolicy.egressPorts={53/UDP,40123}")
    assert [(p.port, p.protocol) for p in _settings(docs).egress_ports] == [(53, "UDP"), (40123, "TCP")]
    assert one(docs, "NetworkPolicy")["spec"]["egress"][0]["ports"][1] == {"protocol": "TCP", "port": 40123}


@pytest.mark.parametrize("bad", ["appNetworkPolicies.egressPorts={http}", "networkPolicy.egressPorts={all}",
                                 "appNetworkPolicies.egressCidrs={10.0.0.0}", "webhook.port=0",
                                 "networkPolicy.egressPorts={70000}"])
def test_values_schema_refuses_malformed_ports(bad):
    from streamapp_testkit.chart_bed import CHART, helm

    result = helm("template", "x", str(CHART), "--set", bad, check=False)
    assert result.returncode != 0 and "schema" in result.stderr.lower(), (bad, result.stderr)
