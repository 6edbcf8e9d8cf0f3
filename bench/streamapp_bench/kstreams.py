"""(c) and (d): the Kafka Streams topology and the raw consumer, built once by Maven into the cache
folder named after the Kafka version and a hash of the Java sources (a warm run only checks it)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from streamapp_testbed.paths import cache_dir, versions

PROJECT = Path(__file__).resolve().parents[1] / "kstreams"


def _source_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted([PROJECT / "pom.xml", *(PROJECT / "src").rglob("*.java")]):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def build() -> Path:
    """The folder holding the jar and lib/; built with Maven when missing."""
    out = cache_dir() / "bench" / f"kstreams-{versions()['KAFKA_VERSION']}-{_source_hash()}"
    if (out / ".complete").exists():
        return out
    log = cache_dir() / "logs" / "maven-kstreams-bench.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as sink:
        code = subprocess.run(["mvn", "-q", "-B", f"-Dmaven.repo.local={cache_dir() / 'm2'}", f"-Dbench.out={out}",
                               f"-Dkafka.version={versions()['KAFKA_VERSION']}", "-Dmaven.test.skip=true", "package"], cwd=PROJECT, stdout=sink,
                              stderr=subprocess.STDOUT).returncode
    if code != 0:
        raise RuntimeError(f"building {PROJECT} failed; log: {log}")
    (out / ".complete").touch()
    return out


def classpath(built: Path) -> str:
    return ":".join([str(next(built.glob("kstreams-bench-*.jar"))), str(built / "lib" / "*")])
