"""click-sessions on a real cluster: the operator installed by its Helm chart, the example applied,
generated clicks produced to Kafka; the driver and executor pods really run Spark."""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from streamapp_runtime import clickstream
from streamapp_testbed import kafka_admin

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]
NS = "streamapp-e2e"
CLASS = "streamapp-e2e"
VERSION = "0.1.0"
RUN = os.urandom(3).hex()  # topics, volume: fresh names on a cluster (and Kafka) that may be reused
TOPIC, OUT = f"clickstream-{RUN}", f"session-summaries-{RUN}"


def wait_for(what: str, check, timeout: float = 300, every: float = 2.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except Exception as exc:  # not there yet
            last = exc
        time.sleep(every)
    raise AssertionError(f"no {what} after {timeout:.0f}s (last: {last!r})")


def pods(cluster, component: str) -> list[dict]:
    out = cluster.kubectl("get", "pods", "-n", NS, "-l", f"streamapp.io/component={component}", "-o", "json")
    return json.loads(out.stdout)["items"]


def running(cluster, component: str) -> list[dict]:
    return [p for p in pods(cluster, component) if p["status"].get("phase") == "Running"]


@pytest.fixture(scope="module")
def operator(e2e_cluster):
    c = e2e_cluster
    c.kubectl("create", "namespace", NS, check=False)
    c.helm("upgrade", "--install", "streamapp", str(REPO / "charts" / "streamapp-operator"), "-n", NS,
           "--set", f"watchNamespaces={{{NS}}}", "--set", "operator.scaleDebounce=5", "--wait", "--timeout", "5m")
    yield c
    c.kubectl("delete", "streamapps", "--all", "-n", NS, "--wait=true", "--timeout=120s", check=False)
    c.helm("uninstall", "streamapp", "-n", NS)
    c.kubectl("delete", "namespace", NS, "--wait=true", "--timeout=120s", check=False)
    c.kubectl("delete", "pv", f"streamapp-e2e-{RUN}", "--wait=false", check=False)


def app_manifest(c) -> dict:
    app = yaml.safe_load((REPO / "examples" / "click-sessions.yaml").read_text())
    app["metadata"]["namespace"] = NS
    spec = app["spec"]
    spec["kafka"]["bootstrapServers"] = c.kafka_bootstrap
    spec["sources"][0]["topic"] = TOPIC
    spec["sinks"] = [s for s in spec["sinks"] if "kafka" in s]  # Postgres: the operator does not pass its URI yet
    spec["sinks"][0]["kafka"]["topic"] = OUT
    spec["state"]["checkpoint"] = {"size": "1Gi", "accessModes": ["ReadWriteMany"], "storageClassName": CLASS}
    spec["driver"] = {"cores": 1, "memory": "1g"}
    spec["executor"] = {"cores": 1, "memory": "1g"}
    # A 2-core node: executors ask for a quarter of a core.
    spec["sparkConf"] = {"spark.kubernetes.executor.request.cores": "250m"}
    spec["trigger"] = "5s"
    return app


def expected(events: list[clickstream.Click]) -> dict:
    """(session_id, window_start iso) -> (clicks, page_views, time_spent) of every closed window."""
    watermark = max(e.ts for e in events) - timedelta(seconds=30)
    acc = defaultdict(lambda: [0, 0, 0])
    for e in events:
        if e.event in ("click", "page_view"):
            row = acc[(e.session_id, e.uuid, e.ts.replace(second=0, microsecond=0))]
            row[0] += e.event == "click"
            row[1] += e.event == "page_view"
            row[2] += e.time_spent
    return {(s, clickstream.iso(w).replace("000Z", "Z")): tuple(v)
            for (s, _, w), v in acc.items() if w + timedelta(minutes=1) <= watermark}


def summaries(c) -> dict:
    out = {}
    for _, value in kafka_admin.consume_all(c.kafka_bootstrap, OUT, timeout=20):
        v = json.loads(value)
        out[(v["session_id"], v["window_start"])] = (v["clicks"], v["page_views"], v["time_spent"])
    return out


def covers(c, want: dict):
    got = summaries(c)
    missing = {k for k in want if k not in got}
    return not missing and {k: got[k] for k in want} == want or f"{len(missing)} of {len(want)} windows missing"


EVENTS = clickstream.generate(seed=7, users=30, minutes=3)
MORE = clickstream.generate(seed=8, users=30, minutes=3, start=clickstream.START + timedelta(minutes=3))


def test_click_sessions_runs_on_driver_and_executor_pods(operator):
    c = operator
    c.apply({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": f"streamapp-e2e-{RUN}"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": CLASS,
                 "persistentVolumeReclaimPolicy": "Retain",
                 "hostPath": {"path": c.volume_dir(RUN), "type": "Directory"}},
    })  # fmt: skip
    kafka_admin.create_topic(c.kafka_bootstrap, TOPIC, partitions=2)
    kafka_admin.produce(c.kafka_bootstrap, TOPIC, ((e.session_id, e.to_json()) for e in EVENTS))
    c.apply(app_manifest(c))

    driver = wait_for("running driver pod", lambda: running(c, "driver"), timeout=600)
    executors = wait_for("running executor pod", lambda: running(c, "executor"), timeout=600)
    assert executors[0]["spec"]["containers"][0]["image"].endswith(f"streamapp/runtime:{VERSION}")
    assert driver[0]["spec"]["nodeName"]
    wait_for("every closed window in session-summaries", lambda: covers(c, expected(EVENTS)) is True,
             timeout=900, every=10)


def test_driver_pod_force_deleted_new_driver_resumes_from_the_checkpoint(operator):
    c = operator
    old = running(c, "driver")[0]["metadata"]["uid"]
    c.kubectl("delete", "pod", "-n", NS, "-l", "streamapp.io/component=driver", "--grace-period=0", "--force")
    wait_for("a new running driver", lambda: [p for p in running(c, "driver") if p["metadata"]["uid"] != old],
             timeout=600)
    kafka_admin.produce(c.kafka_bootstrap, TOPIC, ((e.session_id, e.to_json()) for e in MORE))
    wait_for("every closed window of both runs", lambda: covers(c, expected(EVENTS + MORE)) is True,
             timeout=900, every=10)
