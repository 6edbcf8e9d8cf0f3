"""The operator's Spark security settings (operator render/security.py) on the Spark the project pins:
driver and executors in JVMs of their own authenticate and encrypt; an executor started as its pod
starts it (the key from a file) joins, one with another key does not, and neither does one without the
executor template's SPARK_JAVA_OPT_ variable (Spark 4.0 then ignores the key file). The driver's own
key file and the settings on the pods are checked on the real cluster by tests/e2e."""

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


def test_executors_authenticate_from_the_key_file_and_others_cannot_join():
    out = probe()
    assert out["counts"] == {"0": 334, "1": 333, "2": 333}  # a shuffle between the two executors
    assert out["executors"] == 2
    joined, code = out["other_key"]
    assert not joined and code not in (None, 0)  # refused: it gave up
    joined, code = out["no_template_env"]
    assert not joined and code not in (None, 0)  # no spark.master: Spark 4.0 did not read the key file
    joined, _ = out["as_the_pod"]
    assert joined
