"""The click-sessions app of the end-to-end tests: its manifest for the cluster, the generated
clicks produced in rounds, what a correct run outputs, and readers of what it really wrote (the
output topic, the Postgres table, the pods)."""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

from streamapp_testbed import clickstream
from streamapp_testbed import cluster_apps, kafka_admin

REPO = Path(__file__).resolve().parents[2]
NS = "streamapp-e2e"
APP = "click-sessions"
CLASS = "streamapp-e2e"
VERSION = "0.1.0"
RUN = os.urandom(3).hex()  # topics, table, volume: fresh names on a cluster (and Kafka) that may be reused
TOPIC, OUT, TABLE = f"clickstream-{RUN}", f"session-summaries-{RUN}", f"session_stats_{RUN}"
PG_SECRET = "pg"
TRIGGER = "5s"

Key = tuple[str, str]  # (session_id, window_start as the Kafka sink writes it)


def wait_for(what: str, check, timeout: float = 300, every: float = 2.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last is True or (last and not isinstance(last, str)):
                return last
        except Exception as exc:  # not there yet
            last = exc
        time.sleep(every)
    raise AssertionError(f"no {what} after {timeout:.0f}s (last: {last!r})")


# --- the cluster side ----------------------------------------------------------------------------
def pods(cluster, component: str) -> list[dict]:
    out = cluster.kubectl("get", "pods", "-n", NS, "-l", f"streamapp.io/app={APP},streamapp.io/component={component}",
                          "-o", "json")  # fmt: skip
    return json.loads(out.stdout)["items"]


def running(cluster, component: str) -> list[dict]:
    """Pods of the component that run and are not being deleted."""
    return [p for p in pods(cluster, component)
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]


def app_object(cluster) -> dict:
    return json.loads(cluster.kubectl("get", "streamapp", APP, "-n", NS, "-o", "json").stdout)


def new_driver(cluster, old_uid: str):
    """The running driver pod when it is not the one with `old_uid`, else None."""
    return next((p for p in running(cluster, "driver") if p["metadata"]["uid"] != old_uid), None)


def executors_follow(cluster, count: int):
    """True once exactly `count` executor pods run and the app reports `count` executors."""
    executors = running(cluster, "executor")
    status = app_object(cluster).get("status", {})
    if len(executors) == count and status.get("executors") == count and status.get("phase") == "Running":
        return True
    return f"{len(executors)} executor pods running, status.executors={status.get('executors')}, phase={status.get('phase')}"


def manifest(kafka_bootstrap: str) -> dict:
    app = cluster_apps.click_sessions(NS, kafka_bootstrap, TOPIC, CLASS, TRIGGER, backoff="2s")
    for sink in app["spec"]["sinks"]:
        if "kafka" in sink:
            sink["kafka"].update(topic=OUT, delivery="exactly-once")
        else:
            sink["postgres"]["table"] = TABLE
            assert sink["postgres"]["secretRef"]["name"] == PG_SECRET
    app["spec"]["deadLetter"] = {"topic": f"{APP}-dlq-{RUN}", "delivery": "exactly-once"}
    return app


# --- the data ------------------------------------------------------------------------------------
def round_events(n: int) -> list[clickstream.Click]:
    """Round n of clicks: 3 minutes of event time right after round n-1's."""
    return clickstream.generate(seed=100 + n, users=30, minutes=3, start=clickstream.START + timedelta(minutes=3 * n))


LATE = clickstream.Click("user-late", "user-late-s0", "click", 7, clickstream.START - timedelta(minutes=10))
MALFORMED = "{not json"


def produce(bootstrap: str, events: list[clickstream.Click], extra: tuple[str, ...] = ()) -> None:
    records = [(e.session_id, e.to_json()) for e in events] + [("bad", text) for text in extra]
    kafka_admin.produce(bootstrap, TOPIC, iter(records))


def window_key(session_id: str, start: datetime) -> Key:
    return session_id, clickstream.iso(start).replace("000Z", "Z")


def expected(events: list[clickstream.Click]) -> dict[Key, tuple[int, int, int]]:
    """Every window the 30 s watermark has closed: key -> (clicks, page_views, time_spent)."""
    watermark = max(e.ts for e in events) - timedelta(seconds=30)
    acc = defaultdict(lambda: [0, 0, 0])
    for e in events:
        if e.event in ("click", "page_view"):
            row = acc[(e.session_id, e.ts.replace(second=0, microsecond=0))]
            row[0] += e.event == "click"
            row[1] += e.event == "page_view"
            row[2] += e.time_spent
    return {window_key(s, w): tuple(v) for (s, w), v in acc.items() if w + timedelta(minutes=1) <= watermark}


def topic_rows(bootstrap: str) -> dict[Key, tuple[int, int, int]]:
    """The output topic by window, as a read_committed consumer sees it (delivery exactly-once: through
    every driver kill, no window may be there twice)."""
    out: dict = {}
    for _, value in kafka_admin.consume_all(bootstrap, OUT, timeout=20):
        v = json.loads(value)
        key, row = (v["session_id"], v["window_start"]), (v["clicks"], v["page_views"], v["time_spent"])
        assert key not in out, f"window {key} written twice: as {out[key]} and as {row}"
        out[key] = row
    return out


def table_rows(dsn: str) -> dict[Key, tuple[int, int, int]]:
    import psycopg

    with psycopg.connect(dsn, connect_timeout=5) as conn:
        rows = conn.execute(f"SELECT session_id, window_start, clicks, page_views, time_spent FROM {TABLE}").fetchall()
    return {window_key(s, w.astimezone(timezone.utc)): (c, p, t) for s, w, c, p, t in rows}


def same(name: str, got: dict, want: dict):
    """True when equal, else a short account of the difference (for wait_for's message)."""
    if got == want:
        return True
    missing, extra = want.keys() - got.keys(), got.keys() - want.keys()
    wrong = [k for k in want.keys() & got.keys() if got[k] != want[k]]
    return f"{name}: {len(missing)} of {len(want)} windows missing, {len(extra)} unexpected, {len(wrong)} differ"


def outputs_exact(cluster, events: list[clickstream.Click]):
    want = expected(events)
    topic = same("topic", topic_rows(cluster.kafka_bootstrap), want)
    if topic is not True:
        return topic
    return same("table", table_rows(cluster.postgres_dsn), want)
