"""Helpers for the operator's integration tests: the operator as a separate process, per-test
namespaces, pre-bound volumes (the test bed has no storage provisioner); `wait_for` (from `waiting`)
for their polling waits."""

from __future__ import annotations

import copy
import json
import os
import signal
import sys
import uuid
from pathlib import Path

import yaml

from streamapp_api import contract
from streamapp_testbed.kafka_admin import create_topic
from streamapp_testbed.paths import REPO_DIR
from streamapp_testbed.process import ManagedProcess, free_port
from streamapp_testbed.waiting import wait_for

CRD = REPO_DIR / "crds" / "streamapp.io_streamapps.yaml"
EXAMPLES = REPO_DIR / "examples"
PYTHONPATH = os.pathsep.join(str(REPO_DIR / p) for p in ("crds", "operator", "apps", "testbed"))


# Every app of the operator tests gets its NetworkPolicy, as under the chart (through the real API
# server's validation and defaults: the lifecycle test checks that nothing needs converging after).
NETWORK_ARGS = ("--network-policies", "--network-policy-operator=streamapp-system/app.kubernetes.io/name=streamapp-operator")


def network_settings():
    """The NetworkPolicies the operator makes of NETWORK_ARGS."""
    import argparse

    from streamapp_operator.render import network

    parser = argparse.ArgumentParser()
    network.add_arguments(parser)
    return network.from_arguments(parser.parse_args(NETWORK_ARGS))


class OperatorProcess:
    """``python -m streamapp_operator`` for namespaces matching ``pattern``, logging to a file."""

    def __init__(self, workdir: Path, pattern: str, kubeconfig: Path, resync: float = 2, debounce: float = 2):
        self.workdir, self.pattern, self.kubeconfig = workdir, pattern, kubeconfig
        self.metrics_port = free_port()
        self.argv = [sys.executable, "-m", "streamapp_operator", "--namespace", pattern,
                     "--metrics-port", str(self.metrics_port), "--metrics-address", "127.0.0.1",
                     "--resync", str(resync), "--scale-debounce", str(debounce), "--runtime-image", "streamapp/runtime:test",
                     *NETWORK_ARGS]
        self.proc: ManagedProcess | None = None
        self.starts = 0

    def start(self) -> "OperatorProcess":
        self.starts += 1
        self.proc = ManagedProcess(f"operator-{self.starts}", self.argv, self.workdir / "operator.log",
                                   env={"PYTHONPATH": PYTHONPATH, "PYTHONUNBUFFERED": "1",
                                        "KUBECONFIG": str(self.kubeconfig)}).start()
        return self

    def kill(self) -> None:
        """SIGKILL, no goodbye: as when the operator's node dies mid-reconcile."""
        if self.proc is not None and self.proc.proc is not None:
            try:
                os.killpg(self.proc.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.proc.wait(timeout=10)
            self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    def log_text(self) -> str:
        try:
            return (self.workdir / "operator.log").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60, namespace: str | None = None) -> str:
        """The log's last ``lines``; with ``namespace``, its last lines about that namespace (the shared
        operator also logs every other test's apps, and their namespaces' deletion)."""
        try:
            text = (self.workdir / "operator.log").read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no log)"
        if namespace is not None:
            text = [line for line in text if f"{namespace}/" in line or f" {namespace} " in line]
        return "\n".join(text[-lines:])


class Cluster:
    """kubectl and a JSON client over the test bed's API server, for one test namespace."""

    def __init__(self, control_plane, namespace: str):
        from streamapp_operator.kubeapi import Kube, load_config
        from streamapp_testbed.kube import CONTEXT

        self.cp, self.namespace = control_plane, namespace
        self.kube = Kube(load_config(str(control_plane.kubeconfig), CONTEXT))

    def kubectl(self, *args: str, input: str | None = None, check: bool = True):
        return self.cp.kubectl("-n", self.namespace, *args, input=input, check=check)

    def apply(self, obj: dict) -> None:
        self.kubectl("apply", "-f", "-", input=json.dumps(obj))

    def get(self, kind: str, name: str) -> dict | None:
        return self.kube.get(kind, self.namespace, name)

    def app(self, name: str) -> dict:
        return self.get("StreamApp", name) or {}

    def status(self, name: str) -> dict:
        return self.app(name).get("status") or {}

    def condition(self, name: str, kind: str) -> dict:
        return next((c for c in self.status(name).get("conditions", []) if c["type"] == kind), {})

    def phases(self, name: str, since: str, until: str, timeout: int = 60) -> list[str]:
        """Every status.phase the app was written with after resourceVersion ``since`` (repeats folded),
        watched up to the first ``until`` after a change."""
        from kubernetes import client, watch

        from streamapp_api import GROUP, PLURAL, VERSION

        seen: list[str] = []
        stream = watch.Watch().stream(
            client.CustomObjectsApi(self.kube.client).list_namespaced_custom_object, GROUP, VERSION, self.namespace,
            PLURAL, field_selector=f"metadata.name={name}", resource_version=since, timeout_seconds=timeout)
        for event in stream:
            phase = ((event["object"].get("status") or {}).get("phase")) or ""
            if not seen or seen[-1] != phase:
                seen.append(phase)
            if phase == until and len(seen) > 1:
                break
        return seen

    def driver(self, name: str) -> dict | None:
        return self.get("Pod", f"{name}-driver")

    def running_driver(self, name: str, not_uid: str | None = None) -> dict | None:
        pod = self.driver(name)
        if pod and pod["status"].get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp") \
                and pod["metadata"]["uid"] != not_uid:
            return pod
        return None

    def driver_pods(self, name: str) -> list[dict]:
        return self.kube.list("Pod", self.namespace, f"streamapp.io/app={name},streamapp.io/component=driver")

    def events(self, name: str) -> list[dict]:
        items = self.kube.list("Event", self.namespace)
        return [e for e in items if e["involvedObject"].get("name") == name and e["involvedObject"].get("kind") == "StreamApp"]

    def event(self, name: str, reason: str, text: str = "", timeout: float = 15) -> dict:
        """The app's event of `reason` whose message has `text`, waited for: the operator posts events
        after it writes status, so a test that saw the status may look a moment too early."""
        return wait_for(f"event {reason} {text!r} of {name}", lambda: next(
            (e for e in self.events(name) if e["reason"] == reason and text in e["message"]), None), timeout=timeout)

    def pv_for(self, app: str, size: str = "10Gi") -> None:
        """A volume pre-bound to the app's checkpoint claim."""
        pv = {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": f"{self.namespace}-{app}", "labels": {"streamapp-test": self.namespace}},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": f"/tmp/{self.namespace}-{app}"},
                     "claimRef": {"namespace": self.namespace, "name": f"{app}-checkpoint"}},
        }
        self.cp.kubectl("apply", "-f", "-", input=json.dumps(pv))

    def config_spec(self, app: str) -> dict:
        """The spec the ConfigMap gives the driver (what the operator last applied)."""
        data = (self.get("ConfigMap", f"{app}-config") or {}).get("data") or {}
        return yaml.safe_load(data.get("streamapp.yaml") or "{}").get("spec") or {}

    def config_properties(self, app: str) -> dict[str, str]:
        data = (self.get("ConfigMap", f"{app}-config") or {}).get("data") or {}
        return contract.parse_properties(data.get(contract.SPARK_PROPERTIES_FILE, ""))


def example(name: str, namespace: str, bootstrap: str) -> dict:
    doc = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    doc["metadata"]["namespace"] = namespace
    doc["spec"]["kafka"]["bootstrapServers"] = bootstrap
    return doc


def input_topics(doc: dict) -> list[str]:
    spec = doc["spec"]
    topics = [t for s in spec["sources"] for t in ([s["topic"]] if "topic" in s else s["topics"])]
    return topics + [t["topic"] for t in spec.get("tables", [])]


def simple_app(name: str, namespace: str, bootstrap: str, topic: str, **spec) -> dict:
    doc = {
        "apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "kafka": {"bootstrapServers": bootstrap},
            "sources": [{"name": "lines", "topic": topic, "format": "string"}],
            "streams": [{"name": "counts", "from": "lines", "steps": [
                {"aggregate": {"groupBy": ["value"], "columns": {"n": "count(*)"}}}], "emit": "updates"}],
            "sinks": [{"from": "counts", "kafka": {"topic": f"{topic}-out", "key": "value"}}],
            "executor": {"cores": 1},
            "restartPolicy": {"backoff": "1s", "maxBackoff": "4s"},
        },
    }
    for key, value in spec.items():
        doc["spec"][key] = copy.deepcopy(value)
    return doc


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def started_app(cluster, kafka, name: str, **spec) -> dict:
    """``simple_app`` on a topic of its own, applied on the test bed: its running driver pod."""
    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=1)
    cluster.pv_for(name)
    cluster.apply(simple_app(name, cluster.namespace, kafka.bootstrap, topic, **spec))
    return wait_for(f"a running driver of {name}", lambda: cluster.running_driver(name), timeout=120)
