"""A real S3-compatible server: SeaweedFS (``weed server -s3``: master, volume, filer and S3 gateway in
one process) on a fresh data directory, 127.0.0.1 only unless told otherwise.

Why SeaweedFS (the other candidate reachable here was S3Proxy from Maven Central): one static binary
that starts in seconds and holds little memory, with no JVM of its own next to Kafka's and Spark's; its filer
keeps a real directory tree, so listings are consistent at once (what Spark's checkpoint logs need)
and multipart uploads (RocksDB's state uploads through S3A's transfer manager) work.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from .paths import installed
from .process import ManagedProcess, free_port

REGION = "us-east-1"
_DIRECTORY = 1 << 31  # Go's os.ModeDir, in the filer's listing


class ObjectStore:
    """One SeaweedFS server. ``endpoint`` is what S3 clients connect to; ``access_key`` and
    ``secret_key`` are its one identity (allowed everything)."""

    access_key = "streamapp"
    secret_key = "streamapp-secret"

    def __init__(self, workdir: Path, host: str = "127.0.0.1"):
        """`host`: the address it listens on (the end-to-end tests pass the kind network's gateway so
        that pods reach it)."""
        self.workdir = workdir
        self.host = host
        self.ports = {part: free_port() for part in
                      ("master", "master.grpc", "volume", "volume.grpc", "filer", "filer.grpc", "s3", "s3.grpc")}
        self.proc: ManagedProcess | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.ports['s3']}"

    def spark_conf(self) -> dict[str, str]:
        """The S3A settings a local Spark needs for this server (credentials included: tests only)."""
        return {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint,
            "spark.hadoop.fs.s3a.endpoint.region": REGION,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.access.key": self.access_key,
            "spark.hadoop.fs.s3a.secret.key": self.secret_key,
        }

    def client_env(self) -> dict[str, str]:
        """The credentials as the environment variables S3A's default chain reads (how a driver pod
        gets them from its Secret)."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}

    def start(self, timeout: float = 60) -> "ObjectStore":
        weed = installed().weed
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "s3.json"
        config.write_text(json.dumps({"identities": [{
            "name": "streamapp", "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
        ports = [f"-{part.replace('.grpc', '.port.grpc') if '.grpc' in part else part + '.port'}={port}"
                 for part, port in self.ports.items()]
        argv = [weed, "server", f"-ip={self.host}", f"-ip.bind={self.host}", f"-dir={data}", *ports,
                "-s3", f"-s3.config={config}", "-s3.port.iceberg=0", "-s3.port.lance=0",
                "-master.volumeSizeLimitMB=64", "-volume.max=0", "-webdav=false",
                f"-filer.localSocket={self.workdir / 'filer.sock'}"]
        self.proc = ManagedProcess("seaweedfs", argv, self.workdir / "seaweedfs.log").start()
        self.proc.wait_until(self._ready, timeout, "an S3 endpoint and a writable volume")
        return self

    def _ready(self) -> bool:
        try:
            urllib.request.urlopen(self.endpoint, timeout=2)  # noqa: S310 - our own server on a local address
        except urllib.error.HTTPError as exc:  # 403 to an anonymous request: the gateway answers
            if exc.code >= 500:
                return False
        # the bucket is made through the master, which also needs a volume server to have joined
        self.create_bucket("streamapp-ready")
        return True

    def create_bucket(self, name: str) -> str:
        """Create bucket ``name`` (no error when it exists); returns ``s3a://name``."""
        # host:port.grpcPort: the shell would otherwise guess the gRPC port as port + 10000
        master = f"{self.host}:{self.ports['master']}.{self.ports['master.grpc']}"
        out = subprocess.run([str(installed().weed), "shell", f"-master={master}"], capture_output=True, text=True,
                             input=f"s3.bucket.create -name {name}\n", timeout=30)
        if out.returncode != 0 and "already exists" not in out.stdout + out.stderr:
            raise RuntimeError(f"seaweedfs: could not create bucket {name}: {out.stdout[-500:]}{out.stderr[-500:]}")
        return f"s3a://{name}"

    def objects(self, bucket: str, prefix: str = "") -> list[str]:
        """The keys of the objects under ``prefix`` in ``bucket`` (a name, or s3a://name), read from
        SeaweedFS's filer, where every bucket is the folder /buckets/<name>."""
        bucket = bucket.removeprefix("s3a://")
        found, folders = [], [f"/buckets/{bucket}/{prefix.strip('/')}".rstrip("/")]
        while folders:
            folder, last = folders.pop(), ""
            while True:
                query = urllib.parse.urlencode({"limit": 1000, "lastFileName": last})
                request = urllib.request.Request(f"{self._filer}{urllib.parse.quote(folder)}/?{query}",
                                                 headers={"Accept": "application/json"})
                try:
                    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - our own server
                        listing = json.load(answer)
                except urllib.error.HTTPError as exc:
                    if exc.code == 404:
                        break
                    raise
                for entry in listing.get("Entries") or []:
                    path = entry["FullPath"]
                    if entry.get("Mode", 0) & _DIRECTORY:
                        folders.append(path)
                    else:
                        found.append(path.removeprefix(f"/buckets/{bucket}/"))
                last = listing.get("LastFileName") or ""
                if not listing.get("ShouldDisplayLoadMore"):
                    break
        return sorted(found)

    def text(self, bucket: str, key: str) -> str:
        """One object's content (from the filer)."""
        return self.content(bucket, key).decode()

    def content(self, bucket: str, key: str) -> bytes:
        """One object's bytes (from the filer): a Parquet file the tests read back, say."""
        path = urllib.parse.quote(f"/buckets/{bucket.removeprefix('s3a://')}/{key}")
        with urllib.request.urlopen(f"{self._filer}{path}", timeout=10) as answer:  # noqa: S310 - our own server
            return answer.read()

    def delete(self, bucket: str, key: str) -> None:
        """Delete one object (as a user deleting a file of the checkpoint by hand)."""
        path = urllib.parse.quote(f"/buckets/{bucket.removeprefix('s3a://')}/{key}")
        urllib.request.urlopen(urllib.request.Request(f"{self._filer}{path}", method="DELETE"),  # noqa: S310
                               timeout=10).close()

    @property
    def _filer(self) -> str:
        return f"http://{self.host}:{self.ports['filer']}"

    def stop(self) -> None:
        if self.proc:
            # SIGTERM starts a graceful stop that outlasts ManagedProcess's default grace; the data goes
            # right after, so nothing is lost by a SIGKILL a second on.
            self.proc.stop(grace=1)
            self.proc = None
        shutil.rmtree(self.workdir / "data", ignore_errors=True)
