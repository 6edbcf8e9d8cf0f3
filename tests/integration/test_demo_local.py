"""`python -m streamapp_demo --local` (make demo-local) stopped with SIGTERM mid-run, as `timeout` or
a CI runner stops it: everything it started (Kafka, Postgres, `streamapp run` and its JVM) is
stopped, as on Ctrl-C, and nothing of it is left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from streamapp_testbed import leftovers
from streamapp_testbed.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def test_sigterm_mid_run_stops_everything_the_demo_started(tmp_path):
    run = f"demo-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "demo.log"
    env = {**os.environ, leftovers.RUN_VARIABLE: run, "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as out:
        demo = subprocess.Popen([sys.executable, "-m", "streamapp_demo", "--local"], env=env, cwd=REPO,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while "$ streamapp run" not in log.read_text():
            assert demo.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        # Spark's JVM is up: the demo, Kafka, Postgres, the run and its JVM
        wait_for("the run's JVM", lambda: any("SparkSubmit" in command for _, command in leftovers.find(run)), timeout=120)
        assert len(leftovers.find(run)) >= 4, leftovers.find(run)
        demo.send_signal(signal.SIGTERM)
        code = demo.wait(120)
    finally:
        if demo.poll() is None:
            demo.kill()
    text = log.read_text()
    assert code == 130, text[-3000:]
    assert "demo stopped; everything it started is stopped" in text
    assert "Traceback" not in text, text[-3000:]
    left = leftovers.find_after_grace(run)
    leftovers.end(left)
    assert left == []
