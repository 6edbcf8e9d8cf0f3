"""Where the operator's memory goes, for diagnosis: ``STREAMAPP_OPERATOR_TRACEMALLOC=FILE`` traces Python
allocations and rewrites FILE every ``every`` seconds with the RSS, the traced total and the largest
allocation sites (tracing costs CPU and memory itself: never on by default)."""

from __future__ import annotations

import threading
import time
import tracemalloc
from pathlib import Path


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def snapshot_text(top: int = 30, frames: int = 4) -> str:
    snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    stats = snap.statistics("traceback")
    traced = sum(s.size for s in stats)
    lines = [f"rss {_rss_mib():.1f} MiB, traced {traced / 2**20:.1f} MiB in {sum(s.count for s in stats)} blocks"]
    for stat in stats[:top]:
        lines.append(f"{stat.size / 2**20:8.2f} MiB {stat.count:8d} blocks")
        lines += [f"      {frame.filename}:{frame.lineno}" for frame in stat.traceback[-frames:]]
    return "\n".join(lines) + "\n"


def trace_to(path: str, every: float = 30.0, frames: int = 8) -> None:
    tracemalloc.start(frames)

    def loop() -> None:
        while True:
            time.sleep(every)
            Path(path).write_text(snapshot_text())

    threading.Thread(target=loop, daemon=True, name="tracemalloc").start()
