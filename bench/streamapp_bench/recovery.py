"""Recovery on the kind cluster (streamapp_testbed.kind_cluster): how long a StreamApp is down when
its driver dies, against how long it takes to start at all.

The operator is installed by its chart; a click-sessions app (Kafka sink) runs on driver and
executor pods while clicks arrive at a steady rate. Cold start: `kubectl apply` → driver pod
Running → every query of the driver has committed a batch. Then `kills` times: SIGKILL to the
driver's JVM inside the pod (as in the e2e tests) → a replacement driver pod Running → every query
of the replacement has committed a batch. "Committed" is read from the driver's own metrics
(`streamapp_last_batch_timestamp_seconds` per query, set when a batch's progress arrives), at the
pod's address, which this host reaches through its route to the kind node.
Target: kill → first batch ≤ cold start → first batch + one trigger interval. Each start is broken
into phases (recovery_phases.py), drawn as stacked bars in recovery.png."""

from __future__ import annotations

import json
import logging
import os
import re
import statistics
import threading
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

from streamapp_testbed import clickstream
from streamapp_testbed import cluster_apps, kafka_admin, kind_cluster
from streamapp_testbed.cluster_client import ClusterClient
from streamapp_testbed.waiting import wait_for

from . import recovery_phases

log = logging.getLogger("bench.recovery")
NS, APP, CLASS = "streamapp-bench", "click-sessions", "streamapp-bench"
_LAST_BATCH = re.compile(r'^streamapp_last_batch_timestamp_seconds\{[^}]*query="([^"]+)"[^}]*\}\s+(\S+)', re.M)


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
    # progress timestamps are whole milliseconds of the driver's clock: the kind node is a container on
    # this host, with the same clock as ours
    return all(batches.get(q, 0) >= since - 0.001 for q in queries)


def _running(c: ClusterClient, not_uid: str | None = None) -> dict | None:
    """The driver pod, once it runs with an address (and is not the pod of uid `not_uid`)."""
    for pod in c.running(NS, APP, "driver"):
        if pod["metadata"]["uid"] != not_uid and pod["status"].get("podIP"):
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


def run(bed, workdir: Path, kills: int = 3, trigger: str = "5s", rate: float = 20, timeout: float = 900,  # noqa: ARG001
        results: Path | None = None) -> dict:
    with kind_cluster.bed(workdir) as kind:
        result = _measure(kind, kills, trigger, rate, timeout)
    if results is not None:
        starts = [("cold start", result["cold"].get("phases"))]
        starts += [(f"kill {i}", k.get("phases")) for i, k in enumerate(result["restarts"], 1)]
        drawn = [(label, parts) for label, parts in starts if parts]
        if drawn:
            recovery_phases.plot(results / "recovery.png", drawn, f"Driver starts on kind: where the time goes "
                                 f"(trigger {trigger}, {rate:g} clicks/s)")
    return result


def _phases(c: ClusterClient, pod: dict, began: float, committed: float) -> dict[str, float] | None:
    """The start of driver `pod` in phases (recovery_phases), read from the cluster now."""
    name = pod["metadata"]["name"]
    try:
        fresh = json.loads(c.kubectl("get", "pod", "-n", NS, name, "-o", "json").stdout)
        lines = c.kubectl("logs", "-n", NS, name, "-c", "driver", "--timestamps").stdout.splitlines()
    except Exception as exc:  # noqa: BLE001 - the figures stand without their breakdown
        log.warning("no phases for %s: %s", name, exc)
        return None
    return recovery_phases.phases(fresh, lines, began, committed)


def _measure(kind: kind_cluster.KindBed, kills: int, trigger: str, rate: float, timeout: float) -> dict:
    c, bootstrap = kind.client, kind.kafka_bootstrap
    run_id = os.urandom(3).hex()
    topic, volume, volume_dir = f"bench-clicks-{run_id}", f"streamapp-bench-{run_id}", f"/var/tmp/streamapp-bench/{run_id}"
    clicks = Clicks(bootstrap, topic, rate)
    trigger_s = float(trigger.rstrip("s"))
    try:
        c.install_operator(NS, bootstrap, kind.postgres_dsn, values={"operator.resync": "10"})
        c.apply(cluster_apps.hostpath_volume(volume, kind_cluster.node_dir(volume_dir), CLASS))
        kafka_admin.create_topic(bootstrap, topic, partitions=2)
        clicks.start()
        time.sleep(3)
        t0 = time.time()
        app = manifest(bootstrap, topic, trigger)
        queries = query_names(app)
        c.apply(app)
        pod = wait_for("a running driver", lambda: _running(c), timeout, every=0.25)
        t_running = time.time()
        wait_for("the first committed batch", lambda: committed_since(pod["status"]["podIP"], queries, t0), timeout,
                 every=0.25)
        t_committed = time.time()
        cold = {"to_running_s": round(t_running - t0, 2), "to_first_batch_s": round(t_committed - t0, 2),
                "phases": _phases(c, pod, t0, t_committed)}
        log.info("cold start: %s", cold)
        restarts = []
        for i in range(kills):
            time.sleep(3 * trigger_s)  # a few batches in steady state
            pod = _running(c)
            t0 = time.time()
            c.kubectl("exec", "-n", NS, pod["metadata"]["name"], "-c", "driver", "--", "sh", "-c", "kill -9 $(pgrep -x java)")
            new = wait_for("a replacement driver", lambda: _running(c, not_uid=pod["metadata"]["uid"]), timeout,
                           every=0.25)
            t_running = time.time()
            wait_for("the first committed batch of the replacement",
                     lambda: committed_since(new["status"]["podIP"], queries, t0), timeout, every=0.25)
            t_committed = time.time()
            restarts.append({"to_running_s": round(t_running - t0, 2), "to_first_batch_s": round(t_committed - t0, 2),
                             "phases": _phases(c, new, t0, t_committed)})
            log.info("restart %d: %s", i + 1, restarts[-1])
        p50 = statistics.median(r["to_first_batch_s"] for r in restarts)
        return {"cold": cold, "restarts": restarts, "queries": sorted(queries), "trigger_s": trigger_s, "rate": rate, "clicks_sent": clicks.sent,
                "restart_p50_to_first_batch_s": p50, "target_s": round(cold["to_first_batch_s"] + trigger_s, 2),
                "meets": p50 <= cold["to_first_batch_s"] + trigger_s, "restart_backoff": "1s", "cluster": "kind",
                "load_at_end": " ".join(f"{x:.1f}" for x in os.getloadavg())}  # fmt: skip
    finally:
        clicks.stopped.set()
        clicks.join(timeout=30)
        if not kind.created:  # a cluster `make kind-up` left up stays up, without what the bench put in it
            c.uninstall_operator(NS)
            c.kubectl("delete", "pv", volume, "--wait=false", check=False)
            kind_cluster.node("rm", "-rf", volume_dir)
