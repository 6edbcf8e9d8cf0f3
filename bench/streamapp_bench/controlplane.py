"""The control-plane bench: StreamApps applied in batches on the test bed's API server with kwok
nodes; apply → driver pod created, the operator's RSS and CPU, and failure → replacement driver
created after kwok's chaos stage fails drivers, at the first batch and at the full count."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from streamapp_testbed import kafka_admin
from streamapp_testbed.process import ManagedProcess, free_port

from . import engines, measure, profiling

log = logging.getLogger("bench.control")
NAMESPACE = "bench-cp"
DRIVER = "streamapp.io/component=driver"
CRD = engines.REPO_DIR / "crds" / "streamapp.io_streamapps.yaml"


class PodWatch:
    """Times (this process's clock) at which driver pods were first seen, and first seen Failed."""

    def __init__(self, api_client):
        from kubernetes import client

        self.core = client.CoreV1Api(api_client)
        self.added: dict[str, list[tuple[float, str]]] = {}  # app -> [(time, uid)]
        self.failed: dict[str, float] = {}  # uid -> time
        self.phase: dict[str, str] = {}  # uid -> phase
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="pod-watch")

    def start(self) -> "PodWatch":
        self._thread.start()
        return self

    def _run(self) -> None:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        # Each watch is resumed from the last resourceVersion: a fresh one would first replay every
        # driver pod (1,000 of them every few seconds), loading the API server and this process and
        # stamping new pods late. Events stay plain JSON: turning each into a V1Pod costs
        # milliseconds, and a burst of failures (hundreds of events) then stamped later events
        # seconds late, inflating failure → replacement.
        version = None
        while not self._stop.is_set():
            stream = watch.Watch()
            try:
                for event in stream.stream(self.core.list_namespaced_pod, NAMESPACE, label_selector=DRIVER,
                                           resource_version=version, timeout_seconds=10, _request_timeout=30,
                                           deserialize=False):
                    self._seen(event["object"], time.monotonic())
                    version = event["object"]["metadata"].get("resourceVersion") or version
            except ApiException as exc:
                version = None if exc.status == 410 else version  # 410: too old, start over
                time.sleep(0.2)
            except KeyError:  # an ERROR event (410 Gone) in plain JSON trips the client's own check: start over
                version = None
            except Exception as exc:  # noqa: BLE001 - a dropped watch is re-opened
                log.debug("pod watch: %s", exc)
                time.sleep(0.2)

    def _seen(self, pod: dict, now: float) -> None:
        app = (pod["metadata"].get("labels") or {}).get("streamapp.io/app")
        uid = pod["metadata"]["uid"]
        if app is None:
            return
        uids = self.added.setdefault(app, [])
        if uid not in {u for _, u in uids}:
            uids.append((now, uid))
        phase = (pod.get("status") or {}).get("phase")
        self.phase[uid] = phase
        if phase == "Failed" and uid not in self.failed:
            self.failed[uid] = now

    def created(self, app: str) -> float | None:
        return self.added[app][0][0] if self.added.get(app) else None

    def running(self, app: str) -> bool:
        return bool(self.added.get(app)) and self.phase.get(self.added[app][-1][1]) == "Running"

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=20)


def proc_usage(pid: int) -> tuple[float, float]:
    """(RSS in MiB, CPU seconds so far) of a process, from /proc."""
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return rss, cpu


def apiserver_counters(cp) -> tuple[float, float]:
    """(requests served, seconds spent serving them) by the API server so far, watches left out."""
    text = cp.kubectl("get", "--raw", "/metrics").stdout
    count = seconds = 0.0
    for line in text.splitlines():
        if 'verb="WATCH"' in line or 'verb="CONNECT"' in line:
            continue
        if line.startswith("apiserver_request_duration_seconds_sum{"):
            seconds += float(line.rsplit(" ", 1)[1])
        elif line.startswith("apiserver_request_duration_seconds_count{"):
            count += float(line.rsplit(" ", 1)[1])
    return count, seconds


def operator_requests(metrics_url: str) -> dict[str, float]:
    """"VERB resource" -> requests the operator's reconciles sent so far (its own metric); {} unreadable."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(metrics_url, timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return {}
    return {f"{s.labels['verb']} {s.labels['resource']}": s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "streamapp_operator_api_requests_total"}


def _per_app(before: dict[str, float], after: dict[str, float], apps: float) -> dict[str, float]:
    """Requests per app (or app-minute) between two readings, largest first (those under 0.01 left out)."""
    if apps <= 0:
        return {}
    out = {k: round((v - before.get(k, 0)) / apps, 2) for k, v in after.items()}
    return dict(sorted(((k, v) for k, v in out.items() if v >= 0.01), key=lambda kv: -kv[1]))


def app_doc(name: str, bootstrap: str, topic: str) -> dict:
    run = engines.Run(bootstrap, topic, f"{topic}-out", Path("."), "final", 0, 2)
    doc = engines.manifest(run, name)
    doc["metadata"]["namespace"] = NAMESPACE
    doc["spec"]["restartPolicy"] = {"backoff": "1s", "maxBackoff": "10s", "maxRestarts": 0}
    return doc


def pv(app: str) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": f"bench-{app}", "labels": {"streamapp-bench": NAMESPACE}},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": f"/tmp/bench-{app}"},
                     "claimRef": {"namespace": NAMESPACE, "name": f"{app}-checkpoint"}}}


def _wait(what: str, check, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.25)
    log.warning("timed out after %.0fs waiting for %s", timeout, what)
    return False


def _pcts(values: list[float]) -> dict:
    return {"n": len(values), "p50_s": measure.percentile(values, 50), "p99_s": measure.percentile(values, 99),
            "max_s": max(values) if values else None}


def _prepare(bed, nodes: int, pods_per_node: int) -> None:
    cp = bed.control_plane
    extra = []
    for i in range(nodes):
        node = bed.kwok.node(f"bench-node-{i}", cpu="1000", memory="4Ti")
        for key in ("allocatable", "capacity"):
            node["status"][key]["pods"] = str(pods_per_node)
        extra.append(node)
    if extra:
        cp.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": extra}))
    cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    # not `kubectl wait`: it fails outright when asked before the CRD has any status.conditions
    _wait("the StreamApp CRD Established", lambda: "True" == cp.kubectl(
        "get", "crd/streamapps.streamapp.io", "-o", "jsonpath={.status.conditions[?(@.type=='Established')].status}",
        check=False).stdout.strip(), 60)
    cp.kubectl("create", "namespace", NAMESPACE, check=False)


def _operator_ready(bed, kube, watch: PodWatch, operator, liveness: str, topic: str, timeout: float) -> float:
    """Wait as a Deployment's rollout would (kopf's liveness endpoint answers), then until one probe
    app, not measured, has its driver: the operator is watching. Seconds from start to ready."""
    import urllib.request

    began = time.monotonic()

    def live() -> bool:
        try:
            with urllib.request.urlopen(liveness, timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    if not _wait("the operator's liveness endpoint", lambda: live() or not operator.running, timeout) or not operator.running:
        raise RuntimeError(f"the operator did not start:\n{operator.log_tail(20)}")
    bed.control_plane.kubectl("apply", "-f", "-", input=json.dumps(pv("probe")))
    kube.create(app_doc("probe", bed.kafka.bootstrap, topic))
    if not _wait("the probe app's driver", lambda: watch.created("probe"), timeout):
        raise RuntimeError(f"the operator made no driver for the probe app:\n{operator.log_tail(20)}")
    return round(time.monotonic() - began, 2)


def fail_drivers(bed, watch: PodWatch, apps: list[str], timeout: float) -> dict:
    """Fail the running driver of each app through kwok; failure → replacement pod created."""
    _wait("victims Running", lambda: all(watch.running(a) for a in apps), timeout)
    old = {a: watch.added[a][-1][1] for a in apps}
    for app in apps:
        bed.kwok.fail_pod(NAMESPACE, f"{app}-driver")

    def replaced(app: str) -> float | None:
        later = [t for t, uid in watch.added.get(app, []) if uid != old[app] and t > watch.failed.get(old[app], 1e18)]
        return later[0] if later else None

    _wait("replacement drivers", lambda: all(replaced(a) for a in apps), timeout)
    took = {a: replaced(a) - watch.failed[old[a]] for a in apps if replaced(a) and old[a] in watch.failed}
    slowest = sorted(took, key=took.get)[-3:]  # to look up in the operator's log (--keep-workdir)
    return {**_pcts(list(took.values())), "failed_seen": sum(old[a] in watch.failed for a in apps),
            "victims": len(apps), "slowest": {a: round(took[a], 2) for a in slowest}}


# Drivers per large kwok node at most: each node hands its pods addresses from a /24 of its own
# (testbed networks.py), and failed drivers' replacements need room beside them.
PODS_PER_NODE = 200


def run(bed, workdir: Path, total: int = 1000, batch: int = 100, fail: int = 100, nodes: int | None = None,
        settle: float = 30.0, timeout: float = 600.0, profile_seconds: float = 0) -> dict:
    """`profile_seconds` > 0: py-spy samples the operator from the start of the last batch. `nodes`:
    large kwok nodes (default: enough for PODS_PER_NODE drivers each, at least five)."""
    from streamapp_operator.kubeapi import Kube, load_config
    from streamapp_testbed.kube import CONTEXT

    nodes = nodes or max(5, -(-total // PODS_PER_NODE))
    _prepare(bed, nodes, pods_per_node=max(110, total // max(nodes, 1) + 50))
    topic = "cp-clicks"
    kafka_admin.create_topic(bed.kafka.bootstrap, topic, partitions=2)
    api = load_config(str(bed.control_plane.kubeconfig), CONTEXT)
    kube = Kube(api)
    liveness, metrics_port = f"http://127.0.0.1:{free_port()}/healthz", free_port()
    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    argv = [sys.executable, "-m", "streamapp_operator", "--namespace", NAMESPACE, "--metrics-port", str(metrics_port),
            "--metrics-address", "127.0.0.1", "--runtime-image", "streamapp/runtime:bench", "--liveness", liveness]
    env = {**engines.ENV, "KUBECONFIG": str(bed.control_plane.kubeconfig)}
    operator = ManagedProcess("operator", argv, workdir / "operator.log", env=env).start()
    watch = PodWatch(api).start()
    steps, failures, sampler = [], {}, None
    applied: dict[str, float] = {}
    failed_before: set[str] = set()
    try:
        ready_seconds = _operator_ready(bed, kube, watch, operator, liveness, topic, timeout)
        for start in range(0, total, batch):
            names = [f"app-{i:04d}" for i in range(start, min(start + batch, total))]
            bed.control_plane.kubectl("apply", "-f", "-", input=json.dumps(
                {"apiVersion": "v1", "kind": "List", "items": [pv(n) for n in names]}))
            if profile_seconds and start + batch >= total:
                sampler = profiling.start(operator.proc.pid, profile_seconds, workdir / "operator.pyspy")
            _, cpu0 = proc_usage(operator.proc.pid)
            served0, sent0 = apiserver_counters(bed.control_plane), operator_requests(metrics_url)
            began = time.monotonic()
            for name in names:
                kube.create(app_doc(name, bed.kafka.bootstrap, topic))
                applied[name] = time.monotonic()
            _wait(f"{len(names)} drivers", lambda: all(watch.created(n) for n in names) or not operator.running, timeout)
            took = time.monotonic() - began
            rss1, cpu1 = proc_usage(operator.proc.pid)
            served1, sent1 = apiserver_counters(bed.control_plane), operator_requests(metrics_url)
            requests = served1[0] - served0[0]
            lat = [watch.created(n) - applied[n] for n in names if watch.created(n)]
            step = {"apps": start + len(names), **_pcts(lat), "batch_seconds": round(took, 2),
                    "apiserver_requests_per_app": round(requests / len(names), 1),
                    "apiserver_mean_ms": round(1000 * (served1[1] - served0[1]) / requests, 1) if requests else None,
                    "operator_requests_per_app": _per_app(sent0, sent1, len(names)),
                    "rss_mib": round(rss1, 1), "cpu_percent_during_batch": round(100 * (cpu1 - cpu0) / took, 1),
                    "load_1m": round(os.getloadavg()[0], 1)}
            count = start + len(names)
            if count == batch or count == total:
                time.sleep(settle)  # steady state: resync timers of every app, no applies
                rss2, cpu2 = proc_usage(operator.proc.pid)
                # what every app costs while nothing happens, per app and minute
                settled = _per_app(sent1, operator_requests(metrics_url), count * settle / 60)
                step.update(rss_settled_mib=round(rss2, 1), operator_requests_per_app_minute_settled=settled,
                            cpu_percent_settled=round(100 * (cpu2 - cpu1) / (time.monotonic() - began - took), 1))
                # Victims that never failed before: a second failure within STABLE_AFTER doubles the
                # backoff (1 s → 2 s), which would be timed as the operator's latency.
                fresh = [n for n in (f"app-{i:04d}" for i in range(count)) if n not in failed_before]
                victims = fresh[::max(1, len(fresh) // fail)][:fail]
                failed_before.update(victims)
                failures[count] = fail_drivers(bed, watch, victims, timeout)
                log.info("failures at %d apps: %s", count, failures[count])
            steps.append(step)
            log.info("control plane: %s", step)
        rss_peak = max(s.get("rss_settled_mib", s["rss_mib"]) for s in steps)
    finally:
        if sampler is not None:
            try:
                sampler.wait(timeout=profile_seconds + 60)
            except subprocess.TimeoutExpired:
                sampler.kill()
                sampler.wait()
        watch.stop()
        operator.stop()
        bed.control_plane.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
        bed.control_plane.kubectl("delete", "pv", "-l", f"streamapp-bench={NAMESPACE}", "--wait=false", check=False)
    first, last = steps[0], steps[-1]
    grow = lambda a, b: (b / a) if a and b else None  # noqa: E731
    profile = profiling.summarise(workdir / "operator.pyspy") if sampler is not None else None
    return {"profile": profile, "operator_ready_seconds": ready_seconds, "total": total, "batch": batch, "fail": fail, "nodes": nodes + 3, "steps": steps,
            "failures": {str(k): v for k, v in failures.items()}, "rss_peak_mib": rss_peak,
            "growth": {"apply_p99": grow(first["p99_s"], last["p99_s"]),
                       "apply_p50": grow(first["p50_s"], last["p50_s"]),
                       "rss": grow(first.get("rss_settled_mib"), last.get("rss_settled_mib")),
                       "failure_p99": grow(failures.get(first["apps"], {}).get("p99_s"),
                                           failures.get(last["apps"], {}).get("p99_s"))}}
