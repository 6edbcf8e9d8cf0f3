"""The cluster the end-to-end tests run on, chosen by STREAMAPP_E2E_CLUSTER:

* ``local`` (``make e2e``): the project's real single-node cluster (streamapp_testbed.cluster);
  one already up (``make cluster-up``) is used and left up, else it is brought up and down here.
* ``kind`` (``make e2e-kind``): the kind cluster of KUBECONFIG; Kafka and Postgres of the test bed
  run on this machine at the kind network's gateway address (STREAMAPP_E2E_HOST).

Without STREAMAPP_E2E_CLUSTER these tests are not collected: `make test` has no e2e stage yet.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

MODE = os.environ.get("STREAMAPP_E2E_CLUSTER", "")
if MODE not in ("local", "kind"):
    collect_ignore_glob = ["test_*.py"]

REPO = Path(__file__).resolve().parents[2]
CONTEXTS = {"local": "streamapp-cluster", "kind": "kind-streamapp-e2e"}


@dataclass
class E2ECluster:
    mode: str
    kubeconfig: Path
    kafka_bootstrap: str
    postgres_dsn: str
    node_ip: str
    volume_dirs: list = field(default_factory=list)

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        argv = [str(_tool("kubectl")), f"--kubeconfig={self.kubeconfig}", f"--context={CONTEXTS[self.mode]}", *args]
        result = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
        return result

    def apply(self, *docs: dict) -> None:
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))

    def helm(self, *args: str) -> subprocess.CompletedProcess:
        argv = [str(_tool("helm")), f"--kubeconfig={self.kubeconfig}", f"--kube-context={CONTEXTS[self.mode]}", *args]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            raise RuntimeError(f"helm {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
        return result

    def volume_dir(self, name: str) -> str:
        """A directory on the node for a hostPath PersistentVolume, writable by the runtime's user."""
        path = f"/var/tmp/streamapp-e2e/{name}"
        self.volume_dirs.append(path)
        if self.mode == "local":
            Path(path).mkdir(parents=True, exist_ok=True)
            os.chmod(path, 0o777)
        else:
            subprocess.run(["docker", "exec", "streamapp-e2e-control-plane", "sh", "-c",
                            f"mkdir -p {path} && chmod 777 {path}"], check=True)  # fmt: skip
        return path


def _tool(name: str) -> Path:
    from streamapp_testbed.paths import cache_dir, installed

    if name == "kubectl":
        return installed().kube_tool("kubectl")
    found = sorted(cache_dir().glob(f"{name}-*/bin/{name}"))
    if found:
        return found[-1]
    from shutil import which

    if which(name):
        return Path(which(name))
    raise FileNotFoundError(f"no {name}: build it (make deps) or put it on PATH")


def _check_kubeconfig(path: Path, mode: str) -> None:
    config = yaml.safe_load(path.read_text())
    if config.get("current-context") != CONTEXTS[mode]:
        raise RuntimeError(f"{path}: context {config.get('current-context')!r} is not {CONTEXTS[mode]!r}; refusing")


@pytest.fixture(scope="session")
def e2e_cluster(tmp_path_factory) -> Iterator[E2ECluster]:
    if MODE == "local":
        from streamapp_testbed import cluster

        started = cluster.read_state() is None
        state = cluster.up()
        try:
            kubeconfig = Path(state["kubeconfig"])
            _check_kubeconfig(kubeconfig, MODE)
            e2e = E2ECluster(MODE, kubeconfig, state["kafka_bootstrap"], state["postgres_dsn"], state["node_ip"])
            yield e2e
        finally:
            if "e2e" in locals():
                for path in e2e.volume_dirs:
                    shutil.rmtree(path, ignore_errors=True)
            if started:
                cluster.down()
        return
    # kind: the test bed's Kafka and Postgres on the kind network's gateway address.
    from streamapp_testbed.kafka import KafkaBroker
    from streamapp_testbed.postgres import Postgres

    host = os.environ["STREAMAPP_E2E_HOST"]
    kubeconfig = Path(os.environ["KUBECONFIG"])
    _check_kubeconfig(kubeconfig, MODE)
    kafka = KafkaBroker(tmp_path_factory.mktemp("kafka"), host=host)
    pg = Postgres(tmp_path_factory.mktemp("postgres"), host=host, allow=os.environ.get("STREAMAPP_E2E_ALLOW", "0.0.0.0/0"))
    try:
        kafka.start()
        pg.start()
        yield E2ECluster(MODE, kubeconfig, kafka.bootstrap, pg.dsn, host)
    finally:
        kafka.stop()
        pg.stop()
