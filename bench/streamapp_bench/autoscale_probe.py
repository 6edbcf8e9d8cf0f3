"""What the autoscale bench reads once a second from a running app (its producer: streamapp_testbed.load_app).

Read: the app's pods (kubectl), its status.scaling, the driver's metrics endpoint and Spark's REST
API (executors that ran tasks), and the lag of the app's consumer group
(``streamapp.<namespace>.<app>.<query>``, committed by the runtime after each batch) against the
topic's newest offsets. Every reading that does not answer is None in the sample, never a guess.
"""

from __future__ import annotations

import json
import time
import urllib.request
from datetime import datetime

from confluent_kafka import Consumer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from streamapp_api import contract


class Probe:
    """One app's per-second readings (see autoscale_analysis for the fields of a sample)."""

    def __init__(self, client, namespace: str, app: str, query: str, bootstrap: str, topic: str, partitions: int,
                 t0: float):
        self.client, self.namespace, self.app, self.t0 = client, namespace, app, t0
        self.query, self.topic, self.partitions = query, topic, partitions
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "enable.auto.commit": False,
                                  "group.id": contract.consumer_group(namespace, app, query)})
        self.spark_app_ids: dict[str, str] = {}  # driver pod UID -> Spark application id

    def close(self) -> None:
        self.consumer.close()

    def _rel(self, epoch: float | None) -> float | None:
        return None if epoch is None else round(epoch - self.t0, 2)

    def lag(self) -> int | None:
        parts = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        try:
            committed = {tp.partition: tp.offset for tp in self.consumer.committed(parts, timeout=2)}
            total = 0
            for p in range(self.partitions):
                _, high = self.consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=2, cached=False)
                total += high - max(committed.get(p, 0), 0)
            return total
        except Exception:  # the broker did not answer in time: no reading
            return None

    def driver_metrics(self, ip: str) -> dict:
        try:
            with urllib.request.urlopen(f"http://{ip}:9090/metrics", timeout=1) as resp:
                text = resp.read().decode()
        except OSError:
            return {}
        names = {contract.METRIC_INPUT_RATE: "input_rate", contract.METRIC_PROCESSED_RATE: "processed_rate",
                 contract.METRIC_BATCH_DURATION: "batch_s", contract.METRIC_EXECUTORS: "registered",
                 contract.METRIC_LAST_BATCH: "last_batch"}
        out = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                key = names.get(sample.name)
                if key and sample.labels.get("query", self.query) == self.query:
                    out[key] = sample.value
        if "last_batch" in out:
            out["last_batch"] = self._rel(out["last_batch"])
        if "registered" in out:
            out["registered"] = int(out["registered"])
        return out

    def executors_with_tasks(self, ip: str, uid: str) -> int | None:
        """Executors (not the driver) active in Spark that have run at least one task."""
        try:
            if uid not in self.spark_app_ids:
                with urllib.request.urlopen(f"http://{ip}:4040/api/v1/applications", timeout=1) as resp:
                    self.spark_app_ids[uid] = json.loads(resp.read())[0]["id"]
            url = f"http://{ip}:4040/api/v1/applications/{self.spark_app_ids[uid]}/executors"
            with urllib.request.urlopen(url, timeout=1) as resp:
                executors = json.loads(resp.read())
        except (OSError, ValueError, IndexError, KeyError):
            return None
        return sum(1 for e in executors if e.get("id") != "driver" and e.get("isActive", True) and e.get("totalTasks", 0) > 0)

    def sample(self, phase: str) -> dict:
        now = time.time()
        s: dict = {"t": round(now - self.t0, 2), "phase": phase, "lag": self.lag()}
        pods = json.loads(self.client.kubectl("get", "pods", "-n", self.namespace, "-l", f"streamapp.io/app={self.app}",
                                              "-o", "json", check=False).stdout or '{"items": []}')["items"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        executors = [p for p in live if p["metadata"]["labels"].get("streamapp.io/component") != "driver"]
        # a driver asked to stop runs on until its batch ends (or its grace period): its metrics still count
        drivers = sorted((p for p in pods if p["metadata"]["labels"].get("streamapp.io/component") == "driver"),
                         key=lambda p: bool(p["metadata"].get("deletionTimestamp")))
        s["pods"] = sum(1 for p in executors if p["status"].get("phase") == "Running")
        s["pending"] = sum(1 for p in executors if p["status"].get("phase") == "Pending")
        driver = next((p for p in drivers if p["status"].get("phase") == "Running"), drivers[0] if drivers else None)
        if driver:
            s["driver_uid"] = driver["metadata"]["uid"]
            s["driver_stopping"] = bool(driver["metadata"].get("deletionTimestamp"))
            statuses = driver["status"].get("containerStatuses") or []
            s["driver_restarts"] = sum(c.get("restartCount", 0) for c in statuses)
            ip = driver["status"].get("podIP")
            if ip and driver["status"].get("phase") == "Running":
                s.update(self.driver_metrics(ip))
                s["with_tasks"] = self.executors_with_tasks(ip, s["driver_uid"])
        got = self.client.kubectl("get", "streamapp", self.app, "-n", self.namespace, "-o", "json", check=False)
        status = json.loads(got.stdout).get("status", {}) if got.returncode == 0 else {}
        scaling = status.get("scaling") or {}
        s["target"] = scaling.get("target")
        s["reason"] = scaling.get("reason")
        decided = scaling.get("lastDecisionTime")
        if decided:
            s["decided_at"] = self._rel(datetime.fromisoformat(decided.replace("Z", "+00:00")).timestamp())
        return s
