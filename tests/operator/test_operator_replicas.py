"""Two operator replicas, as the chart runs them: they elect a leader by a Lease, and both serve the
admission webhook with certificates of one CA (a Secret they share). The leader is SIGKILLed five times
(and started again, as its Deployment would) while 50 apps are edited and their drivers fail:

- never two driver pods of one app at once (a watch of every driver pod);
- every app ends on its last spec (executor count) with one running driver;
- the other replica takes over: the time from the kill to its first reconciles, p50 and p99, printed;
- a leader whose Lease is taken from it stops within its renew deadline;
- no apply is refused: the webhook configuration points at the replica that survives each kill (the
  test bed has no Service to spread the API server's calls), so every edit made while the leader is
  dead goes through the other replica's webhook, trusted by the bundle either replica injected.
"""

from __future__ import annotations

import base64
import json
import os
import random
import socket
import ssl
import statistics
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import pytest

from streamapp_testbed.kafka_admin import create_topic
from streamapp_testbed.kwok import EXIT_CODE_ANNOTATION, FAIL_LABEL
from streamapp_testbed.process import free_port
from streamapp_testbed.waiting import NotYet, wait_for
from streamapp_testkit.operator_bed import OperatorProcess, simple_app, unique

pytestmark = [pytest.mark.integration, pytest.mark.slow]
APPS = 50
KILLS = int(os.environ.get("STREAMAPP_TEST_KILLS", "5"))
LEADS = "leading: reconciling"  # the leader's first line (scheduler.Reconciler.lead)
CONNECTED = "Initial authentication has finished"
# Lease duration, renew deadline, retry period: shorter than the defaults (15, 10, 2) to keep the test
# short; the takeover follows the lease duration. STREAMAPP_TEST_LEASE=15,10,2 measures the defaults.
LEASE = tuple(int(s) for s in os.environ.get("STREAMAPP_TEST_LEASE", "5,3,1").split(","))
LEASE_TIMES = ("--leader-election-lease-duration", str(LEASE[0]), "--leader-election-renew-deadline", str(LEASE[1]),
               "--leader-election-retry-period", str(LEASE[2]))


class Replica:
    def __init__(self, label: str, workdir, namespace: str, kubeconfig, lease: str, webhook: str, ca_secret: str):
        self.label, self.port = label, free_port()
        self.operator = OperatorProcess(workdir / label, namespace, kubeconfig, resync=5, debounce=1)
        self.operator.argv += ["--leader-election", lease, *LEASE_TIMES,
                               "--webhook-port", str(self.port), "--webhook-address", "127.0.0.1",
                               "--webhook-host", "127.0.0.1", "--webhook-configuration", webhook,
                               "--webhook-ca-secret", ca_secret]
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        self.operator.start()

    @property
    def identity(self) -> str | None:  # leader.own_identity of its process (no POD_NAME here)
        proc = self.operator.proc
        return f"{socket.gethostname()}-{proc.proc.pid}" if proc is not None and proc.proc is not None else None

    def leads(self) -> int:
        return self.operator.log_text().count(LEADS)

    def connected(self) -> bool:
        return self.operator.log_text().count(CONNECTED) >= self.starts


class DriverWatch:
    """Every driver pod event in the namespace (a real watch, resumed by resourceVersion): a driver that
    appears while another of the same app still exists is a violation."""

    def __init__(self, cluster):
        self.kube, self.namespace = cluster.kube, cluster.namespace
        self.existing: dict[str, set[str]] = {}  # app -> uids
        self.created = 0
        self.violations: list[str] = []
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _seen(self, kind: str, pod: dict) -> None:
        meta = pod["metadata"]
        app, uid = meta["labels"]["streamapp.io/app"], meta["uid"]
        uids = self.existing.setdefault(app, set())
        if kind == "DELETED":
            uids.discard(uid)
        elif uid not in uids:
            if uids:
                self.violations.append(f"{app}: driver {uid} appeared while {sorted(uids)} still existed")
            uids.add(uid)
            self.created += 1

    def _run(self) -> None:
        from kubernetes import client, watch

        pods = client.CoreV1Api(self.kube.client)
        selector = "streamapp.io/component=driver,streamapp.io/app"
        version = None
        while not self.stopping.is_set():
            try:
                if version is None:
                    listed = self.kube.request("GET", f"/api/v1/namespaces/{self.namespace}/pods",
                                               query={"labelSelector": selector})
                    now = {p["metadata"]["uid"] for p in listed["items"]}
                    for uids in self.existing.values():
                        uids &= now  # gone while the watch was down
                    for pod in listed["items"]:
                        self._seen("ADDED", pod)
                    version = listed["metadata"]["resourceVersion"]
                for event in watch.Watch().stream(pods.list_namespaced_pod, self.namespace, label_selector=selector,
                                                  resource_version=version, timeout_seconds=5,
                                                  allow_watch_bookmarks=True, _preload_content=False):
                    if event["type"] == "ERROR":
                        version = None
                        break
                    pod = event["raw_object"]
                    if event["type"] != "BOOKMARK":
                        self._seen(event["type"], pod)
                    version = pod["metadata"]["resourceVersion"]
                    if self.stopping.is_set():
                        break
            except Exception as exc:  # noqa: BLE001 - note it, list again, carry on
                self.errors.append(repr(exc))
                version = None
                time.sleep(0.2)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=20)


class Churn:
    """Edits (executor counts, through admission) and driver failures on random apps, until stopped."""

    def __init__(self, cluster, apps: list[str], seed: int = 38):
        self.cluster, self.apps, self.rng = cluster, apps, random.Random(seed)
        self.executors = {app: 1 for app in apps}
        self.edits = self.failures = 0
        self.admitted: list[float] = []  # when each edit was admitted (time.monotonic)
        self.refused: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            app = self.rng.choice(self.apps)
            if self.rng.random() < 0.6:
                count = self.rng.randint(1, 4)
                result = self.cluster.kubectl("patch", "sapp", app, "--type=merge", "-p",
                                              json.dumps({"spec": {"executors": count}}), check=False)
                if result.returncode == 0:
                    self.executors[app], self.edits = count, self.edits + 1
                    self.admitted.append(time.monotonic())
                else:
                    self.refused.append(f"{time.strftime('%H:%M:%S')} {app}: {result.stderr.strip()}")
            elif self.cluster.running_driver(app):
                pod = f"{app}-driver"
                self.cluster.kubectl("annotate", "pod", pod, f"{EXIT_CODE_ANNOTATION}=1", "--overwrite", check=False)
                self.cluster.kubectl("label", "pod", pod, f"{FAIL_LABEL}=true", "--overwrite", check=False)
                self.failures += 1
            time.sleep(0.05)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=30)


def webhook_configuration(name: str, namespace: str, port: int) -> dict:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "validate-streamapp.streamapp.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Fail", "timeoutSeconds": 5,
            "namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]}]},
            "rules": [{"apiGroups": ["streamapp.io"], "apiVersions": ["v1alpha1"], "resources": ["streamapps"],
                       "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"}],
            "clientConfig": {"url": f"https://127.0.0.1:{port}/validate-streamapp"},
        }],
    }


def ca_bundle(control_plane, name: str) -> str:
    return control_plane.kubectl("get", "validatingwebhookconfiguration", name, "-o",
                                 "jsonpath={.webhooks[0].clientConfig.caBundle}", check=False).stdout.strip()


def admission_answer(port: int, bundle: str, app: dict) -> dict:
    """An AdmissionReview posted to one replica by a client that trusts only ``bundle``."""
    context = ssl.create_default_context(cadata=base64.b64decode(bundle).decode())
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "0", "kind": {"group": "streamapp.io", "version": "v1alpha1", "kind": "StreamApp"},
        "resource": {"group": "streamapp.io", "version": "v1alpha1", "resource": "streamapps"},
        "operation": "CREATE", "namespace": app["metadata"]["namespace"], "name": app["metadata"]["name"],
        "object": app, "oldObject": None, "dryRun": True, "userInfo": {"username": "test"}}}
    request = urllib.request.Request(f"https://127.0.0.1:{port}/validate-streamapp", data=json.dumps(review).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=context, timeout=10) as response:  # noqa: S310 - our own URL
        return json.loads(response.read())["response"]


def lose_the_lease(cluster, holder: Replica, lease_path: str) -> float:
    """The Lease taken from its holder (as when it could not renew it in time): seconds until the
    holder's process has ended."""

    def steal() -> bool:
        lease = cluster.kube.request("GET", lease_path)
        lease["spec"].update(holderIdentity="someone-else",
                             renewTime=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
        cluster.kube.request("PUT", lease_path, body=lease)  # its resourceVersion: a renewal in between is a 409
        return True

    wait_for("the Lease taken", steal, timeout=10, every=0.1)
    taken_at = time.monotonic()
    wait_for("the replica that lost the Lease stopped", lambda: holder.operator.proc.proc.poll() is not None,
             timeout=LEASE[1] + LEASE[2] + 10, every=0.1)
    assert "lost Lease" in holder.operator.log_text()
    return time.monotonic() - taken_at


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def test_the_leader_killed_five_times_under_load(own_namespace, kafka, control_plane, tmp_path):
    cluster = own_namespace
    ns, topic, webhook = cluster.namespace, unique("lines"), f"streamapp-test-{cluster.namespace}"
    create_topic(kafka.bootstrap, topic, partitions=2)
    apps = [f"app-{i:02d}" for i in range(APPS)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(cluster.pv_for, apps))
    replicas = [Replica(label, tmp_path, ns, control_plane.kubeconfig, f"{ns}/streamapp-operator", webhook,
                        f"{ns}/streamapp-operator-webhook-ca") for label in ("a", "b")]
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(webhook_configuration(webhook, ns, replicas[0].port)))
    watch = DriverWatch(cluster)
    churn = None
    takeovers: list[float] = []
    leaderless: list[tuple[float, float]] = []  # from each kill to another replica leading
    bundles: set[str] = set()

    def leader() -> Replica:
        lease = cluster.kube.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/streamapp-operator")
        holder = lease["spec"].get("holderIdentity")
        return next(r for r in replicas if r.identity == holder)

    def point_webhook_at(replica: Replica) -> None:
        patch = [{"op": "replace", "path": "/webhooks/0/clientConfig/url",
                  "value": f"https://127.0.0.1:{replica.port}/validate-streamapp"}]
        control_plane.kubectl("patch", "validatingwebhookconfiguration", webhook, "--type=json", "-p", json.dumps(patch))

    try:
        for replica in replicas:
            replica.start()
        wait_for("both replicas connected", lambda: all(r.connected() for r in replicas), timeout=60)
        wait_for("the shared CA injected", lambda: ca_bundle(control_plane, webhook), timeout=60)
        wait_for("one replica leading", lambda: sum(r.leads() for r in replicas) == 1, timeout=60)
        manifests = {"apiVersion": "v1", "kind": "List", "items": [
            simple_app(app, ns, kafka.bootstrap, topic, executors=1) for app in apps]}
        wait_for("the apps admitted", lambda: cluster.kubectl("apply", "-f", "-", input=json.dumps(manifests),
                                                              check=False).returncode == 0, timeout=60)
        wait_for("every app's driver running", lambda: all(cluster.running_driver(app) for app in apps) or NotYet(
            f"{sum(1 for app in apps if cluster.running_driver(app))}/{APPS} running"), timeout=180, every=1)
        churn = Churn(cluster, apps)
        for _ in range(KILLS):
            bundles.add(ca_bundle(control_plane, webhook))
            dying = wait_for("a live leader", lambda: leader(), timeout=30)
            survivor = next(r for r in replicas if r is not dying)
            point_webhook_at(survivor)
            time.sleep(1)  # the API server's webhook configuration follows; edits go on through the survivor
            leads_before = sum(r.leads() for r in replicas)
            killed_at = time.monotonic()
            dying.operator.kill()
            dying.start()  # at once, as its Deployment would: it competes for the Lease as a new pod
            wait_for("another replica leading", lambda: sum(r.leads() for r in replicas) > leads_before,
                     timeout=30, every=0.02)
            leaderless.append((killed_at, time.monotonic()))
            takeovers.append(leaderless[-1][1] - killed_at)
            wait_for("the restarted replica connected", dying.connected, timeout=60)
            time.sleep(1)  # edits and failures under the new leader
        # a loaded machine fails fewer drivers per second: churn on until the test has done what it claims
        wait_for("enough driver failures", lambda: churn.failures >= 2 * KILLS or NotYet(f"{churn.failures}"),
                 timeout=120, every=0.5)
        churn.stop()

        def converged() -> bool | NotYet:
            behind = [app for app in apps if not (
                (pod := cluster.running_driver(app))
                and pod["metadata"]["annotations"].get("streamapp.io/executors") == str(churn.executors[app])
                and cluster.status(app).get("phase") == "Running")]
            return not behind or NotYet(f"{len(behind)} apps not on their last spec: {behind[:5]}")

        wait_for("every app on its last spec with a running driver", converged, timeout=180, every=1)
        bundles.add(ca_bundle(control_plane, webhook))
        answers = [admission_answer(r.port, next(iter(bundles)), simple_app("probe", ns, kafka.bootstrap, topic)) for r in replicas]
        lost = lose_the_lease(cluster, leader(), f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/streamapp-operator")
    except BaseException:
        for replica in replicas:
            print(f"replica {replica.label}:\n{replica.operator.log_tail(60)}")
        raise
    finally:
        if churn is not None:
            churn.stop()
        for replica in replicas:
            replica.operator.stop()
        watch.stop()
        control_plane.kubectl("delete", "validatingwebhookconfiguration", webhook, "--wait=false", check=False)

    p50, p99 = statistics.median(takeovers), percentile(takeovers, 0.99)
    print(f"\ntakeover (leader SIGKILLed -> another replica reconciling), {len(takeovers)} kills, lease {LEASE[0]} s / "
          f"renew {LEASE[1]} s / retry {LEASE[2]} s: p50 {p50:.2f} s, p99 {p99:.2f} s (max {max(takeovers):.2f} s); "
          f"{churn.edits} edits, {churn.failures} driver failures, {watch.created} drivers created; a leader whose "
          f"Lease was taken stopped after {lost:.2f} s")
    assert watch.violations == [], watch.violations[:5]
    assert churn.refused == [], churn.refused[:5]
    assert len(bundles) == 1, "the injected CA bundle changed between restarts"
    assert all(a["allowed"] for a in answers), answers
    assert lost < LEASE[1] + LEASE[2] + 1, lost  # within its renew deadline: before another may take the Lease
    assert len(takeovers) == KILLS and p99 < LEASE[0] + LEASE[2] + 2, takeovers  # a lease duration, a retry, slack
    # while no replica led, edits went on through the survivor's webhook
    assert all(any(start <= t <= end for t in churn.admitted) for start, end in leaderless), leaderless
    assert churn.failures >= 2 * KILLS, churn.failures
    for app in apps:
        assert len(cluster.driver_pods(app)) == 1, app
