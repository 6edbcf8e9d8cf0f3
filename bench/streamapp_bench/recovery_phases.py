"""Where a driver's start goes, from what the cluster and the driver record: the replacement pod's
creation and container start (the API server's timestamps, whole seconds), the driver log's lines
(`kubectl logs --timestamps`, the container runtime's clock: the kind node shares this host's) and the
moment the bench saw every query commit. Pure, but for the figure.

The phases, in order (each from the end of the one before):
- ``operator``: the kill (or the apply) → the new driver pod exists;
- ``pod start``: → its container runs (scheduling, kubelet, image already on the node);
- ``Spark session``: → the runtime logs that its SparkSession is up (Python, the JVM, the SparkContext);
- ``driver start-up``: → its last query started (checks, the checkpoint's fence, Kafka, planning);
- ``first batch``: → every query committed a batch (executors registering, state loaded, the batch).
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

PHASES = ("operator", "pod start", "Spark session", "driver start-up", "first batch")
SESSION_LINE = "Spark session started"  # streamapp_runtime.cli logs it once create_session returns
QUERY_LINE = re.compile(r"\bstarted query \S+ \(")
COLOURS = ("tab:gray", "tab:brown", "tab:blue", "tab:orange", "tab:green")


def timestamp(text: str) -> float:
    """An RFC 3339 time of the API server or of `kubectl logs --timestamps` (nanoseconds cut to micro)."""
    text = re.sub(r"(\.\d{6})\d+", r"\1", text.strip()).replace("Z", "+00:00")
    return datetime.fromisoformat(text).timestamp()


def container_started(pod: dict, container: str = "driver") -> float | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        started = ((status.get("state") or {}).get("running") or {}).get("startedAt")
        if status.get("name") == container and started:
            return timestamp(started)
    return None


def log_marks(lines: list[str]) -> dict[str, float]:
    """When the driver log said its session was up and when it started its last query."""
    marks: dict[str, float] = {}
    for line in lines:
        stamp, _, text = line.partition(" ")
        if SESSION_LINE in text and "session" not in marks:
            marks["session"] = timestamp(stamp)
        elif QUERY_LINE.search(text):
            marks["queries"] = timestamp(stamp)
    return marks


def phases(pod: dict, log_lines: list[str], began: float, committed: float) -> dict[str, float] | None:
    """Seconds of each of PHASES, from `began` (the kill or the apply) to `committed`; None when a mark
    is missing (a driver image without the session line, say)."""
    created = timestamp(pod["metadata"]["creationTimestamp"])
    started = container_started(pod)
    marks = log_marks(log_lines)
    if started is None or "session" not in marks or "queries" not in marks:
        return None
    # whole-second API timestamps may sit a little before the kill that caused them
    points = [began, max(created, began), max(started, created, began), marks["session"], marks["queries"], committed]
    return {name: round(max(0.0, b - a), 2) for name, a, b in zip(PHASES, points, points[1:])}


def plot(path: Path, runs: list[tuple[str, dict[str, float]]], title: str) -> None:
    """One stacked horizontal bar per start (cold, then each kill), the phases in order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 0.55 * len(runs) + 1.8))
    for y, (_, parts) in enumerate(reversed(runs)):
        left = 0.0
        for name, colour in zip(PHASES, COLOURS, strict=True):
            width = parts.get(name, 0.0)
            ax.barh(y, width, left=left, color=colour, height=0.6, label=name if y == 0 else None)
            if width >= 2:
                ax.text(left + width / 2, y, f"{width:.0f}", ha="center", va="center", fontsize=7, color="white")
            left += width
        ax.text(left + 0.5, y, f"{left:.1f} s", va="center", fontsize=8)
    ax.set_yticks(range(len(runs)), [label for label, _ in reversed(runs)], fontsize=8)
    ax.set_xlabel("seconds from the kill (or the apply) to every query's first committed batch", fontsize=8)
    ax.legend(fontsize=7, ncol=len(PHASES), loc="upper center", bbox_to_anchor=(0.5, -0.25), frameon=False)
    ax.grid(alpha=0.3, axis="x")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
