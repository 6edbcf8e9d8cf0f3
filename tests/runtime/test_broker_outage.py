"""A broker that goes away mid-run: `streamapp run` waits, says so, and carries on when it is back.

The test stops a Kafka broker of its own (the session broker stays up for the other tests) while the
app runs, waits until the runtime has tried twice, starts the broker again on the same port and data
directory, produces more, and checks that the per-user totals cover every record exactly once.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
import yaml

from streamapp_testkit.runtime import consume, produce, wait_while_running
from streamapp_testbed.kafka import KafkaBroker
from streamapp_testbed.kafka_admin import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
USERS = [f"u{i}" for i in range(7)]


@pytest.fixture
def own_kafka(tmp_path):
    broker = KafkaBroker(tmp_path / "kafka")
    try:
        yield broker.start()
    finally:
        broker.stop()


def manifest(name: str, topic: str, out: str) -> dict:
    return {"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": name}, "spec": {
        # Shorter than Kafka's 60 s API timeout so that Spark notices the outage within ~20 s and the
        # test stays short; docs/runtime.md gives the timings with the defaults.
        "kafka": {"bootstrapServers": "unused:9092", "options": {"default.api.timeout.ms": "5000",
                                                                 "request.timeout.ms": "5000"}},
        # No maxOffsetsPerTrigger: each produce is read in one batch (the test waits for all of it
        # before each outage, so no outage falls in a backlog either way).
        "sources": [{"name": "events", "topic": topic, "schema": {"id": "string", "user": "string", "n": "long"}}],
        "streams": [{"name": "totals", "from": "events", "emit": "updates", "steps": [
            {"aggregate": {"groupBy": ["user"], "columns": {"events": "count(*)", "total": "sum(n)"}}}]}],
        "sinks": [{"from": "totals", "kafka": {"topic": out, "key": "user"}}],
    }}


def records(start: int, count: int) -> list[tuple[str, dict]]:
    return [(f"k{i}", {"id": f"e{i}", "user": USERS[i % len(USERS)], "n": i}) for i in range(start, start + count)]


def expected_totals(sent: list[tuple[str, dict]]) -> dict[str, tuple[int, int]]:
    events, total = Counter(), Counter()
    for _, value in sent:
        events[value["user"]] += 1
        total[value["user"]] += value["n"]
    return {user: (events[user], total[user]) for user in events}


def latest_totals(bootstrap: str, topic: str) -> dict[str, tuple[int, int]]:
    """The last value written per user (update mode: each batch rewrites the users it touched)."""
    latest = {}
    for record in consume(bootstrap, topic, timeout=30, idle=3):
        latest[record["key"]] = (record["value"]["events"], record["value"]["total"])
    return latest


def metric(port: int, name: str, query: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith(name + "{") and f'query="{query}"' in line]
    return sum(values)


def test_broker_down_mid_run_is_waited_out_and_nothing_is_lost(own_kafka, names, tmp_path):
    topic, out = names("events"), names("totals")
    create_topic(own_kafka.bootstrap, topic, partitions=2)
    create_topic(own_kafka.bootstrap, out, partitions=1)
    first, second = records(0, 300), records(300, 200)
    produce(own_kafka.bootstrap, topic, first)
    app_name = names("app")[:40].rstrip("-")
    path, log = tmp_path / "app.yaml", tmp_path / "run.log"
    path.write_text(yaml.safe_dump(manifest(app_name, topic, out)))
    command = [sys.executable, "-m", "streamapp_api", "run", str(path), "--kafka", own_kafka.bootstrap,
               "--checkpoint", str(tmp_path / "checkpoint"), "--metrics-port", "0"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(REPO / p) for p in ("crds", "apps", "testbed"))}
    proc = subprocess.Popen(command, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_while_running(lambda: latest_totals(own_kafka.bootstrap, out) == expected_totals(first), proc, log,
                           timeout=300, what="totals of the first records")
        own_kafka.stop()
        # The first restart finds the broker still down: the second wait is longer.
        wait_while_running(lambda: "attempt 2, next try in 10s" in log.read_text(), proc, log, timeout=400,
                           what="a second attempt")
        own_kafka.start()
        produce(own_kafka.bootstrap, topic, second)
        want = expected_totals(first + second)
        wait_while_running(lambda: latest_totals(own_kafka.bootstrap, out) == want, proc, log, timeout=400,
                           what="totals of all records")

        text = log.read_text()
        waiting = [line for line in text.splitlines() if "lost Kafka" in line]
        # Both the sink's query and the dead-letter query lose the broker; each says so.
        assert any(re.search(r"query totals-\S+ lost Kafka \(.+\); attempt 1, next try in 5s from its checkpoint", line)
                   for line in waiting), waiting
        assert "restarted query totals-" in text
        assert text.count("Connection to node") < 5  # Kafka's per-second warnings are quieted
        port = int(re.search(r"metrics and health on :(\d+)", text).group(1))
        query = re.search(r"restarted query (totals-\S+)", text).group(1)
        # One restart found the broker still down, so at least two; how many more depends on how long
        # the broker takes to come back on a loaded machine. The metric counts each one the log shows.
        restarts = text.count(f"restarted query {query} from checkpoint")
        assert restarts >= 2 and metric(port, "streamapp_query_restarts_total", query) == restarts

        # A second outage: the query made progress since, so it starts again at attempt 1; SIGTERM
        # while it waits ends the run at once, with exit code 0.
        seen = text.count("attempt 1, next try in 5s")
        own_kafka.stop()
        wait_while_running(lambda: log.read_text().count("attempt 1, next try in 5s") > seen, proc, log, timeout=400,
                           what="the second outage")
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0, log.read_text()[-4000:]
        assert time.monotonic() - began < 60
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def test_a_stop_while_waiting_for_kafka_or_a_topic_exits_0_with_one_line_per_wait(kafka, names, tmp_path):
    """SIGTERM while the broker is unreachable, Ctrl-C (SIGINT) while a topic is missing: both end
    cleanly, without a traceback, and the wait is one line, not librdkafka's per-connection errors;
    nothing is left in the directory it ran in."""
    from streamapp_testbed.process import free_port

    runs = {}
    for signum, bootstrap in ((signal.SIGTERM, f"127.0.0.1:{free_port()}"), (signal.SIGINT, kafka.bootstrap)):
        path, log = tmp_path / f"{signum.name}.yaml", tmp_path / f"{signum.name}.log"
        path.write_text(yaml.safe_dump(manifest(names("app"), names("missing"), names("out"))))
        command = [sys.executable, "-m", "streamapp_api", "run", str(path), "--kafka", bootstrap,
                   "--checkpoint", str(tmp_path / signum.name), "--metrics-port", "-1"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(REPO / p) for p in ("crds", "apps", "testbed"))}
        workdir = tmp_path / f"cwd-{signum.name}"
        workdir.mkdir()
        proc = subprocess.Popen(command, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT, cwd=workdir)
        runs[signum] = (proc, log)
    for proc, log in runs.values():
        wait_while_running(lambda: "waiting for" in log.read_text(), proc, log, timeout=120, what="the wait for Kafka")
    time.sleep(3)  # a few seconds of waiting for both: librdkafka retries connections every ~100 ms meanwhile
    for signum, (proc, _) in runs.items():
        proc.send_signal(signum)
    for signum, (proc, log) in runs.items():
        code = proc.wait(60)
        text = log.read_text()
        assert code == 0, f"{signum.name}: exit {code}\n{text[-3000:]}"
        assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-3000:]
        assert "stop requested while waiting for" in text, text[-3000:]
        waits = [line for line in text.splitlines() if "waiting for" in line or "rdkafka" in line.lower()]
        assert len(waits) <= 2, "\n".join(waits)
        assert not list((tmp_path / f"cwd-{signum.name}").iterdir()), "streamapp run left files in the current directory"
