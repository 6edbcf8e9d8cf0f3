"""The benchmark harnesses live under bench/ (package streamapp_bench), outside the Makefile's PYTHONPATH."""

from __future__ import annotations

import sys

from streamapp_testbed.paths import REPO_DIR

if str(REPO_DIR / "bench") not in sys.path:
    sys.path.insert(0, str(REPO_DIR / "bench"))
