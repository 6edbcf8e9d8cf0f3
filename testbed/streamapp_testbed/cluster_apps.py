"""StreamApps and checkpoint volumes shaped for the kind cluster's one node, the clicks they read
and what a correct run of them writes: what the end-to-end tests, the recovery bench and
`make demo` run (one place, so all three run the same app)."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timedelta, timezone

import yaml

from . import clickstream, kafka_admin
from .paths import REPO_DIR
from .waiting import NotYet


def click_sessions(namespace: str, kafka_bootstrap: str, topic: str, storage_class: str, trigger: str,
                   backoff: str) -> dict:
    """examples/click-sessions.yaml reading `topic`, with its checkpoint on a ReadWriteMany volume of
    `storage_class` and driver and executors small enough for a 2-core node. Sinks are the example's;
    the caller points them where it reads."""
    app = yaml.safe_load((REPO_DIR / "examples" / "click-sessions.yaml").read_text())
    app["metadata"]["namespace"] = namespace
    spec = app["spec"]
    spec["kafka"]["bootstrapServers"] = kafka_bootstrap
    spec["sources"][0]["topic"] = topic
    spec["state"]["checkpoint"] = {"size": "1Gi", "accessModes": ["ReadWriteMany"], "storageClassName": storage_class}
    spec["driver"] = {"cores": 1, "memory": "1g"}
    spec["executor"] = {"cores": 1, "memory": "1g"}
    # A 2-core node: executors ask for a quarter of a core.
    spec["sparkConf"] = {"spark.kubernetes.executor.request.cores": "250m"}
    spec["trigger"] = trigger
    spec["restartPolicy"] = {"backoff": backoff, "maxBackoff": "10s", "maxRestarts": 0}
    return app


def hostpath_volume(name: str, path: str, storage_class: str) -> dict:
    """A static ReadWriteMany PersistentVolume on a directory of the node (kept when its claim goes)."""
    return {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": storage_class,
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": path, "type": "Directory"}},
    }  # fmt: skip


def click_sessions_exactly_once(namespace: str, kafka_bootstrap: str, storage_class: str, trigger: str, backoff: str,
                                *, topic: str, out: str, table: str, dead_letter: str) -> dict:
    """click_sessions reading `topic` and writing topic `out` and table `table`, both Kafka topics
    (the output and the dead letters) with delivery exactly-once: a window there twice is a fault."""
    app = click_sessions(namespace, kafka_bootstrap, topic, storage_class, trigger, backoff=backoff)
    for sink in app["spec"]["sinks"]:
        if "kafka" in sink:
            sink["kafka"].update(topic=out, delivery="exactly-once")
        else:
            sink["postgres"]["table"] = table
    app["spec"]["deadLetter"] = {"topic": dead_letter, "delivery": "exactly-once"}
    return app


# --- the clicks and the windows a correct run writes -----------------------------------------------
Key = tuple[str, str]  # (session_id, window_start as the Kafka sink writes it)
Row = tuple[int, int, int]  # clicks, page_views, time_spent


def round_events(n: int) -> list[clickstream.Click]:
    """Round n of clicks: 3 minutes of event time right after round n-1's."""
    return clickstream.generate(seed=100 + n, users=30, minutes=3, start=clickstream.START + timedelta(minutes=3 * n))


def produce(bootstrap: str, topic: str, events: list[clickstream.Click], extra: tuple[str, ...] = ()) -> None:
    records = [(e.session_id, e.to_json()) for e in events] + [("bad", text) for text in extra]
    kafka_admin.produce(bootstrap, topic, iter(records))


def window_key(session_id: str, start: datetime) -> Key:
    return session_id, clickstream.iso(start).replace("000Z", "Z")


def expected(events: list[clickstream.Click]) -> dict[Key, Row]:
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


def topic_rows(bootstrap: str, topic: str) -> dict[Key, Row]:
    """The output topic by window, as a read_committed consumer sees it (delivery exactly-once: through
    every driver kill, no window may be there twice)."""
    out: dict = {}
    for _, value in kafka_admin.consume_all(bootstrap, topic, timeout=20):
        v = json.loads(value)
        key, row = (v["session_id"], v["window_start"]), (v["clicks"], v["page_views"], v["time_spent"])
        assert key not in out, f"window {key} written twice: as {out[key]} and as {row}"
        out[key] = row
    return out


def table_rows(dsn: str, table: str) -> dict[Key, Row]:
    import psycopg

    with psycopg.connect(dsn, connect_timeout=5) as conn:
        rows = conn.execute(f"SELECT session_id, window_start, clicks, page_views, time_spent FROM {table}").fetchall()
    return {window_key(s, w.astimezone(timezone.utc)): (c, p, t) for s, w, c, p, t in rows}


def same(name: str, got: dict, want: dict) -> bool | NotYet:
    """True when equal, else NotYet with a short account of the difference (for wait_for's message)."""
    if got == want:
        return True
    missing, extra = want.keys() - got.keys(), got.keys() - want.keys()
    wrong = [k for k in want.keys() & got.keys() if got[k] != want[k]]
    return NotYet(f"{name}: {len(missing)} of {len(want)} windows missing, {len(extra)} unexpected, "
                  f"{len(wrong)} differ")


def outputs_exact(bootstrap: str, dsn: str, topic: str, table: str, events: list[clickstream.Click]):
    """True when the output topic and the table both hold exactly the windows a correct run gives."""
    want = expected(events)
    got = same("topic", topic_rows(bootstrap, topic), want)
    if got is not True:
        return got
    return same("table", table_rows(dsn, table), want)
