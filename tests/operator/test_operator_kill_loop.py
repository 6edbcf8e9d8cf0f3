"""The operator killed (SIGKILL) at random moments, twenty times, while the app is failed, scaled and
deleted under it: a driver pod is never created while another one still exists, and afterwards the
operator converges to one running driver with the last requested executor count."""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time

import pytest

from streamapp_testbed.kafka_admin import create_topic
from streamapp_testbed.kube import CONTEXT
from streamapp_testbed.kwok import EXIT_CODE_ANNOTATION, FAIL_LABEL

from operator_bed import OperatorProcess, simple_app, unique, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROUNDS = 20


class DriverWatch:
    """Every driver pod event of one app, from a real watch, checked for overlapping drivers."""

    def __init__(self, control_plane, namespace: str, app: str):
        template = '{.type} {.object.metadata.uid} {.object.status.phase} {.object.metadata.deletionTimestamp}{"\\n"}'
        self.proc = subprocess.Popen(
            [str(control_plane.kubectl_path), f"--kubeconfig={control_plane.kubeconfig}", f"--context={CONTEXT}",
             "-n", namespace, "get", "pods", "-l", f"streamapp.io/app={app},streamapp.io/component=driver",
             "--watch", "--output-watch-events", "-o", f"jsonpath={template}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.existing: set[str] = set()
        self.created: list[str] = []
        self.violations: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            parts = line.split()
            if len(parts) < 2:
                continue
            kind, uid = parts[0], parts[1]
            if kind == "ADDED" and uid not in self.existing:
                if self.existing:
                    self.violations.append(f"driver {uid} appeared while {sorted(self.existing)} still existed")
                self.existing.add(uid)
                self.created.append(uid)
            elif kind == "DELETED":
                self.existing.discard(uid)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.thread.join(timeout=10)


def test_operator_killed_mid_reconcile_never_runs_two_drivers(own_namespace, kafka, control_plane, tmp_path):
    cluster, rng = own_namespace, random.Random(5)
    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=2)
    cluster.pv_for("app")
    operator = OperatorProcess(tmp_path, cluster.namespace, resync=1, debounce=1)
    watch = DriverWatch(control_plane, cluster.namespace, "app")
    executors = None
    try:
        cluster.apply(simple_app("app", cluster.namespace, kafka.bootstrap, topic,
                                 restartPolicy={"backoff": "1s", "maxBackoff": "2s"}))
        for round_ in range(ROUNDS):
            action = round_ % 3
            if action == 0 and cluster.running_driver("app"):
                cluster.kubectl("annotate", "pod", "app-driver", f"{EXIT_CODE_ANNOTATION}=1", "--overwrite", check=False)
                cluster.kubectl("label", "pod", "app-driver", f"{FAIL_LABEL}=true", "--overwrite", check=False)
            elif action == 1:
                executors = 1 + round_ % 4
                cluster.kubectl("patch", "sapp/app", "--type=merge", "-p", json.dumps({"spec": {"executors": executors}}))
            else:
                cluster.kubectl("delete", "pod", "app-driver", "--wait=false", "--ignore-not-found", check=False)
            operator.start()
            time.sleep(rng.uniform(0.5, 3.0))
            operator.kill()

        operator.start()
        pod = wait_for("one running driver with the last executor count", lambda: (
            (p := cluster.running_driver("app")) and p["metadata"]["annotations"]["streamapp.io/executors"] == str(executors)
            and cluster.status("app").get("phase") == "Running" and p), timeout=120)
        time.sleep(3)  # settled: nothing more happens
        assert cluster.driver("app")["metadata"]["uid"] == pod["metadata"]["uid"], operator.log_tail()
    finally:
        operator.stop()
        watch.stop()

    assert watch.violations == []
    assert len(watch.created) >= 5, f"only {len(watch.created)} drivers were ever created: the loop did not exercise restarts"
    assert len(cluster.driver_pods("app")) == 1
    assert cluster.config_properties("app")["spark.executor.instances"] == str(executors)
    for kind in ("ServiceAccount", "Role", "RoleBinding", "Service", "ConfigMap"):
        assert len(cluster.kube.list(kind, cluster.namespace, "streamapp.io/app=app")) == 1, kind
