"""The operator killed (SIGKILL) at random moments, twenty times, while the app is failed, scaled and
deleted under it: a driver pod is never created while another one still exists, and afterwards the
operator converges to one running driver with the last requested executor count."""

from __future__ import annotations

import json
import random
import threading
import time

import pytest

from streamapp_testbed.kafka_admin import create_topic
from streamapp_testbed.kwok import EXIT_CODE_ANNOTATION, FAIL_LABEL

from streamapp_testkit.operator_bed import OperatorProcess, simple_app, unique
from streamapp_testbed.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROUNDS = 20
CONNECTED = "Initial authentication has finished"


class DriverWatch:
    """Every driver pod event of one app, from a real watch (resumed by resourceVersion), checked
    for a driver appearing while another one still exists."""

    def __init__(self, cluster, app: str):
        self.kube, self.namespace = cluster.kube, cluster.namespace
        self.selector = f"streamapp.io/app={app},streamapp.io/component=driver"
        self.existing: set[str] = set()
        self.created: list[str] = []
        self.violations: list[str] = []
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _seen(self, kind: str, uid: str) -> None:
        if kind == "DELETED":
            self.existing.discard(uid)
        elif uid not in self.existing and uid not in self.created:
            if self.existing:
                self.violations.append(f"driver {uid} appeared while {sorted(self.existing)} still existed")
            self.existing.add(uid)
            self.created.append(uid)

    def _run(self) -> None:
        version = None
        while not self.stopping.is_set():
            try:
                if version is None:
                    listed = self.kube.request("GET", f"/api/v1/namespaces/{self.namespace}/pods",
                                               query={"labelSelector": self.selector})
                    uids = {p["metadata"]["uid"] for p in listed["items"]}
                    for gone in self.existing - uids:
                        self._seen("DELETED", gone)
                    for uid in uids:
                        self._seen("ADDED", uid)
                    version = listed["metadata"]["resourceVersion"]
                version = self._watch(version)
            except Exception as exc:  # noqa: BLE001 - note it, list again, carry on
                self.errors.append(repr(exc))
                version = None
                time.sleep(0.2)

    def _watch(self, version: str) -> str | None:
        client = self.kube.client
        query = [("watch", "1"), ("resourceVersion", version), ("labelSelector", self.selector),
                 ("timeoutSeconds", "10"), ("allowWatchBookmarks", "true")]
        method, url, headers, _, _ = client.param_serialize(
            "GET", f"/api/v1/namespaces/{self.namespace}/pods", query_params=query,
            header_params={"Accept": "application/json"}, auth_settings=["BearerToken"])
        response = client.call_api(method, url, headers, None, _request_timeout=(5, 30)).response
        buffer = b""
        for chunk in response.stream(4096):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                event = json.loads(line)
                if event["type"] == "ERROR":
                    return None  # expired: list again
                meta = event["object"]["metadata"]
                if event["type"] != "BOOKMARK":
                    self._seen(event["type"], meta["uid"])
                version = meta["resourceVersion"]
            if self.stopping.is_set():
                break
        return version

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=20)


def test_operator_killed_mid_reconcile_never_runs_two_drivers(own_namespace, kafka, control_plane, tmp_path):
    cluster, rng = own_namespace, random.Random(5)
    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=2)
    cluster.pv_for("app")
    operator = OperatorProcess(tmp_path, cluster.namespace, control_plane.kubeconfig, resync=1, debounce=1)
    watch = DriverWatch(cluster, "app")
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
            wait_for("the operator connected", lambda: operator.log_text().count(CONNECTED) == round_ + 1, timeout=60,
                     every=0.05)
            time.sleep(rng.uniform(0.05, 2.0))  # somewhere in its first reconciles
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

    assert watch.violations == [], watch.errors
    assert len(watch.created) >= 5, f"only {len(watch.created)} drivers were ever created: the loop did not exercise restarts; watch errors: {watch.errors[:5]}"
    assert len(cluster.driver_pods("app")) == 1
    assert cluster.config_properties("app")["spark.executor.instances"] == str(executors)
    for kind, count in (("ServiceAccount", 1), ("Role", 1), ("RoleBinding", 1), ("Service", 2), ("ConfigMap", 1)):
        assert len(cluster.kube.list(kind, cluster.namespace, "streamapp.io/app=app")) == count, kind  # Service: driver, ui
