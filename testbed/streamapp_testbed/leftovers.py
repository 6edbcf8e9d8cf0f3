"""Find (and end) processes a test-bed run left behind: the check `make test` runs last.

The Makefile gives each run an id in STREAMAPP_TESTBED_RUN; every process the run starts inherits
it, so this finds exactly that run's processes and never another run's or a developer's."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

RUN_VARIABLE = "STREAMAPP_TESTBED_RUN"


def find(run_id: str) -> list[tuple[int, str]]:
    needle = f"{RUN_VARIABLE}={run_id}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if needle not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if cmdline and "streamapp_testbed leftovers" not in cmdline:
            found.append((int(proc.name), cmdline))
    return found


def find_after_grace(run_id: str, grace: float = 10.0) -> list[tuple[int, str]]:
    """Processes of the run still alive after `grace` seconds (a JVM takes a moment to exit)."""
    deadline = time.monotonic() + grace
    while (found := find(run_id)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return found


def end(found: list[tuple[int, str]]) -> None:
    for pid, _ in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
