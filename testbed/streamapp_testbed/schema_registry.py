"""A real schema registry on 127.0.0.1: a server of the Confluent Schema Registry REST API (subjects,
versions, schema ids, compatibility levels), with in-memory storage, so each start is empty.

Which server and why: SCHEMA_REGISTRY_VERSION in testbed/versions.env. It is one static Go binary
(testbed/build-schema-registry.sh) that answers in well under a second, so every test run gets a
registry of its own without a JVM next to Kafka's and Spark's. Clients talk to it as users do to
theirs: confluent-kafka's SchemaRegistryClient and its Avro and Protobuf serializers.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from base64 import b64encode
from pathlib import Path

from .paths import installed
from .process import ManagedProcess, free_port

# The registry's default when a subject sets none: Confluent's default, what users meet.
DEFAULT_COMPATIBILITY = "BACKWARD"


class SchemaRegistry:
    """One registry. `url` is what clients are given; `client_conf()` their SchemaRegistryClient
    settings (credentials included when it was started with `basic_auth`).

    `basic_auth=True`: every endpoint but the health check asks for HTTP Basic credentials, those of
    one admin user (`username`, a `password` made per instance) that the registry creates at start."""

    username = "streamapp"

    def __init__(self, workdir: Path, host: str = "127.0.0.1", basic_auth: bool = False):
        self.workdir = workdir
        self.host = host
        self.port = free_port()
        self.basic_auth = basic_auth
        self.password = uuid.uuid4().hex
        self.proc: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def client_conf(self) -> dict[str, str]:
        """The settings of confluent-kafka's SchemaRegistryClient for this registry."""
        conf = {"url": self.url}
        if self.basic_auth:
            conf["basic.auth.user.info"] = f"{self.username}:{self.password}"
        return conf

    def _config(self) -> dict:
        config: dict = {
            "server": {"host": self.host, "port": self.port},
            "storage": {"type": "memory"},
            "compatibility": {"default_level": DEFAULT_COMPATIBILITY},
            "logging": {"level": "info", "format": "text"},
        }
        if self.basic_auth:
            # The password reaches the registry through its environment (start), not the file.
            config["security"] = {"auth": {
                "enabled": True,
                "methods": ["basic"],
                "bootstrap": {"enabled": True, "username": self.username},
            }}
        return config

    def start(self, timeout: float = 30) -> "SchemaRegistry":
        binary = installed().schema_registry
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "schema-registry.json"
        # The server reads YAML, of which JSON is a subset: no YAML writer needed here.
        config.write_text(json.dumps(self._config(), indent=2))
        env = {"SCHEMA_REGISTRY_BOOTSTRAP_PASSWORD": self.password} if self.basic_auth else None
        self.proc = ManagedProcess("schema-registry", [binary, "-config", config],
                                   self.workdir / "schema-registry.log", env=env).start()
        self.proc.wait_until(self._ready, timeout, "an answer to GET /subjects")
        return self

    def _ready(self) -> bool:
        # /subjects rather than the health check: it passes authentication, so a ready registry has
        # its bootstrap user too.
        request = urllib.request.Request(f"{self.url}/subjects")
        if self.basic_auth:
            token = b64encode(f"{self.username}:{self.password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status == 200

    def stop(self) -> None:
        if self.proc:
            self.proc.stop()
            self.proc = None
