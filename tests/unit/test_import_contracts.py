"""Which package may import which (.importlinter at the repository root): the API stands alone, the
operator and the runtime know only the API, the test bed knows none of the product, and the
operator's layers import downwards. import-linter reads the real import graph of every package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = ("crds", "operator", "apps", "testbed", "bench", "demo")


def _lint(config: Path) -> subprocess.CompletedProcess:
    linter = Path(sys.executable).parent / "lint-imports"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(REPO / d) for d in PACKAGE_DIRS)}
    return subprocess.run([str(linter), "--config", str(config), "--no-cache"], capture_output=True, text=True,
                          env=env, cwd=REPO)


def test_every_contract_holds():
    config = REPO / ".importlinter"
    result = _lint(config)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{config.read_text().count('[importlinter:contract:')} kept, 0 broken" in result.stdout


def test_a_broken_contract_is_reported(tmp_path):
    """The same packages with a contract that the code breaks (the operator does import the API)."""
    config = tmp_path / "broken.ini"
    config.write_text("[importlinter]\nroot_packages =\n    streamapp_api\n    streamapp_operator\n"
                      "[importlinter:contract:no-api]\nname = no API\ntype = forbidden\n"
                      "source_modules =\n    streamapp_operator.render\nforbidden_modules =\n    streamapp_api\n")
    result = _lint(config)
    assert result.returncode != 0 and "0 kept, 1 broken" in result.stdout
    assert "streamapp_operator.render" in result.stdout and "streamapp_api" in result.stdout
