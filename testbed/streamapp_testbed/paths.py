"""Where the test bed finds what bootstrap.sh installed, and which versions those are."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TESTBED_DIR = Path(__file__).resolve().parent.parent
REPO_DIR = TESTBED_DIR.parent


@cache
def versions() -> dict[str, str]:
    """The KEY=VALUE pairs of testbed/versions.env (the Makefile reads the same file)."""
    pairs = {}
    for line in (TESTBED_DIR / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            pairs[key.strip()] = value.strip()
    return pairs


def version_line() -> str:
    """For the test bed's --version: the versions of the parts it runs (testbed/versions.env)."""
    return ", ".join(f"{key.removesuffix('_VERSION').lower()} {value}" for key, value in versions().items())


def cache_dir() -> Path:
    return Path(os.environ.get("STREAMAPP_CACHE", Path.home() / ".cache" / "streamapp"))


def images_dir() -> Path:
    """Where `make images` (testbed/cluster/images.sh) saves the images it built, and their tag."""
    return cache_dir() / "images" / "out"


def image_tag() -> str:
    """The tag of the operator and runtime images the last `make images` built (version-commit)."""
    try:
        return (images_dir() / "tag").read_text().strip()
    except FileNotFoundError:
        raise RuntimeError(f"no images built under {images_dir()}: run `make images` first") from None


@dataclass(frozen=True)
class Installed:
    """Paths of the installed parts; each raises a clear error when bootstrap has not run."""

    root: Path

    def _need(self, path: Path) -> Path:
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: run `make deps` (testbed/bootstrap.sh) first")
        return path

    @property
    def kube_bin(self) -> Path:
        v = versions()
        return self._need(self.root / f"kube-{v['KUBE_VERSION']}-kwok-{v['KWOK_VERSION']}" / "bin")

    def kube_tool(self, name: str) -> Path:
        return self._need(self.kube_bin / name)

    @property
    def karpenter(self) -> Path:
        """Karpenter's kwok provider (bin/karpenter-kwok; module-dir: its module, with the CRDs, in Go's cache)."""
        return self._need(self.root / f"karpenter-{versions()['KARPENTER_VERSION']}")

    @property
    def kafka_jars(self) -> Path:
        return self._need(self.root / "jars" / f"kafka-broker-{versions()['KAFKA_VERSION']}")

    @property
    def spark_kafka_jars(self) -> Path:
        return self._need(self.root / "jars" / f"spark-kafka-{versions()['SPARK_VERSION']}")

    @property
    def previous_spark_python(self) -> Path:
        """The interpreter of a venv with the runtime's requirements at SPARK_PREVIOUS_VERSION's pyspark."""
        return self._need(self.root / f"venv-spark-{versions()['SPARK_PREVIOUS_VERSION']}" / "bin" / "python")

    @property
    def previous_spark_kafka_jars(self) -> Path:
        return self._need(self.root / "jars" / f"spark-kafka-{versions()['SPARK_PREVIOUS_VERSION']}")

    @property
    def spark_s3_jars(self) -> Path:
        v = versions()
        return self._need(self.root / "jars" / f"spark-s3-{v['HADOOP_VERSION']}-{v['AWSSDK_VERSION']}-{v['S3_ACCELERATOR_VERSION']}")

    @property
    def weed(self) -> Path:
        """SeaweedFS's binary: the test bed's S3-compatible server."""
        return self._need(self.root / f"seaweedfs-{versions()['SEAWEEDFS_VERSION']}" / "weed")

    @property
    def schema_registry(self) -> Path:
        """The schema registry's binary (a server of the Confluent Schema Registry REST API)."""
        return self._need(self.root / f"schema-registry-{versions()['SCHEMA_REGISTRY_VERSION']}" / "bin" / "schema-registry")

    def spark_jars_conf(self) -> str:
        """The value for `spark.jars`: the Kafka and S3A connectors and their dependencies, comma-separated."""
        folders = (self.spark_kafka_jars, self.spark_s3_jars)
        return ",".join(str(p) for folder in folders for p in sorted(folder.glob("*.jar")))


def java_runtime_version() -> str:
    """The version of the JDK on PATH (its `release` file), e.g. 17.0.15+6-Debian-1deb12u1; "" if none."""
    java = shutil.which("java")
    if not java:
        return ""
    release = Path(java).resolve().parent.parent / "release"
    for line in release.read_text().splitlines() if release.is_file() else []:
        if line.startswith("JAVA_RUNTIME_VERSION="):
            return line.partition("=")[2].strip('"')
    return ""


def class_archive() -> Path:
    """The class-data-sharing archive of this Python environment's Spark on this JDK (bootstrap.sh
    makes it with streamapp_runtime/class_archive.py; a JVM it does not fit ignores it)."""
    return cache_dir() / "class-archive" / f"{Path(sys.prefix).resolve().name}-java-{java_runtime_version() or 'none'}.jsa"


def installed() -> Installed:
    return Installed(cache_dir())


# The variable through which a local `streamapp run` (streamapp_runtime.run.session) finds the Kafka
# and S3A connector jars; the runtime image has them in Spark's own folder instead.
SPARK_JARS_ENV = "STREAMAPP_SPARK_JARS"


# The variable through which the runtime finds a class-data-sharing archive (streamapp_runtime.run.session).
CLASS_ARCHIVE_ENV = "STREAMAPP_CLASS_ARCHIVE"


def local_run_env() -> dict[str, str]:
    """What a local run of the runtime needs from this machine's installation: the connector jars,
    and the class archive of its Spark when bootstrap.sh made one (JVMs start with half the CPU)."""
    env, archive = {SPARK_JARS_ENV: installed().spark_jars_conf()}, class_archive()
    if archive.is_file():
        env[CLASS_ARCHIVE_ENV] = str(archive)
    return env
