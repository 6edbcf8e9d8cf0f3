"""Start and stop the test bed's processes: each in its own process group, logging to a file."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


class StartupError(RuntimeError):
    """A part of the test bed did not come up; the message ends with the tail of its log."""


class ManagedProcess:
    """One long-running process of the test bed.

    It runs in a new session so that `stop()` reaches its children too (a JVM's, say), and its
    output goes to `log_path` so that a failure to start can be explained.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str | os.PathLike],
        log_path: Path,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        user: str | None = None,
    ):
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log_path = log_path
        self.env = env
        self.cwd = cwd
        self.user = user
        self.proc: subprocess.Popen | None = None

    def start(self) -> "ManagedProcess":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(self.env or {})},
            cwd=self.cwd,
            user=self.user,
            start_new_session=True,
        )
        log.close()
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def wait_until(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll `ready` until it is true; fail fast if the process exits, with its log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                raise StartupError(
                    f"{self.name} exited with code {self.proc.returncode if self.proc else '?'} "
                    f"before {what}; log {self.log_path}:\n{self.log_tail()}"
                )
            try:
                if ready():
                    return
            except Exception:  # not ready yet: connection refused, 5xx, ...
                pass
            time.sleep(0.2)
        raise StartupError(f"{self.name}: no {what} after {timeout:.0f}s; log {self.log_path}:\n{self.log_tail()}")

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM the process group, then SIGKILL what is left after `grace` seconds."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            # The leader is gone; children in the group may remain.
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                break
        self.proc = None


def run(argv: Sequence[str | os.PathLike], **kwargs) -> subprocess.CompletedProcess:
    """Run a short command and fail with its output when it fails."""
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result
