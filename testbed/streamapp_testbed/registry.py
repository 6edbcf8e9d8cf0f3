"""A real container registry (CNCF Distribution, built by testbed/build-registry.sh) on 127.0.0.1,
for the test of `make push` (no other registry is reachable from here)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import yaml

from .paths import cache_dir, versions
from .process import ManagedProcess, free_port

MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json")


class Registry:
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.port = free_port()
        self.proc: ManagedProcess | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> "Registry":
        binary = cache_dir() / f"registry-{versions()['REGISTRY_VERSION']}" / "bin" / "registry"
        if not binary.exists():
            raise FileNotFoundError(f"{binary} is missing: run `make registry` (testbed/build-registry.sh)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "config.yml"
        config.write_text(yaml.safe_dump({
            "version": 0.1, "log": {"level": "warn"}, "http": {"addr": self.address, "secret": "test-bed"},
            "storage": {"filesystem": {"rootdirectory": str(self.workdir / "data")}}}))  # fmt: skip
        self.proc = ManagedProcess("registry", [binary, "serve", config], self.workdir / "registry.log").start()
        self.proc.wait_until(lambda: self.get("/v2/") == {}, timeout, "an answer on /v2/")
        return self

    def get(self, path: str, accept: str | None = None) -> dict:
        request = urllib.request.Request(f"http://{self.address}{path}", headers={"Accept": accept} if accept else {})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def tags(self, repository: str) -> list[str]:
        return self.get(f"/v2/{repository}/tags/list").get("tags") or []

    def config_digest(self, repository: str, tag: str) -> str:
        """The digest of the image's config blob: what `docker image inspect -f {{.Id}}` says locally."""
        return self.get(f"/v2/{repository}/manifests/{tag}", accept=MANIFEST_TYPES)["config"]["digest"]

    def stop(self) -> None:
        if self.proc:
            self.proc.stop()
            self.proc = None
