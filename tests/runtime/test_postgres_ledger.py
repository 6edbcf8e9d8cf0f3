"""The Postgres sink's batch ledger on real Kafka, Spark and Postgres: a new checkpoint (a state reset,
a checkpoint deleted by hand, a second app on the same table) writes all its output, and a batch
replayed on the same checkpoint writes nothing twice, is logged and counted (on a volume and on the
test bed's S3 server).

Expected tables are computed here in plain Python: one row per user and closed 1-minute window, where a
window is closed once the newest event time minus the 30 s watermark has passed its end.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections import defaultdict
from pathlib import Path

import psycopg
import pytest

from streamapp_testkit.runtime import app, produce, ts
from streamapp_api import checkpoint as locations
from streamapp_runtime.checkpoint import files as checkpoint_files
from streamapp_runtime.run import runner
from streamapp_runtime.run.metrics import progress_line
from streamapp_runtime.run.settings import Settings
from streamapp_runtime.sinks.postgres import BATCHES
from streamapp_testbed.kafka_admin import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]
WATERMARK_S = 30


def manifest(name: str, topic: str, table: str, total: str = "sum(amount)") -> object:
    return app(name, {
        "sources": [{"name": "payments", "topic": topic, "schema": {"user": "string", "amount": "long", "ts": "timestamp"},
                     "eventTime": "ts", "watermark": f"{WATERMARK_S}s", "maxOffsetsPerTrigger": 40}],
        "streams": [{"name": "per-minute", "from": "payments", "emit": "final",
                     "steps": [{"window": {"type": "tumbling", "size": "1m"}},
                               {"aggregate": {"groupBy": ["user"], "columns": {"total": total}}}]}],
        "sinks": [{"from": "per-minute", "postgres": {"secretRef": {"name": "pg"}, "table": table,
                                                      "primaryKey": ["user", "window_start"]}}],
    })


def events(users: list[str], minutes: range) -> list[dict]:
    """Three payments per user and minute, amounts that differ per user, minute and record."""
    return [{"user": u, "amount": 1 + i + 10 * m + 100 * k, "ts": ts(60 * m + 15 * i)}
            for m in minutes for k, u in enumerate(users) for i in range(3)]


def closed_windows(payments: list[dict], factor: int = 1) -> dict[tuple[str, str], int]:
    newest = max(p["ts"] for p in payments)
    minute_of = {p["ts"]: p["ts"][:16] for p in payments}
    watermark = ts(_seconds(newest) - WATERMARK_S)
    totals: dict = defaultdict(int)
    for p in payments:
        totals[(p["user"], minute_of[p["ts"]])] += p["amount"] * factor
    return {k: v for k, v in totals.items() if ts(_seconds(k[1] + ":00.000000Z") + 60) <= watermark}


def _seconds(iso: str) -> float:
    from datetime import datetime
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() - datetime.fromisoformat("2026-01-01T00:00:00+00:00").timestamp()


def run(spark, the_app, kafka, checkpoint: Path | str, dsn: str):
    """Run every query available-now; the Metrics of the run and its progress per query."""
    settings = Settings(checkpoint_root=str(checkpoint), kafka_override=kafka.bootstrap, available_now=True,
                        metrics_port=None, postgres_uris={"*": dsn})
    running = runner.start(spark, the_app, settings, quiet=True, wait_for_topics=False)
    queries = list(running.queries)
    assert runner.supervise(spark, running) == 0, [str(q.exception()) for q in queries if q.exception()]
    return running.metrics


@pytest.fixture
def database(postgres):
    """A database of its own per test, so its batch ledger holds only the test's rows."""
    name = f"ledger_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield postgres.dsn.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def table_rows(dsn: str, table: str) -> dict[tuple[str, str], int]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f'SELECT "user", window_start, total FROM {table}').fetchall()
    return {(u, w.strftime("%Y-%m-%dT%H:%M")): t for u, w, t in rows}


def test_a_state_reset_rewrites_every_window_and_writes_the_new_ones(spark, kafka, database, names, tmp_path):
    topic, table = names("payments"), "per_minute"
    create_topic(kafka.bootstrap, topic, partitions=2)
    before = events(["ana", "bo", "cy", "di"], range(0, 8))
    produce(kafka.bootstrap, topic, [(e["user"], e) for e in before])
    run(spark, manifest("totals", topic, table), kafka, tmp_path / "gen-1", database)
    assert table_rows(database, table) == closed_windows(before)

    # The aggregate is corrected, an incompatible change: a new resetNonce means a fresh checkpoint.
    after = events(["ana", "bo", "cy", "di"], range(8, 12))
    produce(kafka.bootstrap, topic, [(e["user"], e) for e in after])
    metrics = run(spark, manifest("totals", topic, table, total="sum(amount) * 10"), kafka, tmp_path / "gen-2", database)
    want = closed_windows(before + after, factor=10)
    assert len(want) > len(closed_windows(before)) > 20
    assert table_rows(database, table) == want  # old windows corrected, the new ones written
    assert sum(t["skipped"] for t in metrics.totals.values()) == 0


def test_a_second_app_on_the_same_table_writes_its_own_windows(spark, kafka, database, names, tmp_path):
    """Two copies of one app (same name, so the same query name), each on its own topic and checkpoint:
    say one per region, both writing one table."""
    table = "per_minute"
    written = {}
    for region, users in (("east", ["ana", "bo"]), ("west", ["cy", "di"])):
        topic = names(region)
        create_topic(kafka.bootstrap, topic, partitions=2)
        payments = events(users, range(0, 6))
        produce(kafka.bootstrap, topic, [(e["user"], e) for e in payments])
        run(spark, manifest("totals", topic, table), kafka, tmp_path / region, database)
        written.update(closed_windows(payments))
    assert table_rows(database, table) == written


def test_a_checkpoint_deleted_by_hand_starts_over_and_writes_everything(spark, kafka, database, names, tmp_path):
    topic, table = names("payments"), "per_minute"
    create_topic(kafka.bootstrap, topic, partitions=2)
    first = events(["ana", "bo", "cy"], range(0, 6))
    produce(kafka.bootstrap, topic, [(e["user"], e) for e in first])
    checkpoint = tmp_path / "checkpoint"
    run(spark, manifest("totals", topic, table), kafka, checkpoint, database)
    shutil.rmtree(checkpoint)
    with psycopg.connect(database) as conn:  # someone also emptied the table, to rebuild it
        conn.execute(f"DELETE FROM {table}")
    second = events(["ana", "bo", "cy"], range(6, 9))
    produce(kafka.bootstrap, topic, [(e["user"], e) for e in second])
    run(spark, manifest("totals", topic, table), kafka, checkpoint, database)
    assert table_rows(database, table) == closed_windows(first + second)


def on_s3(spark, store, name: str) -> str:
    """A checkpoint root in a bucket of its own on the test bed's S3 server, which this test's Spark
    reaches as a driver does (the key pair in the session's Hadoop settings: tests only; a pod gets it
    from the app's Secret)."""
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in store.spark_conf().items():
        hadoop.set(key.removeprefix("spark.hadoop."), value)
    return locations.checkpoint_root(f"{store.create_bucket(name)}/{name}", None)


def delete_file(location: str, store) -> None:
    """Delete one file of a checkpoint by hand: on the volume with Hadoop's checksum of it, on S3 the object."""
    if store is None:
        path = Path(checkpoint_files.local_path(location))
        path.unlink()
        (path.parent / f".{path.name}.crc").unlink(missing_ok=True)
    else:
        bucket, key = location.removeprefix("s3a://").split("/", 1)
        store.delete(bucket, key)


@pytest.mark.parametrize("store", ["volume", "s3"])
def test_a_replayed_batch_writes_nothing_twice_and_says_so(spark, kafka, database, names, tmp_path, caplog, store,
                                                           request):
    topic, table = names("payments"), "per_minute"
    create_topic(kafka.bootstrap, topic, partitions=2)
    payments = events(["ana", "bo", "cy", "di"], range(0, 6))
    produce(kafka.bootstrap, topic, [(e["user"], e) for e in payments])
    object_store = request.getfixturevalue("object_store") if store == "s3" else None
    checkpoint = on_s3(spark, object_store, f"ledger-{uuid.uuid4().hex[:8]}") if object_store else str(tmp_path / "checkpoint")
    the_app = manifest("totals", topic, table)
    run(spark, the_app, kafka, checkpoint, database)
    # A crash after the sink wrote a batch but before Spark recorded its commit: the batch runs again.
    commits_dir = locations.join(locations.query_checkpoint(checkpoint, the_app.spec.sinks[0].query_name), "commits")
    commits = sorted((int(n) for n in checkpoint_files.names(commits_dir) if n.isdigit()))
    with psycopg.connect(database) as conn:
        ledger_batches = {b for (b,) in conn.execute(f"SELECT DISTINCT batch_id FROM {BATCHES}")}
        conn.execute(f"UPDATE {table} SET total = -1")  # so a second write would show
    last_written = max(b for b in commits if b in ledger_batches)
    for batch in commits:
        if batch >= last_written:
            delete_file(locations.join(commits_dir, str(batch)), object_store)
    caplog.set_level(logging.WARNING, logger="streamapp.runtime")
    metrics = run(spark, the_app, kafka, checkpoint, database)
    query = next(iter(metrics.totals))
    assert metrics.totals[query]["skipped"] >= 1
    assert "already written by this checkpoint" in caplog.text and f"batch {last_written}" in caplog.text
    sample = metrics.registry.get_sample_value("streamapp_sink_partitions_skipped_total", {"app": "totals", "query": query})
    assert sample == metrics.totals[query]["skipped"]
    replayed = metrics.sink_batches[query]
    line = progress_line({"name": query, "batchId": replayed[0], "numInputRows": 0}, 0, replayed)
    assert "skipped as already written" in line
    with psycopg.connect(database) as conn:
        rewritten = conn.execute(f"SELECT count(*) FROM {table} WHERE total <> -1").fetchone()[0]
    assert rewritten == 0, "a replayed batch wrote rows again"


def test_a_ledger_of_release_0_1_is_migrated_and_its_rows_kept(spark, kafka, database, names, tmp_path):
    """The old ledger says batches 0-50 of this query were written: they were, by a checkpoint long gone."""
    with psycopg.connect(database) as conn:
        conn.execute(f"CREATE TABLE {BATCHES} (query text NOT NULL, batch_id bigint NOT NULL, partition integer NOT NULL, "
                     "rows integer NOT NULL, written_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (query, batch_id, partition))")
        conn.execute(f"INSERT INTO {BATCHES} (query, batch_id, partition, rows) "
                     "SELECT 'per-minute-per_minute', b, p, 1 FROM generate_series(0, 50) b, generate_series(0, 1) p")
    topic, table = names("payments"), "per_minute"
    create_topic(kafka.bootstrap, topic, partitions=2)
    payments = events(["ana", "bo"], range(0, 5))
    produce(kafka.bootstrap, topic, [(e["user"], e) for e in payments])
    run(spark, manifest("totals", topic, table), kafka, tmp_path / "checkpoint", database)
    assert table_rows(database, table) == closed_windows(payments)
    with psycopg.connect(database) as conn:
        old = conn.execute(f"SELECT count(*) FROM {BATCHES} WHERE checkpoint_id = ''").fetchone()[0]
    assert old == 102
