"""The rendered chart on the test bed's real API server, and its rules through Debian's promtool."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml

from streamapp_testkit.chart_bed import ALL_ON, MONITORING_KINDS, by_kind, render, rule_groups

pytestmark = pytest.mark.integration
MONITORING_PLURALS = {"ServiceMonitor": "servicemonitors", "PodMonitor": "podmonitors",
                      "PrometheusRule": "prometheusrules"}


def _minimal_crd(kind: str, plural: str) -> dict:
    """A stand-in for the Prometheus Operator's CRD: the right group, version, kind and scope, any body."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                 "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


@pytest.fixture(scope="module")
def monitoring_crds(control_plane):
    crds = [_minimal_crd(kind, plural) for kind, plural in MONITORING_PLURALS.items()]
    control_plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": crds}))
    for crd in crds:
        control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{crd['metadata']['name']}")
    yield
    control_plane.kubectl("delete", "crd", *(c["metadata"]["name"] for c in crds), "--wait=false", check=False)


def _namespaces(control_plane, *names: str) -> None:
    for name in names:
        control_plane.kubectl("create", "namespace", name)


@pytest.mark.parametrize("mode", ["namespaced", "cluster-wide"])
def test_rendered_objects_are_accepted_by_the_api_server(control_plane, monitoring_crds, mode):
    suffix = uuid.uuid4().hex[:6]
    release_ns, watched = f"chart-{suffix}", f"chart-apps-{suffix}"
    _namespaces(control_plane, release_ns, watched)
    sets = (*ALL_ON, f"watchNamespaces={{{watched}}}", "networkPolicy.enabled=true") + \
        (("rbac.clusterWide=true",) if mode == "cluster-wide" else ())
    docs = render(*sets, namespace=release_ns)
    assert {d["kind"] for d in docs} >= MONITORING_KINDS | {"Deployment", "Service", "ServiceAccount", "NetworkPolicy"}
    # The CRD first (for real: the dry run of a Role needs nothing of it, the StreamApp below does).
    crds = by_kind(docs, "CustomResourceDefinition")
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                          input=json.dumps({"apiVersion": "v1", "kind": "List", "items": crds}))
    rest = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
    result = control_plane.kubectl("apply", "--dry-run=server", "-o", "name", "-f", "-",
                                   input=json.dumps({"apiVersion": "v1", "kind": "List", "items": rest}))
    accepted = result.stdout.split()
    assert len(accepted) == len(rest), result.stdout
    control_plane.kubectl("delete", "namespace", release_ns, watched, "--wait=false")


def test_rules_pass_promtool_check(tmp_path: Path):
    rules = tmp_path / "rules.yaml"
    groups = rule_groups(render("prometheusRule.enabled=true"))
    rules.write_text(yaml.safe_dump({"groups": groups}))
    result = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    alerts = {r["alert"] for g in groups for r in g["rules"]}
    assert {"StreamAppNotProgressing", "StreamAppLagGrowing", "StreamAppRestartLoop", "StreamAppOperatorErrors"} <= alerts


def test_every_rule_queries_exposed_metrics():
    from streamapp_testkit.chart_bed import exposed_metrics, labels_in, metrics_in

    exposed = exposed_metrics()
    for group in rule_groups(render("prometheusRule.enabled=true")):
        for rule in group["rules"]:
            names = metrics_in(rule["expr"])
            assert names and names <= set(exposed), (rule["alert"], sorted(names - set(exposed)))
            known = set().union(*(exposed[n] for n in names)) | {"namespace", "pod", "instance", "job"}
            assert labels_in(rule["expr"]) <= known, (rule["alert"], labels_in(rule["expr"]) - known)
