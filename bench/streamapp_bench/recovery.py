"""Recovery on the real single-node cluster (streamapp_testbed.cluster): how long a StreamApp is
down when its driver dies, against how long it takes to start at all.

The operator is installed by its chart; a click-sessions app (Kafka sink) runs on driver and
executor pods while clicks arrive at a steady rate. Cold start: `kubectl apply` → driver pod
Running → every query of the driver has committed a batch. Then `kills` times: SIGKILL to the
driver's JVM inside the pod (as in the e2e tests) → a replacement driver pod Running → every query
of the replacement has committed a batch. "Committed" is read from the driver's own metrics
(`streamapp_last_batch_timestamp_seconds` per query, set when a batch's progress arrives).
Target: kill → first batch ≤ cold start → first batch + one trigger interval."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import statistics
import subprocess
import threading
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml

from streamapp_testbed import clickstream
from streamapp_testbed import cluster, cluster_apps, kafka_admin
from streamapp_testbed.cluster_client import CHART, RELEASE
from streamapp_testbed.paths import cache_dir, image_tag, installed

log = logging.getLogger("bench.recovery")
NS, APP, CLASS = "streamapp-bench", "click-sessions", "streamapp-bench"
_LAST_BATCH = re.compile(r'^streamapp_last_batch_timestamp_seconds\{[^}]*query="([^"]+)"[^}]*\}\s+(\S+)', re.M)


class Cluster:
    def __init__(self, state: dict):
        self.state = state
        self.kubectl_argv = [str(installed().kube_tool("kubectl")), f"--kubeconfig={state['kubeconfig']}",
                             f"--context={cluster.CONTEXT}"]  # fmt: skip
        self.helm_bin = str(sorted(cache_dir().glob("helm-*/bin/helm"))[-1])

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run([*self.kubectl_argv, *args], input=input, capture_output=True, text=True, timeout=300)
        if check and result.returncode:
            raise RuntimeError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
        return result

    def helm(self, *args: str) -> None:
        subprocess.run([self.helm_bin, f"--kubeconfig={self.state['kubeconfig']}", f"--kube-context={cluster.CONTEXT}",
                        *args], check=True, capture_output=True, timeout=600)  # fmt: skip

    def driver(self) -> dict | None:
        out = self.kubectl("get", "pods", "-n", NS, "-l", f"streamapp.io/app={APP},streamapp.io/component=driver",
                           "-o", "json")  # fmt: skip
        pods = [p for p in json.loads(out.stdout)["items"] if not p["metadata"].get("deletionTimestamp")]
        return pods[0] if pods else None


def query_names(app: dict) -> set[str]:
    from streamapp_api.document import load
    from streamapp_runtime import plan

    return {qp.name for qp in plan.query_plans(load(app), "/ck")}


def committed_since(pod_ip: str, queries: set[str], since: float) -> bool:
    """True when each of `queries` in the driver at `pod_ip` committed a batch that started at or after `since`."""
    try:
        with urllib.request.urlopen(f"http://{pod_ip}:9090/metrics", timeout=2) as resp:
            text = resp.read().decode()
    except OSError:
        return False
    batches = {q: float(v) for q, v in _LAST_BATCH.findall(text)}
    # progress timestamps are whole milliseconds of the driver's clock, the same host clock as ours
    return all(batches.get(q, 0) >= since - 0.001 for q in queries)


def _wait(what: str, check, timeout: float, every: float = 0.25):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"no {what} after {timeout:.0f} s")


def _running(c: Cluster, not_uid: str | None = None) -> dict | None:
    pod = c.driver()
    if pod and pod["status"].get("phase") == "Running" and pod["metadata"]["uid"] != not_uid and pod["status"].get("podIP"):
        return pod
    return None


class Clicks(threading.Thread):
    """Produces clicks at `rate` per second, event time following the wall clock, until stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: float):
        super().__init__(name="bench-clicks", daemon=True)
        self.bootstrap, self.topic, self.rate = bootstrap, topic, rate
        self.stopped = threading.Event()
        self.sent = 0

    def run(self) -> None:
        t0 = time.time()
        while not self.stopped.wait(1.0):
            now = datetime.now(timezone.utc)
            batch = []
            for i in range(int(self.rate)):
                user = f"user-{(self.sent + i) % 200:04d}"
                ts = now - timedelta(seconds=(i % 5) / 5)
                click = clickstream.Click(user, f"{user}-s{int(time.time() - t0) // 120}", "click", 1 + i % 30, ts)
                batch.append((click.session_id, click.to_json()))
            kafka_admin.produce(self.bootstrap, self.topic, iter(batch))
            self.sent += len(batch)


def manifest(bootstrap: str, topic: str, trigger: str) -> dict:
    app = cluster_apps.click_sessions(NS, bootstrap, topic, CLASS, trigger, backoff="1s")
    spec = app["spec"]
    spec["sinks"] = [s for s in spec["sinks"] if "kafka" in s]
    spec["sinks"][0]["kafka"]["topic"] = f"{topic}-out"
    return app


def run(bed, workdir: Path, kills: int = 3, trigger: str = "5s", rate: float = 20, timeout: float = 900) -> dict:  # noqa: ARG001
    started = cluster.read_state() is None
    state = cluster.up()
    c = Cluster(state)
    run_id = os.urandom(3).hex()
    topic, volume = f"bench-clicks-{run_id}", Path(f"/var/tmp/streamapp-bench/{run_id}")
    clicks = Clicks(state["kafka_bootstrap"], topic, rate)
    trigger_s = float(trigger.rstrip("s"))
    try:
        c.kubectl("create", "namespace", NS, check=False)
        c.helm("upgrade", "--install", RELEASE, str(CHART), "-n", NS,
               "--set", f"watchNamespaces={{{NS}}}", "--set", "operator.resync=10", "--set", f"image.tag={image_tag()}",
               "--wait", "--timeout", "5m")  # fmt: skip
        volume.mkdir(parents=True, exist_ok=True)
        volume.chmod(0o777)
        c.kubectl("apply", "-f", "-", input=yaml.safe_dump(
            cluster_apps.hostpath_volume(f"streamapp-bench-{run_id}", str(volume), CLASS)))
        kafka_admin.create_topic(state["kafka_bootstrap"], topic, partitions=2)
        clicks.start()
        time.sleep(3)
        t0 = time.time()
        app = manifest(state["kafka_bootstrap"], topic, trigger)
        queries = query_names(app)
        c.kubectl("apply", "-f", "-", input=yaml.safe_dump(app))
        pod = _wait("running driver", lambda: _running(c), timeout)
        t_running = time.time()
        _wait("first committed batch", lambda: committed_since(pod["status"]["podIP"], queries, t0), timeout)
        cold = {"to_running_s": round(t_running - t0, 2), "to_first_batch_s": round(time.time() - t0, 2)}
        log.info("cold start: %s", cold)
        restarts = []
        for i in range(kills):
            time.sleep(3 * trigger_s)  # a few batches in steady state
            pod = _running(c)
            t0 = time.time()
            c.kubectl("exec", "-n", NS, pod["metadata"]["name"], "-c", "driver", "--", "sh", "-c", "kill -9 $(pgrep -x java)")
            new = _wait("replacement driver", lambda: _running(c, not_uid=pod["metadata"]["uid"]), timeout)
            t_running = time.time()
            _wait("first committed batch of the replacement", lambda: committed_since(new["status"]["podIP"], queries, t0),
                  timeout)
            restarts.append({"to_running_s": round(t_running - t0, 2), "to_first_batch_s": round(time.time() - t0, 2)})
            log.info("restart %d: %s", i + 1, restarts[-1])
        p50 = statistics.median(r["to_first_batch_s"] for r in restarts)
        return {"cold": cold, "restarts": restarts, "queries": sorted(queries), "trigger_s": trigger_s, "rate": rate, "clicks_sent": clicks.sent,
                "restart_p50_to_first_batch_s": p50, "target_s": round(cold["to_first_batch_s"] + trigger_s, 2),
                "meets": p50 <= cold["to_first_batch_s"] + trigger_s, "restart_backoff": "1s",
                "load_at_end": " ".join(f"{x:.1f}" for x in os.getloadavg())}  # fmt: skip
    finally:
        clicks.stopped.set()
        clicks.join(timeout=30)
        try:
            if not started:  # a cluster left up by `make cluster-up`: remove what the bench put in it
                c.kubectl("delete", "streamapps", "--all", "-n", NS, "--wait=true", "--timeout=120s", check=False)
                subprocess.run([c.helm_bin, f"--kubeconfig={state['kubeconfig']}", f"--kube-context={cluster.CONTEXT}",
                                "uninstall", RELEASE, "-n", NS], capture_output=True, timeout=300)  # fmt: skip
                c.kubectl("delete", "namespace", NS, "--wait=true", "--timeout=120s", check=False)
                c.kubectl("delete", "pv", f"streamapp-bench-{run_id}", "--wait=false", check=False)
        finally:
            shutil.rmtree(volume, ignore_errors=True)
            if started:  # down() ends every pod and process; the next up starts afresh
                cluster.down()
