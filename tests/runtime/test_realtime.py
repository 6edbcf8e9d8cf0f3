"""Real-time mode on real Spark and Kafka: `streamapp run` of examples/click-feed.yaml (trigger:
realtime) passes each record on while its first checkpoint interval is still open, sends malformed
records to the dead-letter topic, exits within seconds of SIGTERM, and refuses to start with fewer task
slots than it would hold."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from streamapp_testkit.runtime import REPO, consume, start_run, wait_while_running
from streamapp_api import contract, realtime
from streamapp_testbed import clickstream
from streamapp_testbed.kafka_admin import create_topic, produce

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def manifest(name: str, source: str, out: str, dlq: str) -> dict:
    doc = yaml.safe_load((REPO / "examples" / "click-feed.yaml").read_text())
    doc["metadata"]["name"] = name
    doc["spec"]["sources"][0]["topic"] = source
    doc["spec"]["sinks"][0]["kafka"]["topic"] = out
    doc["spec"]["deadLetter"] = {"topic": dlq}
    # The example reads from the end of the topic; a query resolves "latest" in its own thread after
    # start() returned, which a loaded machine delays past the test's first records (seen: none read).
    doc["spec"]["sources"][0]["startingOffsets"] = "earliest"
    return doc


def test_records_flow_before_the_first_checkpoint_and_bad_ones_are_dead_lettered(kafka, names, tmp_path):
    source, out, dlq = names("clicks"), names("feed"), names("dlq")
    create_topic(kafka.bootstrap, source, partitions=2)
    doc = manifest(names("app")[:50].rstrip("-"), source, out, dlq)
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(doc))
    log, progress = tmp_path / "run.log", tmp_path / "progress.jsonl"
    run = start_run(path, kafka.bootstrap, tmp_path / "checkpoint", log, STREAMAPP_PROGRESS_JSON=str(progress))
    try:
        # 2 partitions × (the feed + its dead letters): the local run gets a task thread for each
        wait_while_running(lambda: "real-time mode: 4 task slots held of 4" in log.read_text(), run, log)
        # startingOffsets latest: records produced once the queries run (Spark logs each one's start)
        wait_while_running(lambda: log.read_text().count("started query") >= 2, run, log)
        events = clickstream.generate(seed=7, users=20, minutes=2)
        bad = [("bad-1", "{not json"), ("bad-2", '{"uuid": "u", "session_id": "s", "event": "click", '
                                               '"time_spent": "ten", "ts": "2026-01-01T00:00:00Z"}')]
        produce(kafka.bootstrap, source, [(e.session_id, e.to_json()) for e in events[:50]] + bad
                + [(e.session_id, e.to_json()) for e in events[50:]])
        wanted = [e for e in events if e.event in ("click", "page_view")]
        written = consume(kafka.bootstrap, out, expect=len(wanted), timeout=40)
        dead = consume(kafka.bootstrap, dlq, expect=len(bad), timeout=20)
        # Everything arrived while the first real-time batch (a checkpoint interval, 5 min) was open: a
        # micro-batch query writes nothing before its batch ends and reports it.
        batches = [json.loads(line) for line in progress.read_text().splitlines()] if progress.exists() else []
        feed = [b for b in batches if b["name"] == f"feed-{out}"]
        assert feed == [], f"a batch of the feed ended before its records were read: {feed[:1]}"
    finally:
        signalled = time.monotonic()
        run.send_signal(signal.SIGTERM)  # to `streamapp run` alone, as a pod's tini sends it
        try:
            code = run.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            code = run.wait(30)
        took = time.monotonic() - signalled
    # a real-time batch is a whole checkpoint interval: stop does not wait for its end (it is replayed)
    assert code == 0 and took < 10, f"exit code {code} {took:.1f}s after SIGTERM"
    assert len(written) == len(wanted)  # at-least-once, and nothing replayed within one run
    assert sorted((r["key"], r["value"]["uuid"], r["value"]["event"], r["value"]["seconds_spent"]) for r in written) \
        == sorted((e.session_id, e.uuid, e.event, e.time_spent / 1000) for e in wanted)
    assert set(written[0]["value"]) == {"session_id", "uuid", "event", "seconds_spent", "ts"}
    assert sorted(r["key"] for r in dead) == ["bad-1", "bad-2"]
    assert "field 'time_spent': expected long" in {r["key"]: r for r in dead}["bad-2"]["headers"]["streamapp.error"]
    assert "stop requested" in log.read_text()


def test_too_few_task_slots_refuse_to_start_saying_what_to_raise(kafka, names, tmp_path):
    source = names("clicks")
    create_topic(kafka.bootstrap, source, partitions=3)
    path, conf, message = tmp_path / "app.yaml", tmp_path / "spark.properties", tmp_path / "termination"
    path.write_text(yaml.safe_dump(manifest(names("app")[:50].rstrip("-"), source, names("feed"), names("dlq"))))
    conf.write_text("spark.master=local[2]\n")  # given by the user: the runtime does not choose it
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(REPO / p) for p in ("crds", "apps", "testbed")),
           contract.ENV_TERMINATION_LOG: str(message)}
    done = subprocess.run([sys.executable, "-m", "streamapp_api", "run", str(path), "--kafka", kafka.bootstrap,
                           "--checkpoint", str(tmp_path / "checkpoint"), "--spark-conf", str(conf),
                           "--metrics-port", "-1"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    said = Path(message).read_text()
    assert "needs 6 task slots at once" in said and "this driver has 2" in said, said
    assert "spec.executors" in said and "executor.cores" in said
    assert realtime.CHECKPOINT_INTERVAL == "5m"  # the test above relies on a first batch this long
