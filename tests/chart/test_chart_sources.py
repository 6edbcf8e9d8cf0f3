"""Pure checks of the chart's sources against the code they describe (no helm, no test bed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from streamapp_testkit.chart_bed import CHART, dashboard, dashboard_queries, exposed_metrics, labels_in, load_yaml, metrics_in
from streamapp_testbed.paths import REPO_DIR

pytestmark = pytest.mark.unit
SCRAPE_LABELS = {"namespace", "pod", "instance", "job"}  # added by Prometheus to every driver series


def test_chart_crd_is_the_generated_crd():
    chart_copy = CHART / "crds" / "streamapp.io_streamapps.yaml"
    assert chart_copy.read_text() == (REPO_DIR / "crds" / "streamapp.io_streamapps.yaml").read_text(), (
        "charts/streamapp-operator/crds/ is out of date: "
        "cp crds/streamapp.io_streamapps.yaml charts/streamapp-operator/crds/ (make crds)")


def test_the_code_exposes_the_metrics_the_chart_relies_on():
    exposed = exposed_metrics()
    # Spot checks: the exposition names (with the _total suffix of counters), from both registries.
    for name in ("streamapp_operator_reconciles_total", "streamapp_operator_driver_restarts_total",
                 "streamapp_operator_reconcile_duration_seconds_count", "streamapp_source_lag_records",
                 "streamapp_input_rows_per_second"):
        assert name in exposed, sorted(exposed)
    assert exposed["streamapp_source_lag_records"] >= {"app", "query", "topic", "partition"}


def test_every_dashboard_query_names_an_exposed_metric_and_its_labels():
    exposed = exposed_metrics()
    queries = dashboard_queries(dashboard())
    assert len(queries) >= 15
    for expr in queries:
        names = metrics_in(expr)
        assert names, f"no streamapp metric in {expr!r}"
        missing = names - set(exposed)
        assert not missing, f"{expr!r} queries {sorted(missing)}: not exposed by the operator or runtime"
        known = set().union(*(exposed[n] for n in names)) | SCRAPE_LABELS
        assert labels_in(expr) <= known, f"{expr!r} uses labels {sorted(labels_in(expr) - known)}"


def test_dashboard_covers_each_view_per_app():
    dash = dashboard()
    assert [v["name"] for v in dash["templating"]["list"]] == ["datasource", "namespace", "app"]
    text = json.dumps(dash["panels"])
    for metric in ("streamapp_input_rows_per_second", "streamapp_processed_rows_per_second",
                   "streamapp_source_lag_records", "streamapp_batch_duration_seconds", "streamapp_state_bytes",
                   "streamapp_operator_desired_executors", "streamapp_operator_partitions",
                   "streamapp_operator_driver_restarts_total"):
        assert metric in text, metric
    for panel in dash["panels"]:
        for target in panel["targets"]:
            assert 'app="$app"' in target["expr"] and 'namespace="$namespace"' in target["expr"], target
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))


def test_values_schema_describes_every_default_value():
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = load_yaml(CHART / "values.yaml")

    def walk(node: dict, value, path: str):
        if node.get("type") == "object" and "properties" in node:
            for key, sub in value.items():
                assert key in node["properties"] or node.get("additionalProperties") is not False, f"{path}.{key}"
                if key in node["properties"]:
                    walk(node["properties"][key], sub, f"{path}.{key}")

    walk(schema, values, "values")
    assert schema["properties"]["rbac"]["properties"]["clusterWide"]["type"] == "boolean"
    assert values["rbac"]["clusterWide"] is False, "namespaced RBAC is the default"


def test_chart_files_stay_small():
    for path in CHART.rglob("*"):
        if path.is_file() and path.suffix in (".yaml", ".tpl", ".json", ".txt"):
            if path.parent.name == "crds":
                continue  # generated
            assert len(path.read_text().splitlines()) <= 420, path


# "Kubernetes ≥ 1.30", "Kubernetes >= 1.30", "Kubernetes version 1.30", "Kubernetes 1.30+", "... 1.30 or later"
KUBERNETES_MINIMUM = re.compile(r"Kubernetes\s*(?:(?:≥|>=|version|at least)\s*v?(1\.\d+)|v?(1\.\d+)(?:\+|\s+or\s+(?:later|newer)))")


def test_chart_kube_version_is_the_minimum_the_readmes_name():
    chart = load_yaml(CHART / "Chart.yaml")
    floor = re.fullmatch(r">=\s*v?(\d+\.\d+)\.0(?:-0)?", chart["kubeVersion"])
    assert floor, f"Chart.yaml kubeVersion {chart['kubeVersion']!r}: expected '>=1.N.0-0'"
    said = {}
    for readme in (REPO_DIR / "README.md", CHART / "README.md"):
        said[readme.relative_to(REPO_DIR)] = {a or b for a, b in KUBERNETES_MINIMUM.findall(readme.read_text())}
    assert said[Path("README.md")], "README.md names no minimum Kubernetes version (\"Kubernetes ≥ 1.N\")"
    wrong = {str(path): versions for path, versions in said.items() if versions - {floor.group(1)}}
    assert not wrong, f"Chart.yaml requires Kubernetes >= {floor.group(1)}, the READMEs say {wrong}"
