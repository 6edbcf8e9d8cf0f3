"""A checkpoint written on the previous runtime image's Spark (SPARK_PREVIOUS_VERSION) is restored by
the pinned one (SPARK_VERSION), state included: the click-sessions aggregation reads the first half of
the clicks on the old pyspark in a few batches and stops between batches (as a driver does on SIGTERM)
with windows still open in its state store; the new pyspark reads the rest from the same checkpoint.
Postgres and the Kafka topic (exactly-once, read committed) must then hold exactly the windows of the
uninterrupted input: a window whose state was lost would come out short or not at all, a batch run
twice would put windows on the topic twice.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import psycopg
import pyspark
import pytest
import yaml

from streamapp_testkit.manifests import click_sessions_manifest
from streamapp_testkit.runtime import closed_click_windows as expected
from streamapp_testkit.runtime import consume, start_run, watermark_flush
from streamapp_testbed import clickstream
from streamapp_testbed.kafka_admin import create_topic, produce
from streamapp_testbed.paths import SPARK_JARS_ENV, installed, versions

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def previous_spark() -> tuple[str, dict[str, str]]:
    """The previous Spark's interpreter and what a run on it needs: its own Kafka connector jars and
    Python workers on the same interpreter. Not the runtime's own jar: the previous image had none,
    so its checkpoints were written by plans that read JSON with from_json alone."""
    python = str(installed().previous_spark_python)
    jars = ",".join(str(p) for p in sorted(installed().previous_spark_kafka_jars.glob("*.jar"))
                    if not p.name.startswith("streamapp-runtime-"))
    return python, {SPARK_JARS_ENV: jars, "PYSPARK_PYTHON": python}


def pyspark_version(python: str) -> str:
    return subprocess.run([python, "-c", "import pyspark; print(pyspark.__version__)"], capture_output=True,
                          text=True, check=True).stdout.strip()


def progress_of(query: str, progress: Path) -> list[dict]:
    """The progress of one query's batches that read input, as the run wrote them."""
    if not progress.exists():
        return []
    return [p for p in map(json.loads, progress.read_text().splitlines()) if p["name"] == query and p["numInputRows"]]


def rows(dsn: str, sql: str) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql).fetchall()


def test_a_checkpoint_of_the_previous_spark_is_restored_with_its_state(kafka, postgres, names, tmp_path):
    old_python, old_env = previous_spark()
    assert pyspark_version(old_python) == versions()["SPARK_PREVIOUS_VERSION"] != pyspark.__version__
    topic, out, table = names("clicks"), names("summaries"), f"upgrade_{os.urandom(3).hex()}"
    create_topic(kafka.bootstrap, topic, partitions=2)
    events = sorted(clickstream.generate(seed=7, users=12, minutes=5), key=lambda e: e.ts)
    # the old Spark reads the first half of the clicks, the new one the rest: windows span the upgrade
    before, after = events[:len(events) // 2], events[len(events) // 2:]
    produce(kafka.bootstrap, topic, [(e.session_id, e.to_json()) for e in before])
    path, checkpoint = tmp_path / "app.yaml", tmp_path / "checkpoint"
    path.write_text(yaml.safe_dump(click_sessions_manifest(topic, out, table, max_offsets_per_trigger=160, delivery="exactly-once")))
    query, progress = f"sessions-{table}", tmp_path / "progress.jsonl"
    batches = f"SELECT count(DISTINCT batch_id) FROM streamapp_batches WHERE query = '{query}'"

    old_log = tmp_path / "previous.log"
    old = start_run(path, kafka.bootstrap, checkpoint, old_log, available_now=True, postgres=postgres.dsn,
                    python=old_python, STREAMAPP_PROGRESS_JSON=str(progress), **old_env)
    assert old.wait(400) == 0, old_log.read_text()[-3000:]
    assert "from_json only" in old_log.read_text(), "the previous image's plan: no JSON fast path"
    assert len(progress_of(query, progress)) >= 2
    assert progress_of(query, progress)[-1]["stateOperators"][0]["numRowsTotal"] > 0, "windows open in the state"
    written_before = len(rows(postgres.dsn, f"SELECT 1 FROM {table}"))
    batches_before = rows(postgres.dsn, batches)[0][0]

    flush = watermark_flush(events)
    produce(kafka.bootstrap, topic, [(e.session_id, e.to_json()) for e in [*after, flush]])
    new_log = tmp_path / "current.log"
    new_progress = tmp_path / "progress-current.jsonl"
    new = start_run(path, kafka.bootstrap, checkpoint, new_log, available_now=True, postgres=postgres.dsn,
                    STREAMAPP_PROGRESS_JSON=str(new_progress))
    assert new.wait(400) == 0, new_log.read_text()[-3000:]
    assert "from_json only" not in new_log.read_text(), "the new image reads JSON with the fast path"
    assert rows(postgres.dsn, batches)[0][0] > batches_before, "the new Spark went on from the old batches"
    assert sum(p["numInputRows"] for p in progress_of(query, new_progress)) == len(after) + 1

    want = expected([*events, flush])
    got = rows(postgres.dsn, f"SELECT session_id, uuid, window_start, clicks, page_views, time_spent FROM {table}")
    assert written_before < len(want) == len(got) > 30
    assert {(s, u, w): (c, p, t) for s, u, w, c, p, t in got} == want
    # read committed (librdkafka's default), all both runs wrote, so that a window written twice shows
    on_topic = Counter((r["key"], r["value"]["window_start"]) for r in consume(kafka.bootstrap, out, timeout=120, to_end=True))
    assert on_topic == Counter((s, clickstream.iso(w).replace("000Z", "Z")) for s, _, w in want)
