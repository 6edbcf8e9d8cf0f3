"""kwok plays the nodes: a few fake Nodes whose pods reach Running without containers, and a chaos
stage that fails a labelled pod on demand (kwok/stages.yaml)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

from . import networks
from .kube import ControlPlane
from .paths import TESTBED_DIR, installed
from .process import ManagedProcess, free_port

NODE_ANNOTATION = "kwok.x-k8s.io/node"
FAIL_LABEL = "testbed.streamapp.io/fail"
EXIT_CODE_ANNOTATION = "testbed.streamapp.io/exit-code"


def fake_node(name: str, pod_cidr: str, cpu: str = "32", memory: str = "128Gi") -> dict:
    """A Node kwok manages; its pods get addresses from `pod_cidr` (loopback: see networks.py)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {NODE_ANNOTATION: "fake"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok"},
        },
        "spec": {"podCIDR": pod_cidr, "podCIDRs": [pod_cidr]},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
        },
    }


class Kwok:
    def __init__(self, control_plane: ControlPlane, workdir: Path, nodes: int = 3):
        self.control_plane = control_plane
        self.workdir = workdir
        self.node_names = [f"kwok-node-{i}" for i in range(nodes)]
        self.pod_range = networks.kwok_pod_range()
        self.proc: ManagedProcess | None = None

    def start(self, timeout: float = 60) -> "Kwok":
        self.workdir.mkdir(parents=True, exist_ok=True)
        argv = [
            installed().kube_tool("kwok"),
            f"--kubeconfig={self.control_plane.kubeconfig}",
            f"--config={TESTBED_DIR / 'kwok' / 'stages.yaml'}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={NODE_ANNOTATION}=fake",
            f"--cidr={self.pod_range}",
            f"--node-ip={networks.kwok_node_ip(self.pod_range)}",
            f"--server-address=127.0.0.1:{free_port()}",
        ]
        self.proc = ManagedProcess("kwok", argv, self.workdir / "kwok.log").start()
        nodes = {"apiVersion": "v1", "kind": "List", "items": [self.node(n) for n in self.node_names]}
        self.control_plane.kubectl("apply", "-f", "-", input=json.dumps(nodes))
        self.proc.wait_until(self._nodes_ready, timeout, f"{len(self.node_names)} Ready nodes")
        return self

    def node(self, name: str, **resources: str) -> dict:
        """A fake node of this bed by name: the same name keeps its pod range, a new one takes the next."""
        if name not in self.node_names:
            self.node_names.append(name)
        return fake_node(name, networks.kwok_node_cidr(self.pod_range, self.node_names.index(name)), **resources)

    def _nodes_ready(self) -> bool:
        out = self.control_plane.kubectl("get", "nodes", "-o", "json").stdout
        ready = [
            n
            for n in json.loads(out)["items"]
            if any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
        ]
        return len(ready) >= len(self.node_names)

    def fail_pod(self, namespace: str, name: str, exit_code: int = 137) -> None:
        """Turn a Running pod Failed through the chaos stage, as if its container died."""
        self.control_plane.kubectl("annotate", "-n", namespace, "pod", name, f"{EXIT_CODE_ANNOTATION}={exit_code}", "--overwrite")
        self.control_plane.kubectl("label", "-n", namespace, "pod", name, f"{FAIL_LABEL}=true", "--overwrite")

    def mark_not_ready(self, namespace: str, name: str) -> dict:
        """What the node lifecycle controller does to every pod of a node whose heartbeat lapsed:
        condition Ready turns False, nothing else changes. Returns the pod as the patch left it."""
        patch = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "NodeNotReady"}]}}
        out = self.control_plane.kubectl("patch", "-n", namespace, "pod", name, "--subresource=status",
                                         "--type=strategic", "-p", json.dumps(patch), "-o", "json").stdout
        return json.loads(out)

    def stop(self) -> None:
        if self.proc:
            self.proc.stop()
            self.proc = None


def wait_for_pod_phase(cp: ControlPlane, namespace: str, selector: str, phase: str, count: int = 1, timeout: float = 60) -> list[dict]:
    """Wait until `count` pods matching the label selector are in `phase`; return them."""
    deadline = time.monotonic() + timeout
    pods: list[dict] = []
    while time.monotonic() < deadline:
        out = cp.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json").stdout
        pods = [p for p in json.loads(out)["items"] if p.get("status", {}).get("phase") == phase]
        if len(pods) >= count:
            return pods
        time.sleep(0.3)
    raise TimeoutError(f"{count} pod(s) {selector} in {namespace} not {phase} after {timeout}s: {yaml.safe_dump(pods)[:2000]}")
