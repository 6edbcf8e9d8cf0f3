"""Rescale in place on a real cluster (issue 15 §1): click-sessions with exactly-once sinks, `kubectl
scale` 2 → 1 → 2 → 1 executors while clicks keep coming. The driver pod is the same one throughout
(same UID, its container never restarted), no query is ever restarted, the executors follow (Spark
asks for new pods; the surplus is decommissioned and its pod goes), each rescale is recorded as in
place and applied, and both sinks hold exactly the windows a correct run gives. Runs on its own app
(the click-sessions app of test_click_sessions.py, if there, is suspended: a 2-core node holds one
driver)."""

from __future__ import annotations

import pytest

from streamapp_testkit.e2e_clicks import CLASS, NS, PG_SECRET, RUN, TRIGGER, Rounds, app_object, running, suspend_click_sessions
from streamapp_testbed.waiting import NotYet, wait_for
from streamapp_testbed import cluster_apps, kafka_admin

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

APP = "click-sessions-rescale"
TOPIC, OUT, TABLE = f"clickstream-rs-{RUN}", f"session-summaries-rs-{RUN}", f"session_stats_rs_{RUN}"
ROUNDS = Rounds(TOPIC, OUT, TABLE)


def follows(c, count: int):
    """True once `count` executor pods run, the driver reports `count` applied and the rescale is
    recorded as applied in place."""
    executors = running(c, "executor", APP)
    status = app_object(c, APP).get("status", {})
    last = (status.get("scaling") or {}).get("lastRescale") or {}
    if len(executors) == count and status.get("executors") == count and last.get("to") == count \
            and last.get("method") == "InPlace" and last.get("appliedTime"):
        return status
    return NotYet(f"{len(executors)} executor pods, status.executors={status.get('executors')}, lastRescale={last}")


def the_driver(c) -> dict:
    pods = running(c, "driver", APP)
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    return pods[0]


def driver_log(c, pod: dict) -> str:
    return c.kubectl("logs", "-n", NS, pod["metadata"]["name"], "-c", "driver").stdout


def restart_count(pod: dict) -> int:
    return sum(s.get("restartCount", 0) for s in pod["status"].get("containerStatuses") or [])


def test_kubectl_scale_changes_the_executors_of_the_running_driver_in_place(operator):
    c = operator
    suspend_click_sessions(c)
    c.apply(cluster_apps.hostpath_volume(f"streamapp-e2e-rs-{RUN}", c.volume_dir(f"rs-{RUN}"), CLASS),
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": PG_SECRET, "namespace": NS},
             "stringData": {"uri": c.postgres_dsn}})
    kafka_admin.create_topic(c.kafka_bootstrap, TOPIC, partitions=2)
    app = cluster_apps.click_sessions_exactly_once(NS, c.kafka_bootstrap, CLASS, TRIGGER, backoff="2s", topic=TOPIC,
                                                   out=OUT, table=TABLE, dead_letter=f"{APP}-dlq-{RUN}")
    app["metadata"]["name"] = APP
    ROUNDS.produce(c, 0)
    try:
        c.apply(app)
        wait_for("2 executors", lambda: len(running(c, "executor", APP)) == 2
                 and app_object(c, APP).get("status", {}).get("phase") == "Running", timeout=600, every=2)
        ROUNDS.exact(c)
        driver = the_driver(c)
        uid = driver["metadata"]["uid"]
        started = driver_log(c, driver).count("started query")
        assert started >= 2

        for n, count in enumerate((1, 2, 1), start=1):
            c.kubectl("scale", "streamapp", APP, "-n", NS, f"--replicas={count}")
            ROUNDS.produce(c, n)  # while it rescales
            status = wait_for(f"{count} executors in place", lambda: follows(c, count), timeout=300, every=2)
            ROUNDS.exact(c)
            now = the_driver(c)
            assert now["metadata"]["uid"] == uid, "the driver was replaced"
            assert restart_count(now) == 0, "the driver's container restarted"
            assert "lastRestart" not in status, status.get("lastRestart")

        log = driver_log(c, driver)
        assert "restarted query" not in log and log.count("started query") == started, "a query was restarted"
        assert log.count("rescale in place: ") >= 3, log[-3000:]
        events = c.kubectl("get", "events", "-n", NS, "--field-selector", f"involvedObject.name={APP}",
                           "-o", "jsonpath={range .items[*]}{.reason}{' '}{end}").stdout.split()  # fmt: skip
        assert "Rescaled" in events and "RescaleFallback" not in events and "Restarting" not in events, events
    finally:
        c.kubectl("delete", "streamapp", APP, "-n", NS, "--wait=true", "--timeout=120s", check=False)
        c.kubectl("delete", "pv", f"streamapp-e2e-rs-{RUN}", "--wait=false", check=False)
