"""The chart's PodMonitor and ServiceMonitor as Prometheus scrape configs, the way the Prometheus
Operator turns them into configuration: the monitors' label selectors, namespaces and ports as
`keep` rules over Kubernetes discovery labels, and the `namespace`, `pod`, `container` (and
`service`) target labels. The e2e Prometheus scrapes with exactly these rules, so a selector of the
chart that matches no pod leaves its metrics absent and fails the test.

Debian's Prometheus is built without Kubernetes service discovery, so `Discovery` plays that part:
it lists the pods and endpoints from the API server every few seconds and writes them, with the
`__meta_kubernetes_*` labels Prometheus's own discovery gives, to the files of `file_sd_configs`.

Prometheus reaches pod IPs directly, as it does inside a cluster: over the node's bridge on the
local cluster, through the route to the node on kind (testbed/kind/kind.sh)."""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path


def _sanitize(label: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", label)


def _selector_keeps(meta: str, match_labels: dict) -> list[dict]:
    return [{"source_labels": [f"__meta_kubernetes_{meta}_label_{_sanitize(k)}",
                               f"__meta_kubernetes_{meta}_labelpresent_{_sanitize(k)}"],
             "regex": f"({re.escape(str(v))});true", "action": "keep"} for k, v in sorted(match_labels.items())]


def _namespaces(monitor: dict) -> dict:
    selector = monitor["spec"].get("namespaceSelector") or {}
    if selector.get("any"):
        return {}
    names = selector.get("matchNames") or [monitor["metadata"]["namespace"]]
    return {"namespaces": {"names": list(names)}}


def scrape_configs(docs: list[dict], workdir: Path) -> tuple[list[dict], list[dict]]:
    """Scrape configs for every PodMonitor and ServiceMonitor among `docs` (rendered chart objects),
    and what `Discovery` must list for them (role, namespaces, target file)."""
    configs, watches = [], []
    for monitor in docs:
        kind, meta, spec = monitor.get("kind"), monitor.get("metadata", {}), monitor.get("spec", {})
        if kind == "PodMonitor":
            endpoints, role, sd_meta = spec["podMetricsEndpoints"], "pod", "pod"
        elif kind == "ServiceMonitor":
            endpoints, role, sd_meta = spec["endpoints"], "endpoints", "service"
        else:
            continue
        for i, endpoint in enumerate(endpoints):
            relabel = _selector_keeps(sd_meta, spec["selector"].get("matchLabels", {}))
            if role == "pod":
                relabel += [
                    {"source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": endpoint["port"], "action": "keep"},
                    {"source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)", "action": "drop"},
                ]  # fmt: skip
            else:
                relabel += [
                    {"source_labels": ["__meta_kubernetes_endpoint_port_name"], "regex": endpoint["port"], "action": "keep"},
                    {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
                ]  # fmt: skip
            relabel += [
                {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
                {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
                {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
                {"target_label": "endpoint", "replacement": endpoint["port"]},
                {"target_label": "job", "replacement": f"{meta['namespace']}/{meta['name']}"},
            ]  # fmt: skip
            config = {
                "job_name": f"{kind[0].lower()}{kind[1:]}/{meta['namespace']}/{meta['name']}/{i}",
                "honor_labels": bool(endpoint.get("honorLabels", False)),
                "metrics_path": endpoint.get("path", "/metrics"),
            }
            sd_file = workdir / f"sd-{kind.lower()}-{i}.json"
            config["file_sd_configs"] = [{"files": [str(sd_file)], "refresh_interval": "5s"}]
            watches.append({"role": role, "namespaces": _namespaces(monitor), "file": sd_file})
            if endpoint.get("interval"):
                config["scrape_interval"] = endpoint["interval"]
            config["relabel_configs"] = relabel
            configs.append(config)
    return configs, watches


def _labels(meta: str, obj: dict) -> dict[str, str]:
    out = {}
    for key, value in (obj["metadata"].get("labels") or {}).items():
        out[f"__meta_kubernetes_{meta}_label_{_sanitize(key)}"] = value
        out[f"__meta_kubernetes_{meta}_labelpresent_{_sanitize(key)}"] = "true"
    return out


def pod_targets(pods: list[dict]) -> list[dict]:
    """One target per container port of each pod with an IP, labelled as Prometheus's `pod` role does."""
    targets = []
    for pod in pods:
        ip = pod["status"].get("podIP")
        if not ip:
            continue
        base = {"__meta_kubernetes_namespace": pod["metadata"]["namespace"],
                "__meta_kubernetes_pod_name": pod["metadata"]["name"],
                "__meta_kubernetes_pod_phase": pod["status"].get("phase", ""), **_labels("pod", pod)}  # fmt: skip
        for container in pod["spec"]["containers"]:
            for port in container.get("ports") or []:
                targets.append({"targets": [f"{ip}:{port['containerPort']}"], "labels": {
                    **base, "__meta_kubernetes_pod_container_name": container["name"],
                    "__meta_kubernetes_pod_container_port_name": port.get("name", ""),
                    "__meta_kubernetes_pod_container_port_number": str(port["containerPort"])}})  # fmt: skip
    return targets


def endpoint_targets(endpoints: list[dict], services: list[dict]) -> list[dict]:
    """One target per ready address and port of each Endpoints object (the `endpoints` role)."""
    by_name = {(s["metadata"]["namespace"], s["metadata"]["name"]): s for s in services}
    targets = []
    for ep in endpoints:
        ns, name = ep["metadata"]["namespace"], ep["metadata"]["name"]
        service = by_name.get((ns, name))
        if service is None:
            continue
        for subset in ep.get("subsets") or []:
            for address in subset.get("addresses") or []:
                ref = address.get("targetRef") or {}
                for port in subset.get("ports") or []:
                    targets.append({"targets": [f"{address['ip']}:{port['port']}"], "labels": {
                        "__meta_kubernetes_namespace": ns, "__meta_kubernetes_service_name": name,
                        "__meta_kubernetes_endpoint_port_name": port.get("name", ""),
                        "__meta_kubernetes_pod_name": ref.get("name", "") if ref.get("kind") == "Pod" else "",
                        **_labels("service", service)}})  # fmt: skip
    return targets


class Discovery:
    """Writes the targets of `watches` (from `scrape_configs`) every `every` seconds until stopped."""

    def __init__(self, kubectl, watches: list[dict], every: float = 3.0):
        self.kubectl = kubectl  # kubectl(*args) -> CompletedProcess, the cluster's own
        self.watches = watches
        self.every = every
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="e2e-discovery", daemon=True)

    def _list(self, kind: str, namespaces: dict) -> list[dict]:
        names = namespaces.get("namespaces", {}).get("names")
        scopes = [["-n", n] for n in names] if names else [["--all-namespaces"]]
        items = []
        for scope in scopes:
            items += json.loads(self.kubectl("get", kind, *scope, "-o", "json").stdout)["items"]
        return items

    def refresh(self) -> None:
        for watch in self.watches:
            if watch["role"] == "pod":
                targets = pod_targets(self._list("pods", watch["namespaces"]))
            else:
                targets = endpoint_targets(self._list("endpoints", watch["namespaces"]),
                                           self._list("services", watch["namespaces"]))
            tmp = watch["file"].with_suffix(".tmp")
            tmp.write_text(json.dumps(targets))
            os.replace(tmp, watch["file"])

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.refresh()
            except Exception as exc:  # noqa: BLE001 - the API server may be briefly busy; keep trying
                self.errors.append(repr(exc))

    def start(self) -> "Discovery":
        self.refresh()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
