"""Helpers for runtime tests: build manifests, run an app to completion in-process, read topics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

from confluent_kafka import Producer

from streamapp_api import load
from streamapp_runtime.run import runner
from streamapp_runtime.run.settings import Settings
from streamapp_testbed.kafka_admin import read_topic

REPO = Path(__file__).resolve().parents[2]


def app(name: str, spec: dict, bootstrap: str = "kafka:9092") -> object:
    spec = {"kafka": {"bootstrapServers": bootstrap}, **spec}
    return load({"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": name}, "spec": spec})


def run_available_now(spark, the_app, kafka, checkpoint, dsn: str | None = None, spark_conf: dict | None = None,
                      metrics: list | None = None):
    """Run every query of the app with availableNow and return {query name: [progress dicts]};
    ``spark_conf``: the driver's spark.properties beyond the session's; ``metrics`` gets the run's
    Metrics (its Prometheus registry: what the driver's /metrics would answer)."""
    settings = Settings(checkpoint_root=str(checkpoint), kafka_override=kafka.bootstrap, available_now=True,
                        metrics_port=None, postgres_uris={"*": dsn} if dsn else {}, spark_conf=spark_conf or {})
    running = runner.start(spark, the_app, settings, quiet=True, wait_for_topics=False)
    if metrics is not None:
        metrics.append(running.metrics)
    queries = list(running.queries)
    code = runner.supervise(spark, running)
    assert code == 0, [str(q.exception()) for q in queries if q.exception()]
    return {q.name: [json.loads(p.json) if hasattr(p, "json") else p for p in q.recentProgress] for q in queries}


def late_dropped(progress: list[dict]) -> int:
    return sum(int(o.get("numRowsDroppedByWatermark") or 0) for p in progress for o in p.get("stateOperators") or [])


def ts(seconds: float, base: datetime = datetime(2026, 1, 1, tzinfo=timezone.utc)) -> str:
    """An ISO timestamp `seconds` after 2026-01-01T00:00:00Z."""
    return datetime.fromtimestamp(base.timestamp() + seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def produce(bootstrap: str, topic: str, records, timestamps_ms: list[int] | None = None) -> None:
    """(key, value) pairs, values as dicts (JSON), strings, or None; in order, one partition at a time."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i, (key, value) in enumerate(records):
        if isinstance(value, dict):
            value = json.dumps(value)
        kwargs = {"timestamp": timestamps_ms[i]} if timestamps_ms else {}
        producer.produce(topic, key=key, value=value, **kwargs)
    assert producer.flush(60) == 0


def consume(bootstrap: str, topic: str, expect: int | None = None, timeout: float = 20, idle: float = 3,
            to_end: bool = False) -> list[dict]:
    """Every record of a topic as {key, value, headers}, values decoded from JSON when possible: until
    `expect` records came, or (without `expect`) nothing new for `idle` seconds from the start; with
    `to_end`, everything the topic held when the read began (`read_topic`), however it came."""
    out: list[dict] = []
    quiet = None if expect is not None or to_end else idle
    for msg in read_topic(bootstrap, topic, until=expect, idle=quiet, timeout=timeout, after=0, to_end=to_end):
        value = msg.value()
        try:
            value = json.loads(value) if value is not None else None
        except ValueError:
            value = value.decode()
        out.append({"key": msg.key().decode() if msg.key() is not None else None, "value": value,
                    "headers": {k: v.decode() for k, v in (msg.headers() or [])}})
    return out


def read_to_end(bootstrap: str, topic: str, isolation: str = "read_committed", timeout: float = 120) -> list:
    """Every record of ``topic`` as (key, value, headers), values and keys as text, read from the start
    up to the end it has once the writers are done (a transaction a killed writer left open holds
    read_committed readers back until it is fenced or times out: they wait, they do not stop)."""
    def decode(b):
        return b.decode() if b is not None else None

    return [(decode(msg.key()), decode(msg.value()), dict(msg.headers() or []))
            for msg in read_topic(bootstrap, topic, idle=None, timeout=timeout, to_end=True,
                                  config={"isolation.level": isolation})]


def closed_click_windows(events) -> dict:
    """click-sessions computed in plain Python: (session_id, uuid, minute) -> (clicks, page_views,
    time_spent) for every 1-minute window the 30 s watermark has closed."""
    watermark = max(e.ts for e in events) - timedelta(seconds=30)
    acc = defaultdict(lambda: [0, 0, 0])
    for e in events:
        if e.event not in ("click", "page_view"):
            continue
        start = e.ts.replace(second=0, microsecond=0)
        row = acc[(e.session_id, e.uuid, start)]
        row[0] += e.event == "click"
        row[1] += e.event == "page_view"
        row[2] += e.time_spent
    return {k: tuple(v) for k, v in acc.items() if k[2] + timedelta(minutes=1) <= watermark}


def start_run(path, bootstrap: str, checkpoint, log, available_now: bool = False, postgres: str | None = None,
              python: str = sys.executable, **env_vars: str) -> subprocess.Popen:
    """``streamapp run`` of the manifest at ``path`` as a process group of its own (the driver and its
    JVM, so a test can kill both as a pod's death would), its output appended to ``log``; ``python``:
    the interpreter (and so the pyspark) it runs on."""
    command = [str(python), "-m", "streamapp_api", "run", str(path), "--kafka", bootstrap, "--checkpoint",
               str(checkpoint), "--metrics-port", "0"] + (["--postgres", f"pg={postgres}"] if postgres else []) \
        + (["--available-now"] if available_now else [])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(REPO / p) for p in ("crds", "apps", "testbed")), **env_vars}
    return subprocess.Popen(command, env=env, stdout=Path(log).open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def s3_checkpoint(store, doc: dict) -> tuple[str, dict[str, str]]:
    """Put the app's checkpoint on the test bed's S3 server (a bucket of the app's own): its root and
    the environment a run needs (the key pair, as a driver pod gets it from the app's Secret)."""
    bucket = store.create_bucket(doc["metadata"]["name"])
    doc["spec"]["state"]["checkpoint"] = {"location": f"{bucket}/{doc['metadata']['name']}", "s3": {
        "endpoint": store.endpoint, "region": "us-east-1", "pathStyleAccess": True, "secretRef": {"name": "s3"}}}
    return f"{bucket}/{doc['metadata']['name']}/gen-0", store.client_env()


def wait_while_running(predicate, proc: subprocess.Popen, log, timeout: float = 400, what: str = "the condition") -> None:
    """Wait for ``predicate`` (truthy: done) while ``proc`` runs; fail with the end of its log if it
    exits or times out (`wait_for` of `waiting` for waits on no process of the test's own)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, \
            f"streamapp run exited ({proc.returncode}) while waiting for {what}:\n{Path(log).read_text()[-4000:]}"
        assert time.monotonic() < deadline, f"no {what} after {timeout:.0f}s:\n{Path(log).read_text()[-4000:]}"
        time.sleep(0.5)


def produce_in_turn(bootstrap: str, topic: str, events, partitions: int) -> None:
    """Event i to partition i mod ``partitions``: the partitions advance through event time together,
    so the 30 s watermark drops none as late (the plain-Python windows have no late rows)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i, event in enumerate(events):
        producer.produce(topic, key=event.session_id, value=event.to_json(), partition=i % partitions)
    assert producer.flush(60) == 0


def watermark_flush(events):
    """A click ten minutes after the newest event, to produce before a test's final run. Spark keeps the
    watermark a batch used, not the newest event time the batch saw: after a stop, the windows the last
    batch's events would have closed wait for newer data, which a finite test input never brings (seen:
    every window of the last minute missing from one sink, depending on where the stop fell)."""
    from streamapp_testbed import clickstream

    newest = max(e.ts for e in events)
    return clickstream.Click("flush", "flush-s0", "click", 1, newest + timedelta(minutes=10))
