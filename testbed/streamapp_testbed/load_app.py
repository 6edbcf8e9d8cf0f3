"""The load-step app of the kind cluster (issue 15): a StreamApp in `scaling.mode: load` whose
work per record is a CPU knob, the producer that drives it at a rate that can change while it runs,
and the exact check of what it wrote. The autoscale bench and the end-to-end load-step test run this
one app (one place, so both measure the same thing).

The app reads JSON records {key, seq, pad}, spends CPU on each (`sha2(repeat(pad, work), 256)`) and
keeps a count per key, upserted into Postgres. The producer counts what the broker acknowledged per
key, so the table is compared with an exact reference: rows lost (a key's count short) and rows
duplicated (a count over)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

from confluent_kafka import Producer

KEYS = 200  # distinct keys the app counts records of
QUERY = "counts-pg"  # its one query: the Postgres sink


def manifest(name: str, namespace: str, bootstrap: str, topic: str, table: str, storage_class: str, *,
             rescale: str | None, work: int, trigger: str, up_window: str, down_window: str, executor_cpu: str,
             max_executors: int = 1, pg_secret: str = "pg") -> dict:
    """The app, starting at `max_executors` (1 by default: it does not begin at the partition count
    and shrink; raise it once its batches flow). `rescale` None leaves spec.scaling.rescale unset."""
    scaling = {"mode": "load", "minExecutors": 1, "maxExecutors": max_executors, "scaleUpWindow": up_window,
               "scaleDownWindow": down_window}
    if rescale:
        scaling["rescale"] = rescale
    return {
        "apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "kafka": {"bootstrapServers": bootstrap},
            "sources": [{"name": "events", "topic": topic, "format": "json", "startingOffsets": "earliest",
                         "schema": {"key": "string", "seq": "long", "pad": "string"}}],
            "streams": [{"name": "counts", "from": "events", "emit": "updates", "steps": [
                {"withColumns": {"work": f"sha2(repeat(pad, {work}), 256)"}},
                {"aggregate": {"groupBy": ["key"],
                               "columns": {"records": "count(*)", "last_seq": "max(seq)", "digest": "max(work)"}}}]}],
            "sinks": [{"name": QUERY, "from": "counts",
                       "postgres": {"secretRef": {"name": pg_secret}, "table": table, "primaryKey": ["key"]}}],
            "state": {"checkpoint": {"size": "1Gi", "accessModes": ["ReadWriteMany"],
                                     "storageClassName": storage_class}},
            "driver": {"cores": 1, "memory": "1g"},
            "executor": {"cores": 1, "memory": "1g"},
            # a 2-core node holds the driver (1 core asked) and 4 executors only if they ask for little;
            # Spark's REST API tells which executors ran tasks
            "sparkConf": {"spark.kubernetes.executor.request.cores": executor_cpu, "spark.ui.enabled": "true"},
            "trigger": trigger,
            "deadLetter": {"enabled": False},  # one query: the counts
            "restartPolicy": {"backoff": "1s", "maxBackoff": "10s", "maxRestarts": 0},
            "scaling": scaling,
        },
    }  # fmt: skip


class PacedProducer(threading.Thread):
    """Produces `rate()` records per second (in tenths of a second) to `topic`, each
    {"key", "seq", "pad"}; counts what the broker acknowledged, per key: the exact reference."""

    def __init__(self, bootstrap: str, topic: str, rate):
        super().__init__(name="load-app-producer", daemon=True)
        self.topic, self.rate = topic, rate
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        self.stopped = threading.Event()
        self.acked: Counter = Counter()
        self.errors: list[str] = []
        self.sent = 0
        self.per_second: dict[int, int] = {}  # whole second of time.time() -> records produced in it
        self._lock = threading.Lock()

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            with self._lock:
                self.acked[msg.key().decode()] += 1

    def run(self) -> None:
        tick = time.monotonic()
        owed = 0.0
        while not self.stopped.is_set():
            owed += self.rate() / 10
            n, owed = int(owed), owed - int(owed)
            pad = "x" * 64
            for _ in range(n):
                seq = self.sent
                key = f"k-{seq % KEYS:04d}"
                value = json.dumps({"key": key, "seq": seq, "pad": f"{seq:016d}{pad[16:]}"})
                while True:
                    try:
                        self.producer.produce(self.topic, key=key, value=value, on_delivery=self._delivered)
                        break
                    except BufferError:
                        self.producer.poll(0.05)
                self.sent += 1
            second = int(time.time())
            self.per_second[second] = self.per_second.get(second, 0) + n
            self.producer.poll(0)
            tick += 0.1
            time.sleep(max(0.0, tick - time.monotonic()))
        self.producer.flush(60)
        self.producer = None  # its threads end with it: none may reach for the broker once the cluster is gone

    def stop(self) -> dict[str, int]:
        """Stops producing; what the broker acknowledged, per key."""
        self.stopped.set()
        self.join(timeout=90)
        with self._lock:
            return dict(self.acked)


def table_counts(dsn: str, table: str) -> dict[str, int]:
    import psycopg

    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            return dict(conn.execute(f"SELECT key, records FROM {table}").fetchall())
    except psycopg.errors.UndefinedTable:
        return {}


def compare(want: dict[str, int], got: dict[str, int]) -> dict:
    """Rows lost (a key's count short of what was acknowledged) and duplicated (a count over)."""
    lost = sum(max(n - got.get(k, 0), 0) for k, n in want.items())
    duplicated = sum(max(n - want.get(k, 0), 0) for k, n in got.items())
    return {"produced": sum(want.values()), "in_table": sum(got.values()), "lost": lost, "duplicated": duplicated}
