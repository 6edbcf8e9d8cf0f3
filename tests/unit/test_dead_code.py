"""No name in the product's folders that nothing reads: vulture over the tree ([tool.vulture] in
pyproject.toml). The tests count as readers; names only a framework reads are listed in
tests/dead_code_allowed.py with the reason. A report here means: delete the name, or, when something
outside our code does read it, add it to that list."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("crds/", "operator/", "apps/", "testbed/", "bench/", "demo/")


def test_no_dead_names_in_the_product():
    result = subprocess.run([sys.executable, "-m", "vulture"], capture_output=True, text=True, cwd=REPO)
    assert result.returncode in (0, 3), result.stdout + result.stderr  # 3: vulture found something
    dead = [line for line in result.stdout.splitlines() if line.startswith(PRODUCT)]
    assert not dead, "names nothing reads (delete them, or list them in tests/dead_code_allowed.py):\n" + "\n".join(dead)
