"""Karpenter's kwok provider as the test bed's node autoscaler: Karpenter's own controllers, whose
"cloud" makes kwok Nodes (annotated for the test bed's kwok, which then plays them). Its CRDs are
applied from the Karpenter module in Go's cache (testbed/build-karpenter.sh put it there); the
instance types, node class and NodePool are the test bed's own, small and quick to consolidate."""

from __future__ import annotations

import json
import time
from pathlib import Path

from .kube import ControlPlane
from .paths import installed
from .process import ManagedProcess, free_port

NODEPOOL_LABEL = "karpenter.sh/nodepool"
POOL_TAINT = "testbed.streamapp.io/karpenter-pool"
INSTANCE_TYPE = "streamapp-48x-amd64-linux"
INSTANCE_CPU = 48
# One instance type: 48 cores, more than any of the test bed's own kwok nodes (32).
INSTANCE_TYPES = [{
    "name": INSTANCE_TYPE,
    "offerings": [{"Price": 1.0, "Available": True, "Requirements": [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-a"]}]}],
    "architecture": "amd64",
    "operatingSystems": ["linux"],
    "resources": {"cpu": str(INSTANCE_CPU), "memory": "192Gi", "ephemeral-storage": "20Gi", "pods": "110"},
}]


def node_class() -> dict:
    return {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}}


def pool_toleration(name: str) -> dict:
    """What a pod needs to be placed on (and to be provisioned for by) the NodePool ``name``."""
    return {"key": POOL_TAINT, "operator": "Equal", "value": name, "effect": "NoSchedule"}


def node_pool(name: str, consolidate_after: str = "1s", cpu_limit: str = "240") -> dict:
    """Nodes of INSTANCE_TYPE, removed as soon as they are empty or their pods fit elsewhere. Tainted:
    Karpenter makes them only for pods that tolerate the pool (pool_toleration), so that pending pods
    of other tests on the shared bed never get a node from it."""
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "taints": [{"key": POOL_TAINT, "value": name, "effect": "NoSchedule"}],
                "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [INSTANCE_TYPE]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ],
                "expireAfter": "Never",
            }},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": consolidate_after,
                           "budgets": [{"nodes": "100%"}]},
            "limits": {"cpu": cpu_limit},
        },
    }


class Karpenter:
    def __init__(self, control_plane: ControlPlane, workdir: Path):
        self.control_plane, self.workdir = control_plane, workdir
        self.proc: ManagedProcess | None = None

    def crd_files(self) -> list[Path]:
        module = Path((installed().karpenter / "module-dir").read_text().strip())
        return sorted((module / "pkg" / "apis" / "crds").glob("*.yaml")) + \
            sorted((module / "kwok" / "apis" / "crds").glob("*.yaml"))

    def start(self, timeout: float = 60) -> "Karpenter":
        self.workdir.mkdir(parents=True, exist_ok=True)
        for crd in self.crd_files():
            self.control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd))
        for crd in self.crd_files():
            name = crd.name.removesuffix(".yaml").split("_", 1)
            self.control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                                       f"crd/{name[1]}.{name[0]}")
        types = self.workdir / "instance-types.json"
        types.write_text(json.dumps(INSTANCE_TYPES))
        health = free_port()
        env = {
            "KUBECONFIG": str(self.control_plane.kubeconfig), "SYSTEM_NAMESPACE": "kube-system",
            "DISABLE_LEADER_ELECTION": "true", "METRICS_PORT": str(free_port()), "HEALTH_PROBE_PORT": str(health),
            "INSTANCE_TYPES_FILE_PATH": str(types), "LOG_LEVEL": "info",
            "BATCH_IDLE_DURATION": "1s", "BATCH_MAX_DURATION": "3s",
        }
        self.proc = ManagedProcess("karpenter", [installed().karpenter / "bin" / "karpenter-kwok"],
                                   self.workdir / "karpenter.log", env=env).start()
        self.proc.wait_until(lambda: _ok(f"http://127.0.0.1:{health}/readyz"), timeout, "Karpenter /readyz")
        self.control_plane.kubectl("apply", "-f", "-", input=json.dumps(node_class()))
        return self

    def nodes(self, pool: str) -> list[dict]:
        out = self.control_plane.kubectl("get", "nodes", "-l", f"{NODEPOOL_LABEL}={pool}", "-o", "json").stdout
        return json.loads(out)["items"]

    def remove_pool(self, pool: str, timeout: float = 90) -> None:
        """Delete the NodePool and wait for Karpenter to take its nodes away (so that no other test
        finds them); what is left after ``timeout`` is deleted by force."""
        self.control_plane.kubectl("delete", "nodepool", pool, "--wait=false", check=False)
        deadline = time.monotonic() + timeout
        while self.nodes(pool) and time.monotonic() < deadline:
            time.sleep(1)
        for claim in json.loads(self.control_plane.kubectl(
                "get", "nodeclaims", "-l", f"{NODEPOOL_LABEL}={pool}", "-o", "json").stdout)["items"]:
            self.control_plane.kubectl("patch", "nodeclaim", claim["metadata"]["name"], "--type=merge",
                                       "-p", '{"metadata":{"finalizers":null}}', check=False)
        for node in self.nodes(pool):
            self.control_plane.kubectl("patch", "node", node["metadata"]["name"], "--type=merge",
                                       "-p", '{"metadata":{"finalizers":null}}', check=False)
            self.control_plane.kubectl("delete", "node", node["metadata"]["name"], "--wait=false", check=False)

    def log_tail(self, lines: int = 80) -> str:
        try:
            return "\n".join((self.workdir / "karpenter.log").read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def stop(self) -> None:
        if self.proc:
            self.proc.stop()
            self.proc = None


def _ok(url: str) -> bool:
    import urllib.request

    with urllib.request.urlopen(url, timeout=3) as resp:
        return resp.status == 200
