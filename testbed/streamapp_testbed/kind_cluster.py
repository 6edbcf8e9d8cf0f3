"""The kind cluster of testbed/kind (`make kind-up`) for the end-to-end tests and `make demo`: brought
up when none is, the images `make images` saved loaded into its node, and brought down again by
whoever brought it up; with the test bed's Kafka and Postgres on this host at the kind network's
gateway, where the node reaches them (`bed`). Every Docker and kind call goes through
testbed/kind/kind.sh, which owns the engine, the network and the node's name."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .cluster_client import ClusterClient, check_kubeconfig
from .kafka import KafkaBroker
from .networks import KIND_GATEWAY, KIND_SUBNET
from .paths import REPO_DIR, cache_dir, image_tag, images_dir
from .postgres import Postgres

NAME = "streamapp"  # kind.sh's cluster (KIND_CLUSTER_NAME unset)
CONTEXT = f"kind-{NAME}"
KIND_SH = REPO_DIR / "testbed" / "kind" / "kind.sh"
IMAGES = ("operator", "runtime")


def kubeconfig() -> Path:
    return cache_dir() / f"kind-{NAME}.kubeconfig"


def _kind_sh(*args: str, capture: bool = False, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "CACHE": str(cache_dir())}
    env.pop("KIND_CLUSTER_NAME", None)
    result = subprocess.run(["bash", str(KIND_SH), *args], env=env, text=True,
                            stdout=subprocess.PIPE if capture else None, stderr=subprocess.PIPE if capture else None)
    if check and result.returncode != 0:
        detail = f":\n{result.stdout}\n{result.stderr}" if capture else " (its output is above)"
        raise RuntimeError(f"testbed/kind/kind.sh {' '.join(args)} exited {result.returncode}{detail}")
    return result


def is_up() -> bool:
    """Its engine runs, kind lists the cluster, and its kubeconfig is there."""
    status = _kind_sh("status", capture=True, check=False)
    return status.returncode == 0 and NAME in status.stdout.split() and kubeconfig().exists()


def node(*argv: str) -> str:
    """A command's output in the node container."""
    return _kind_sh("node", *argv, capture=True).stdout


def up() -> bool:
    """The cluster, with this checkout's images in its node. True when this call created it."""
    created = not is_up()
    if created:
        _kind_sh("up")
    load_images()
    return created


def load_images() -> None:
    """`kind load image-archive` of the tars of `make images`, unless the node has that tag already."""
    tag = image_tag()
    present = set(node("ctr", "-n", "k8s.io", "images", "ls", "-q").split())
    missing = [str(images_dir() / f"{name}.tar") for name in IMAGES
               if f"docker.io/streamapp/{name}:{tag}" not in present]
    if missing:
        _kind_sh("load", *missing)


def down() -> None:
    _kind_sh("down")


def node_dir(path: str) -> str:
    """A directory on the node for a hostPath PersistentVolume, writable by the runtime's user."""
    node("sh", "-c", 'mkdir -p "$1" && chmod 777 "$1"', "sh", path)  # the path as an argument, never as shell text
    return path


@dataclass
class KindBed:
    client: ClusterClient
    kafka_bootstrap: str
    postgres_dsn: str
    host: str  # this host on the kind network: where Kafka, Postgres (and an S3 server) listen for pods
    created: bool  # this bed brought the cluster up, and takes it down with all in it


@contextmanager
def bed(workdir: Path) -> Iterator[KindBed]:
    """The cluster, and Kafka and Postgres on this host at the kind network's gateway. The node
    masquerades its pods' traffic: Postgres lets the network's subnet in."""
    created = up()
    kafka = KafkaBroker(workdir / "kafka", host=KIND_GATEWAY)
    pg = Postgres(workdir / "postgres", host=KIND_GATEWAY, allow=KIND_SUBNET)
    try:
        check_kubeconfig(kubeconfig(), CONTEXT)
        kafka.start()
        pg.start()
        yield KindBed(ClusterClient(kubeconfig(), CONTEXT), kafka.bootstrap, pg.dsn, KIND_GATEWAY, created)
    finally:
        kafka.stop()
        pg.stop()
        if created:
            down()
