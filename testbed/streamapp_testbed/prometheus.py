"""A real Prometheus server (Debian's package) scraping the targets a test gives it."""

from __future__ import annotations

import json
import shutil
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

from .process import ManagedProcess, free_port


class Prometheus:
    def __init__(self, workdir: Path, scrape_interval: str = "1s", scrape_configs: list[dict] | None = None):
        """`scrape_configs`: whole scrape configs written as given (e.g. Kubernetes service discovery),
        after the static jobs of `scrape()`."""
        self.workdir = workdir
        self.port = free_port()
        self.scrape_interval = scrape_interval
        self.jobs: dict[str, list[str]] = {}
        self.scrape_configs = list(scrape_configs or [])
        self.proc: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _write_config(self) -> Path:
        config = {
            "global": {"scrape_interval": self.scrape_interval, "evaluation_interval": self.scrape_interval},
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": targets}]} for job, targets in sorted(self.jobs.items())
            ] + self.scrape_configs,
        }
        path = self.workdir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        return path

    def start(self, timeout: float = 60) -> "Prometheus":
        binary = shutil.which("prometheus")
        if not binary:
            raise FileNotFoundError("prometheus is not installed: run `make deps`")
        self.workdir.mkdir(parents=True, exist_ok=True)
        argv = [
            binary,
            f"--config.file={self._write_config()}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            "--web.enable-lifecycle",  # POST /-/reload after a test adds a target
        ]
        self.proc = ManagedProcess("prometheus", argv, self.workdir / "prometheus.log").start()
        self.proc.wait_until(lambda: self._get("/-/ready") is not None, timeout, "a ready endpoint")
        return self

    def scrape(self, job: str, targets: list[str]) -> None:
        """Add (or replace) a scrape job and reload the configuration."""
        self.jobs[job] = targets
        self._write_config()
        req = urllib.request.Request(self.url + "/-/reload", method="POST")
        urllib.request.urlopen(req, timeout=10).read()

    def _get(self, path: str) -> bytes | None:
        with urllib.request.urlopen(self.url + path, timeout=5) as resp:
            return resp.read() if resp.status == 200 else None

    def query(self, promql: str) -> list[dict]:
        body = self._get("/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
        data = json.loads(body)
        if data.get("status") != "success":
            raise RuntimeError(f"query {promql!r} failed: {data}")
        return data["data"]["result"]

    def wait_for(self, promql: str, timeout: float = 30) -> list[dict]:
        """Wait until a query returns at least one series; return it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.query(promql)
            if result:
                return result
            time.sleep(0.5)
        raise TimeoutError(f"no series for {promql!r} after {timeout}s; targets: {self.targets()}")

    def targets(self) -> list[dict]:
        data = json.loads(self._get("/api/v1/targets"))
        return [
            {"job": t["labels"].get("job"), "url": t["scrapeUrl"], "health": t["health"], "error": t.get("lastError")}
            for t in data["data"]["activeTargets"]
        ]

    def stop(self) -> None:
        if self.proc:
            self.proc.stop()
            self.proc = None
