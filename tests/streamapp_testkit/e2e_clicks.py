"""The click-sessions app of the end-to-end tests: its manifest for the cluster, the generated
clicks produced in rounds, what a correct run outputs, and readers of what it really wrote (the
output topic, the Postgres table, the pods)."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

from streamapp_testbed import clickstream, cluster_apps, kafka_admin
from streamapp_testbed.cluster_apps import round_events
from streamapp_testbed.waiting import NotYet, wait_for
from streamapp_testkit import SHORT_LIVED_JVM_OPTIONS

REPO = Path(__file__).resolve().parents[2]
NS = "streamapp-e2e"
APP = "click-sessions"
CLASS = "streamapp-e2e"
RUN = os.urandom(3).hex()  # topics, table, volume: fresh names on a cluster (and Kafka) that may be reused
TOPIC, OUT, TABLE = f"clickstream-{RUN}", f"session-summaries-{RUN}", f"session_stats_{RUN}"
PG_SECRET = "pg"
TRIGGER = "5s"
# Every JVM of an end-to-end app lives a minute or a few on a few hundred clicks (SHORT_LIVED_JVM_OPTIONS).
# The e2e operator's policy allows these two keys (tests/e2e/conftest.py). The load step keeps the
# defaults: it measures executors keeping up.
SHORT_LIVED_JVMS = dict.fromkeys(("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"),
                                 SHORT_LIVED_JVM_OPTIONS)


def spark_conf(request_cores: str = "250m") -> dict[str, str]:
    """An e2e app's sparkConf: executors that ask for a part of the 2-core node, short-lived JVMs."""
    return {"spark.kubernetes.executor.request.cores": request_cores, **SHORT_LIVED_JVMS}

__all__ = ["round_events"]


# --- the cluster side ----------------------------------------------------------------------------
def latest_counts(cluster, topic: str, expected) -> dict[str, int]:
    """The last ``total`` written per ``value`` to ``topic`` (updates come again after a restore: the last of
    each value counts), once ``expected(latest)`` holds; else the failure says what it was."""
    def read():
        latest: dict[str, int] = {}
        for _key, value in kafka_admin.consume_all(cluster.kafka_bootstrap, topic, timeout=20):
            row = json.loads(value)
            latest[row["value"]] = row["total"]
        return latest if expected(latest) else NotYet(f"{topic}: {latest}")
    return wait_for(f"{topic}'s counts", read, timeout=420, every=5)


def suspend_click_sessions(cluster) -> None:
    """A 2-core node holds one driver: the click-sessions app of the other tests steps aside."""
    cluster.kubectl("patch", "streamapp", APP, "-n", NS, "--type=merge", "-p", '{"spec": {"suspend": true}}',
                    check=False)
    wait_for("no other app's pods", lambda: not running(cluster, "driver") and not running(cluster, "executor"),
             timeout=300, every=2)


def running(cluster, component: str, app: str = APP) -> list[dict]:
    """Pods of the component that run and are not being deleted."""
    return cluster.running(NS, app, component)


def app_object(cluster, app: str = APP) -> dict:
    return cluster.app_object(NS, app)


def new_driver(cluster, old_uid: str, app: str = APP):
    """The running driver pod when it is not the one with `old_uid`, else None."""
    return next((p for p in running(cluster, "driver", app) if p["metadata"]["uid"] != old_uid), None)


def executors_follow(cluster, count: int):
    """True once exactly `count` executor pods run and the app reports `count` executors; else what is seen."""
    executors = running(cluster, "executor")
    status = app_object(cluster).get("status", {})
    if len(executors) == count and status.get("executors") == count and status.get("phase") == "Running":
        return True
    return NotYet(f"{len(executors)} executor pods running, status.executors={status.get('executors')}, "
                  f"phase={status.get('phase')}")


def manifest(kafka_bootstrap: str) -> dict:
    app = cluster_apps.click_sessions_exactly_once(NS, kafka_bootstrap, CLASS, TRIGGER, backoff="2s", topic=TOPIC,
                                                   out=OUT, table=TABLE, dead_letter=f"{APP}-dlq-{RUN}")
    assert [s["postgres"]["secretRef"]["name"] for s in app["spec"]["sinks"] if "postgres" in s] == [PG_SECRET]
    app["spec"]["sparkConf"] |= spark_conf()
    return app


# --- the data ------------------------------------------------------------------------------------
LATE = clickstream.Click("user-late", "user-late-s0", "click", 7, clickstream.START - timedelta(minutes=10))
MALFORMED = "{not json"


def produce(bootstrap: str, events: list[clickstream.Click], extra: tuple[str, ...] = (), topic: str = TOPIC) -> None:
    cluster_apps.produce(bootstrap, topic, events, extra)


def outputs_exact(cluster, events: list[clickstream.Click], topic: str = OUT, table: str = TABLE) -> bool | NotYet:
    """True once the output topic and the table hold exactly the expected windows; else the difference."""
    return cluster_apps.outputs_exact(cluster.kafka_bootstrap, cluster.postgres_dsn, topic, table, events)


class Rounds:
    """The clicks sent to an app of a test's own (its input topic, output topic and table) round by
    round, and the check that both outputs hold exactly the windows they give."""

    def __init__(self, topic: str, out: str, table: str):
        self.topic, self.out, self.table = topic, out, table
        self.sent: list[clickstream.Click] = []

    def produce(self, cluster, n: int) -> None:
        events = round_events(n)
        produce(cluster.kafka_bootstrap, events, topic=self.topic)
        self.sent.extend(events)

    def exact(self, cluster) -> None:
        wait_for("output topic and table equal to the expected windows",
                 lambda: outputs_exact(cluster, self.sent, self.out, self.table), timeout=600, every=5)
