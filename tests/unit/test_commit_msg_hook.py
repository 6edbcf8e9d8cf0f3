"""The commit-msg hook (.githooks/commit-msg, installed by `make venv` and `make deps`): a subject of
72 characters or fewer passes, a longer one is refused; comment lines and the body do not count."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]
HOOK = REPO / ".githooks" / "commit-msg"


def run_hook(tmp_path: Path, message: str) -> subprocess.CompletedProcess:
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text(message, encoding="utf-8")
    return subprocess.run([str(HOOK), str(path)], capture_output=True, text=True)


@pytest.mark.parametrize("message", [
    "x" * 72 + "\n",
    "é" * 72,  # characters, not bytes
    "runtime: one short subject\n\n" + "a body line may be as long as it needs " * 5 + "\n",
    "# a comment git wrote, longer than the limit " + "#" * 72 + "\nshort subject\n",
])
def test_a_short_subject_passes(tmp_path, message):
    result = run_hook(tmp_path, message)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("message", ["x" * 73, "x" * 73 + "\n\nbody\n", "# comment\n" + "y" * 100 + "\n"])
def test_a_long_subject_is_refused(tmp_path, message):
    result = run_hook(tmp_path, message)
    assert result.returncode == 1
    assert "at most 72" in result.stderr


def test_make_venv_installs_the_hooks():
    assert "config core.hooksPath .githooks" in (REPO / "testbed" / "bootstrap.sh").read_text()
    assert HOOK.stat().st_mode & 0o111, "the hook must be executable"
