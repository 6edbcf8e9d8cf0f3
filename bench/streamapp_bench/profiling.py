"""py-spy (from PyPI: pyproject's bench extras, which `make deps` installs into the venv) over a
running process: where its time goes, summarised as the functions holding most samples (inclusive)
and the hottest leaves."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path



def pyspy() -> Path:
    """The venv's py-spy. Installed by `make deps`, never on first use: the bench's network guard
    drops downloads while it runs (a first-use pip install failed the control-plane bench)."""
    exe = Path(sys.executable).parent / "py-spy"
    if not exe.exists():
        raise FileNotFoundError(f"{exe} is missing: `make deps` installs py-spy with the bench extras (pyproject.toml)")
    return exe


def start(pid: int, seconds: float, out: Path) -> subprocess.Popen:
    """Sample `pid` (all threads, waiting ones too: latency is often waiting) into collapsed stacks at `out`."""
    return subprocess.Popen([str(pyspy()), "record", "-p", str(pid), "-d", str(int(seconds)), "-r", "50",
                             "-f", "raw", "-o", str(out), "--nonblocking", "--idle"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _frame(frame: str) -> str:
    # "function (path/to/module.py:123)" -> "function (module.py)"
    name, _, where = frame.partition(" (")
    return f"{name} ({Path(where.split(':')[0]).name})" if where else name


GENERIC = ("threading.py", "thread.py", "<module>")


def summarise(collapsed: Path, top: int = 15) -> dict:
    """Shares of samples: every function (inclusive, generic thread frames left out), the operator's own
    functions (inclusive), and the leaves (where the time is finally spent or waited)."""
    inclusive: Counter[str] = Counter()
    ours: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    total = 0
    if not collapsed.exists():
        return {"samples": 0}
    for line in collapsed.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        raw = [f for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        frames = [_frame(f) for f in raw]
        total += n
        for f in set(frames):
            if not any(g in f for g in GENERIC):
                inclusive[f] += n
        for f in {_frame(f) for f in raw if "streamapp_operator" in f}:
            ours[f] += n
        if frames:
            leaves[frames[-1]] += n
    pct = lambda c: [(f, round(100 * n / total, 1)) for f, n in c.most_common(top)] if total else []  # noqa: E731
    return {"samples": total, "inclusive_percent": pct(inclusive), "operator_inclusive_percent": pct(ours),
            "leaf_percent": pct(leaves)}
