"""A load step on the real cluster (issue 15): an app in `scaling.mode: load` reads a steady trickle
with one executor; the input rate then goes ×16, and the operator, from what the running driver
measures, decides for two executors and has the same driver take them in place: the driver pod is
the same one throughout (same UID, container never restarted), the decision is in status and an
`Autoscale` event, the rescale is recorded as applied in place, and Postgres holds exactly the count
per key the broker acknowledged (nothing lost, nothing counted twice). The app is the autoscale
bench's (streamapp_testbed.load_app); other apps are suspended (a 2-core node holds one driver)."""

from __future__ import annotations

import json

import pytest

from streamapp_testkit.e2e_clicks import CLASS, NS, PG_SECRET, RUN, app_object, running, suspend_click_sessions
from streamapp_testbed.waiting import NotYet, wait_for
from streamapp_testbed import kafka_admin
from streamapp_testbed import cluster_apps
from streamapp_testbed.load_app import PacedProducer, compare, manifest, table_counts

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

APP = "load-step"
TOPIC, TABLE, VOLUME = f"load-step-{RUN}", f"load_step_{RUN}", f"streamapp-e2e-ls-{RUN}"
# One executor keeps up with the base rate on any node. The step must need more than one on any node,
# quiet or busy: below the default target utilisation (0.7) of one executor's rate the operator
# rightly keeps one, and that rate differs between machines and runtime versions. WORK (CPU per
# record) is set so that STEP_RATE stays above one executor's rate with room; the rates it was sized
# on are in the commit messages of this file (git log).
BASE_RATE, STEP_RATE, WORK = 150, 2400, 12000


def rescaled_in_place(c, count: int):
    status = app_object(c, APP).get("status", {})
    last = (status.get("scaling") or {}).get("lastRescale") or {}
    executors = running(c, "executor", APP)
    if last.get("to") == count and last.get("method") == "InPlace" and last.get("appliedTime") \
            and len(executors) == count:
        return status
    return NotYet(f"{len(executors)} executor pods, scaling={status.get('scaling')}")


def batches_flow(c):
    """One executor, and a decision made from what the driver measured at the base rate: its warm-up
    batches are done. A step before that lands in the warm-up, where batches that take the step's
    backlog can keep the warm-up going for longer than the test waits."""
    status = app_object(c, APP).get("status", {})
    scaling = status.get("scaling") or {}
    if status.get("phase") == "Running" and len(running(c, "executor", APP)) == 1 \
            and scaling.get("target") == 1 and "rows/s processed" in scaling.get("reason", ""):
        return status
    return NotYet(f"phase {status.get('phase')}, scaling={status.get('scaling')}")


def drained(c, acked: dict[str, int]):
    rows = compare(acked, table_counts(c.postgres_dsn, TABLE))
    return rows if rows["in_table"] >= rows["produced"] else NotYet(f"{rows}")


def test_a_load_step_scales_the_running_driver_in_place(operator):
    c = operator
    suspend_click_sessions(c)
    c.apply(cluster_apps.hostpath_volume(VOLUME, c.volume_dir(f"ls-{RUN}"), CLASS),
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": PG_SECRET, "namespace": NS},
             "stringData": {"uri": c.postgres_dsn}})
    kafka_admin.create_topic(c.kafka_bootstrap, TOPIC, partitions=4)
    rate = [BASE_RATE]
    producer = PacedProducer(c.kafka_bootstrap, TOPIC, lambda: rate[0])
    producer.start()
    acked: dict[str, int] = {}
    try:
        c.apply(manifest(APP, NS, c.kafka_bootstrap, TOPIC, TABLE, CLASS, rescale="inPlace", work=WORK, trigger="4s",
                         up_window="15s", down_window="10m", executor_cpu="150m", pg_secret=PG_SECRET))
        wait_for("the first driver's measured batches with one executor", lambda: batches_flow(c), timeout=600, every=2)
        c.kubectl("patch", "streamapp", APP, "-n", NS, "--type=merge",
                  "-p", json.dumps({"spec": {"scaling": {"maxExecutors": 2}}}))
        driver = running(c, "driver", APP)[0]
        uid = driver["metadata"]["uid"]

        rate[0] = STEP_RATE
        status = wait_for("two executors in place", lambda: rescaled_in_place(c, 2), timeout=420, every=2)
        rate[0] = BASE_RATE
        now = running(c, "driver", APP)
        assert [p["metadata"]["uid"] for p in now] == [uid], "the driver was replaced"
        assert sum(s.get("restartCount", 0) for s in now[0]["status"].get("containerStatuses") or []) == 0
        assert "lastRestart" not in status, status.get("lastRestart")
        events = [(e["reason"], e["message"]) for e in json.loads(c.kubectl(
            "get", "events", "-n", NS, "--field-selector", f"involvedObject.name={APP}", "-o", "json").stdout)["items"]]
        reasons = [r for r, _ in events]
        assert "Rescaled" in reasons and "RescaleFallback" not in reasons and "Restarting" not in reasons, events
        # the decision in words: what arrives, what is processed, and the way up
        assert any(r == "Autoscale" and "rows/s arrive" in m and "up from 1 to 2" in m for r, m in events), events

        acked = producer.stop()
        assert not producer.errors, producer.errors[:3]
        rows = wait_for("every acknowledged record counted in Postgres", lambda: drained(c, acked), timeout=600, every=5)
        assert (rows["lost"], rows["duplicated"]) == (0, 0), rows
        log = c.kubectl("logs", "-n", NS, driver["metadata"]["name"], "-c", "driver").stdout
        assert "restarted query" not in log and "rescale in place: " in log, log[-3000:]
    finally:
        producer.stop()
        c.kubectl("delete", "streamapp", APP, "-n", NS, "--wait=true", "--timeout=120s", check=False)
        c.kubectl("delete", "pv", VOLUME, "--wait=false", check=False)
