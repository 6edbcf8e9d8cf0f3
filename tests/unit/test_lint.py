"""ruff over the whole tree ([tool.ruff] in pyproject.toml): unused and undefined names, syntax errors,
likely bugs. In the suite, so that `make test` (CI) and `make unit` both run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing():
    ruff = Path(sys.executable).parent / "ruff"
    result = subprocess.run([str(ruff), "check", "--no-cache", "crds", "operator", "apps", "testbed", "bench", "demo", "tests"],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
