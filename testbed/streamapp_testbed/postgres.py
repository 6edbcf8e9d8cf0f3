"""A real PostgreSQL server (Debian's package) on a fresh data directory, 127.0.0.1 only."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from pathlib import Path

from .process import ManagedProcess, free_port, run

PG_ROOT = Path("/usr/lib/postgresql")


def pg_bin() -> Path:
    versions = sorted((p for p in PG_ROOT.glob("*/bin") if (p / "postgres").exists()), key=lambda p: int(p.parent.name))
    if not versions:
        raise FileNotFoundError("no PostgreSQL server under /usr/lib/postgresql: run `make deps`")
    return versions[-1]


class Postgres:
    """initdb + postgres in the foreground. PostgreSQL refuses to run as root, so when the test bed
    runs as root the server runs as the `postgres` system user that Debian's package creates."""

    user = "streamapp"
    password = "streamapp"
    database = "streamapp"

    def __init__(self, workdir: Path, host: str = "127.0.0.1", allow: str | None = None):
        """`host`: the address it listens on; `allow`: a CIDR whose clients may log in with the
        password too (the kind network's subnet, whose node masquerades its pods)."""
        self.workdir = workdir
        self.host = host
        self.allow = allow
        self.port = free_port()
        self.proc: ManagedProcess | None = None
        self.os_user = "postgres" if os.geteuid() == 0 else None
        # The server's own files live where the `postgres` user can reach them: pytest's temporary
        # folders are private to root.
        self.datadir = Path(tempfile.mkdtemp(prefix="streamapp-pg-"))

    @property
    def dsn(self) -> str:
        return f"postgresql://{self.user}:{self.password}@{self.host}:{self.port}/{self.database}"

    def _chown(self, path: Path) -> None:
        if self.os_user:
            pw = pwd.getpwnam(self.os_user)
            os.chown(path, pw.pw_uid, pw.pw_gid)

    def start(self, timeout: float = 60) -> "Postgres":
        bin_dir = pg_bin()
        self.workdir.mkdir(parents=True, exist_ok=True)
        data = self.datadir / "data"
        sockets = self.datadir / "sockets"
        for d in (self.datadir, sockets):
            d.mkdir(parents=True, exist_ok=True)
            self._chown(d)
        pwfile = self.datadir / "pwfile"
        pwfile.write_text(self.password + "\n")
        self._chown(pwfile)
        run(
            [bin_dir / "initdb", "-D", data, "-U", self.user, "--pwfile", pwfile, "-A", "scram-sha-256", "-E", "UTF8", "--no-sync"],
            user=self.os_user,
        )
        if self.allow:
            with open(data / "pg_hba.conf", "a") as hba:
                hba.write(f"host all all {self.allow} scram-sha-256\n")
        argv = [
            bin_dir / "postgres", "-D", data, "-p", str(self.port), "-k", sockets,
            "-c", f"listen_addresses={self.host}", "-c", "fsync=off", "-c", "full_page_writes=off",
        ]  # fmt: skip
        self.proc = ManagedProcess("postgres", argv, self.workdir / "postgres.log", user=self.os_user).start()
        self.proc.wait_until(self._ready, timeout, "a server accepting connections")
        self._create_database()
        return self

    def _ready(self) -> bool:
        import psycopg

        with psycopg.connect(self.dsn.rsplit("/", 1)[0] + "/postgres", connect_timeout=2):
            return True

    def _create_database(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.database,)).fetchone():
                conn.execute(f'CREATE DATABASE "{self.database}"')

    def stop(self) -> None:
        if self.proc:
            self.proc.stop()  # SIGTERM = PostgreSQL's "smart" shutdown
            self.proc = None
        shutil.rmtree(self.datadir, ignore_errors=True)
