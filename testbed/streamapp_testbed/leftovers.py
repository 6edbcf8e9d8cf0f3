"""Find (and end) processes the test bed left behind: a check that `make test` runs last."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from .paths import cache_dir

# What the command line of every test-bed process contains: a binary or jar from the cache, or a
# data directory the test bed made.
MARKERS = ("streamapp-testbed-", "streamapp-pg-", "/pytest-of-")


def find() -> list[tuple[int, str]]:
    markers = (*MARKERS, str(cache_dir()) + "/kube-", str(cache_dir()) + "/jars/")
    me = os.getpid()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in (me, os.getppid()):
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if cmdline and any(m in cmdline for m in markers) and "streamapp_testbed leftovers" not in cmdline:
            found.append((int(proc.name), cmdline))
    return found


def end(found: list[tuple[int, str]]) -> None:
    for pid, _ in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
