"""mypy, strict, over the API models and the operator's decisions ([tool.mypy] in pyproject.toml): the
code every package builds on, and the pure functions whose inputs come from many places. Types there
are checked, not decoration."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]
CHECKED = ("streamapp_api", "streamapp_operator.decide")


def test_mypy_finds_no_error():
    packages = [arg for package in CHECKED for arg in ("-p", package)]
    result = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--no-error-summary", *packages],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
