"""The operator's Spark security settings (operator render/security.py) on the Spark the project pins:
driver and executors in JVMs of their own authenticate and encrypt, and an executor with another key
cannot join. The key file the operator mounts (Spark takes files on Kubernetes only) and the settings
on driver and executor pods are checked on the real cluster by tests/e2e."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]
PROBE = Path(__file__).with_name("spark_auth_probe.py")


def probe() -> dict:
    result = subprocess.run([sys.executable, str(PROBE)], capture_output=True, text=True, timeout=400,
                            env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    lines = [line for line in result.stdout.splitlines() if line.startswith("PROBE ")]
    assert result.returncode == 0 and lines, result.stderr[-4000:]
    return json.loads(lines[-1].removeprefix("PROBE "))


def test_executors_authenticate_and_one_with_another_key_cannot_join():
    out = probe()
    assert out["counts"] == {"0": 334, "1": 333, "2": 333}  # a shuffle between the two executors
    assert out["executors"] == 2
    assert out["wrong_exit"] not in (None, 0) and out["after_wrong"] == 2  # refused, gave up
    assert out["after_right"] == 3  # the same executor with the app's key joins
