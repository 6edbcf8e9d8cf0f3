"""Helpers of the chart tests: the pinned helm binary, rendering, and what the operator's and the
runtime's code really expose (metric names, the driver's RBAC), read from the code itself."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

import yaml

from streamapp_testbed.paths import REPO_DIR, cache_dir, versions

CHART = REPO_DIR / "charts" / "streamapp-operator"
RELEASE, NAMESPACE = "streamapp-operator", "streamapp-system"  # as the README installs it
MONITORING_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
PYTHONPATH = os.pathsep.join(str(REPO_DIR / p) for p in ("crds", "operator", "apps", "testbed"))
ALL_ON = ("serviceMonitor.enabled=true", "podMonitor.enabled=true", "prometheusRule.enabled=true")


def helm_path() -> Path:
    path = cache_dir() / f"helm-{versions()['HELM_VERSION']}" / "bin" / "helm"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `make deps` (testbed/build-helm.sh) first")
    return path


@cache
def _helm_home() -> str:
    # helm keeps config, cache and data under $HOME by default: give it a throwaway home instead.
    return tempfile.mkdtemp(prefix="streamapp-helm-")


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    home = _helm_home()
    env = {**os.environ, "HELM_CONFIG_HOME": f"{home}/config", "HELM_CACHE_HOME": f"{home}/cache",
           "HELM_DATA_HOME": f"{home}/data", "KUBECONFIG": os.devnull}
    result = subprocess.run([str(helm_path()), *args], capture_output=True, text=True, env=env, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


@cache
def render_text(*sets: str, namespace: str = NAMESPACE) -> str:
    argv = ["template", RELEASE, str(CHART), "--namespace", namespace, "--include-crds"]
    for item in sets:
        argv += ["--set", item]
    return helm(*argv).stdout


def render(*sets: str, namespace: str = NAMESPACE) -> list[dict]:
    return [d for d in yaml.safe_load_all(render_text(*sets, namespace=namespace)) if d]


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


# Objects of the admission webhook and the policy sit beside the operator's own of the same kinds.
SIDE_OBJECTS = ("-webhook", "-policy", "-replicas")


def one(docs: list[dict], kind: str, suffix: str | None = None) -> dict:
    """The one object of ``kind`` whose name ends with ``suffix`` (None: the operator's own, not a
    webhook or policy object)."""
    found = [d for d in by_kind(docs, kind) if (d["metadata"]["name"].endswith(suffix) if suffix is not None
                                                 else not d["metadata"]["name"].endswith(SIDE_OBJECTS))]
    assert len(found) == 1, f"expected one {kind}{' ' + suffix if suffix else ''}, got {len(found)}"
    return found[0]


def cleanup_helm_home() -> None:
    shutil.rmtree(_helm_home(), ignore_errors=True)


# --- what the code exposes ------------------------------------------------------------------
SUFFIXES = {"counter": ("_total", "_created"), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum", "_created"),
            "summary": ("_count", "_sum", "_created"), "info": ("_info",)}


@cache
def exposed_metrics() -> dict[str, set[str]]:
    """Every series name the operator and the driver expose -> its label names, from their registries
    (a renamed metric in operator/.../report/metrics.py or apps/streamapp_runtime/run/metrics.py shows here)."""
    from streamapp_operator.report import metrics as operator_metrics
    from streamapp_runtime.run.metrics import Metrics

    out: dict[str, set[str]] = {}
    registries = [operator_metrics.REGISTRY, Metrics("app", {}, {}).registry]
    for registry in registries:
        for collector in list(registry._collector_to_names):  # noqa: SLF001 - the metric objects themselves
            labels = set(getattr(collector, "_labelnames", ()))
            for family in collector.describe():
                for suffix in SUFFIXES[family.type]:
                    out[family.name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
    return out


METRIC = re.compile(r"\bstreamapp_[a-z0-9_]+\b")
MATCHERS = re.compile(r"\{([^}]*)\}")
GROUPING = re.compile(r"\b(?:by|on|without|ignoring|group_left|group_right)\s*\(([^)]*)\)")


def metrics_in(expr: str) -> set[str]:
    return set(METRIC.findall(expr))


def labels_in(expr: str) -> set[str]:
    """Label names an expression selects or groups on."""
    names = set()
    for body in MATCHERS.findall(expr):
        names |= {m.group(1) for m in re.finditer(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", body)}
    for body in GROUPING.findall(expr):
        names |= {n.strip() for n in body.split(",") if n.strip()}
    return names


def dashboard() -> dict:
    import json

    return json.loads((CHART / "dashboards" / "streamapp.json").read_text())


def dashboard_queries(dash: dict) -> list[str]:
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in dash["templating"]["list"] if isinstance(v.get("query"), dict)]
    return exprs


def rule_groups(docs: list[dict]) -> list[dict]:
    return one(docs, "PrometheusRule")["spec"]["groups"]


def load_yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text())
