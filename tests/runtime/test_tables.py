"""Parquet and Delta table sinks through `streamapp run`: windows with emit: final appended to both,
partitioned by a column; a Delta upsert by key; and a replayed batch (its commit removed from the
checkpoint, as a crash between the write and the commit leaves it) that changes no table. Everything
read back without Spark (streamapp_testkit.tables) and compared with the same pipeline in plain Python.
The kill -9s are in test_restart.py."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime, timedelta, timezone

import pytest
import yaml

from streamapp_testkit.runtime import produce, start_run
from streamapp_testkit.tables import TableFiles, delta_log, delta_rows, parquet_rows, utc
from streamapp_testbed.kafka_admin import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]
BASE = datetime(2026, 1, 1, tzinfo=timezone.utc)
WATERMARK_S = 30
QUERIES = {"parquet": "totals-parquet", "append": "totals-delta", "upsert": "latest-delta"}


def manifest(name: str, topic: str) -> dict:
    spec = {
        "kafka": {"bootstrapServers": "kafka:9092"},
        "sources": [{"name": "events", "topic": topic, "format": "json", "startingOffsets": "earliest",
                     "maxOffsetsPerTrigger": 5, "eventTime": "ts", "watermark": f"{WATERMARK_S}s",
                     "schema": {"user": "string", "region": "string", "amount": "long", "ts": "timestamp"}}],
        "streams": [
            {"name": "totals", "from": "events", "emit": "final", "steps": [
                {"window": {"type": "tumbling", "size": "1m"}},
                {"aggregate": {"groupBy": ["region"], "columns": {"n": "count(*)", "total": "sum(amount)"}}}]},
            {"name": "latest", "from": "events", "steps": [{"select": ["user", "region", "amount"]}]},
        ],
        "sinks": [
            {"name": QUERIES["parquet"], "from": "totals", "parquet": {"path": "totals/parquet", "partitionBy": ["region"]}},
            {"name": QUERIES["append"], "from": "totals", "delta": {"path": "totals/delta", "partitionBy": ["region"]}},
            {"name": QUERIES["upsert"], "from": "latest", "delta": {"path": "latest", "mode": "upsert", "key": ["user"]}},
        ],
    }
    return {"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": name}, "spec": spec}


def event(user: str, region: str, amount: int, seconds: float) -> dict:
    return {"user": user, "region": region, "amount": amount, "ts": (BASE + timedelta(seconds=seconds)).isoformat()}


def closed_totals(events: list[dict]) -> Counter:
    """(window start, region, n, total) of every 1-minute window the watermark has closed."""
    times = [datetime.fromisoformat(e["ts"]) for e in events]
    watermark = max(times) - timedelta(seconds=WATERMARK_S)
    acc: dict = defaultdict(lambda: [0, 0])
    for e, t in zip(events, times):
        acc[(t.replace(second=0), e["region"])][0] += 1
        acc[(t.replace(second=0), e["region"])][1] += e["amount"]
    return Counter((start, region, n, total) for (start, region), (n, total) in acc.items()
                   if start + timedelta(minutes=1) <= watermark)


def as_totals(rows: list[dict]) -> Counter:
    return Counter((utc(r["window_start"]), r["region"], r["n"], r["total"]) for r in rows)


def run_to_end(path, kafka, checkpoint, log) -> None:
    run = start_run(path, kafka.bootstrap, checkpoint, log, available_now=True)
    assert run.wait(400) == 0, log.read_text()[-4000:]


def test_windows_append_to_parquet_and_delta_and_an_upsert_merges_by_key_once(kafka, names, tmp_path):
    topic = names("in")
    create_topic(kafka.bootstrap, topic, partitions=1)
    first = [event(f"u{i}", f"r{i % 3}", i, i * 15) for i in range(10)] + [event("flush-1", "r0", 0, 600)]
    second = [event(f"u{i}", f"r{i % 3}", 100 + i, 1200 + i * 10) for i in range(5)] + [event("flush-2", "r1", 0, 1800)]
    path, checkpoint, log = tmp_path / "app.yaml", tmp_path / "checkpoint", tmp_path / "run.log"
    path.write_text(yaml.safe_dump(manifest(names("tables")[:40].rstrip("-"), topic)))
    tables = tmp_path / "tables"  # relative paths: beside the checkpoint root, under the app's own storage
    parquet, appended, upserted = (TableFiles(str(tables / p)) for p in ("totals/parquet", "totals/delta", "latest"))

    produce(kafka.bootstrap, topic, [(e["user"], e) for e in first])
    run_to_end(path, kafka, checkpoint, log)
    assert as_totals(parquet_rows(parquet)) == as_totals(delta_rows(appended)) == closed_totals(first)
    assert {p.split("/")[0] for p in delta_log(appended).files} == {"region=r0", "region=r1", "region=r2"}
    assert {r["user"]: r["amount"] for r in delta_rows(upserted)} == {e["user"]: e["amount"] for e in first}

    # A crash after a batch's write and before its commit: each query's last commit removed, the batch
    # runs again on the next start, and must change no table.
    for query in QUERIES.values():
        commits = sorted((checkpoint / query / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
        commits[-1].unlink()
    merges_before = delta_log(upserted)
    produce(kafka.bootstrap, topic, [(e["user"], e) for e in second])
    run_to_end(path, kafka, checkpoint, log)

    everything = first + second
    got_parquet, got_delta = as_totals(parquet_rows(parquet)), as_totals(delta_rows(appended))
    assert got_parquet == got_delta == closed_totals(everything), (got_parquet - closed_totals(everything),
                                                                   closed_totals(everything) - got_parquet)
    latest = {e["user"]: e["amount"] for e in everything}
    assert {r["user"]: r["amount"] for r in delta_rows(upserted)} == latest
    assert len(delta_rows(upserted)) == len(latest)
    merged = delta_log(upserted)
    # One commit per batch, each tagged (query id, batch id) once: the replayed batch committed nothing.
    assert len(merged.transactions) == len(set(merged.transactions)) == len(merged.operations)
    replayed = max(v for _, v in merges_before.transactions)
    assert [v for _, v in merged.transactions].count(replayed) == 1
    assert set(merged.operations) <= {"WRITE", "MERGE"} and merged.operations[0] == "WRITE"
