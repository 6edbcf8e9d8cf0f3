"""The cluster the end-to-end tests run on, chosen by STREAMAPP_E2E_CLUSTER:

* ``local`` (``make e2e``): the project's real single-node cluster (streamapp_testbed.cluster);
  one already up (``make cluster-up``) is used and left up, else it is brought up and down here.
* ``kind`` (``make e2e-kind``): the kind cluster of KUBECONFIG; Kafka and Postgres of the test bed
  run on this machine at the kind network's gateway address (STREAMAPP_E2E_HOST).

Without STREAMAPP_E2E_CLUSTER these tests are not collected (`make test`, `make e2e` and
`make e2e-kind` set it).

Session fixtures: the cluster, a real Prometheus (Debian's) scraping it through the chart's
PodMonitor and ServiceMonitor (e2e_monitors.py) for the whole session, and the operator installed
by its Helm chart.
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
    discarded_after: bool = False  # the session brought the cluster up and takes it down (with all in it)

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        return _run("kubectl", [f"--kubeconfig={self.kubeconfig}", f"--context={CONTEXTS[self.mode]}"], args,
                    input=input, check=check, timeout=120)

    def apply(self, *docs: dict) -> None:
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))

    def helm(self, *args: str) -> subprocess.CompletedProcess:
        return _run("helm", [f"--kubeconfig={self.kubeconfig}", f"--kube-context={CONTEXTS[self.mode]}"], args,
                    input=None, check=True, timeout=300)

    def chart(self, namespace: str, *verb: str, values: dict[str, str]) -> subprocess.CompletedProcess:
        """`helm <verb> streamapp charts/streamapp-operator` in `namespace`, watching it, with `values` set."""
        sets = [arg for key, value in {"watchNamespaces": f"{{{namespace}}}", **values}.items()
                for arg in ("--set", f"{key}={value}")]
        return self.helm(*verb, "streamapp", str(REPO / "charts" / "streamapp-operator"), "-n", namespace, *sets)

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


def _run(tool: str, context: list[str], args: tuple[str, ...], input: str | None, check: bool,
         timeout: float) -> subprocess.CompletedProcess:
    result = subprocess.run([str(_tool(tool)), *context, *args], input=input, capture_output=True, text=True,
                            timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError(f"{tool} {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


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
            e2e = E2ECluster(MODE, kubeconfig, state["kafka_bootstrap"], state["postgres_dsn"], state["node_ip"],
                             discarded_after=started)
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


@pytest.fixture(scope="session")
def prometheus(e2e_cluster, tmp_path_factory):
    """Started before the operator, so it sees every pod of the session."""
    from e2e_clicks import NS
    from e2e_monitors import Discovery, scrape_configs
    from streamapp_testbed.prometheus import Prometheus

    c = e2e_cluster
    rendered = c.chart(NS, "template", values={"podMonitor.enabled": "true", "serviceMonitor.enabled": "true",
                                               "podMonitor.interval": "5s", "serviceMonitor.interval": "5s"}).stdout
    workdir = tmp_path_factory.mktemp("prometheus")
    configs, watches = scrape_configs([d for d in yaml.safe_load_all(rendered) if d], c.kubeconfig, workdir,
                                      through_api_server=c.mode == "kind")
    assert {cfg["job_name"].split("/")[0] for cfg in configs} == {"podMonitor", "serviceMonitor"}
    discovery = Discovery(c.kubectl, watches).start()
    prom = Prometheus(workdir, scrape_interval="5s", scrape_configs=configs)
    prom.monitor_jobs = sorted({rule["replacement"] for cfg in configs for rule in cfg["relabel_configs"]
                                if rule.get("target_label") == "job"})
    try:
        prom.start()
        yield prom
    finally:
        prom.stop()
        discovery.stop()


@pytest.fixture(scope="session")
def operator(e2e_cluster, prometheus):
    """The operator installed by its chart into the e2e namespace (removed with everything after)."""
    from e2e_clicks import NS, RUN

    c = e2e_cluster
    c.kubectl("create", "namespace", NS, check=False)
    # The test bed's Kafka and Postgres listen on ports of their own: allowed out of the apps' and
    # the operator's NetworkPolicies as a user would (where the network plugin enforces them).
    kafka_port, pg_port = c.kafka_bootstrap.rsplit(":", 1)[1], c.postgres_dsn.rsplit(":", 1)[1].split("/")[0]
    c.chart(NS, "upgrade", "--install", "--wait", "--timeout", "5m",
            values={"operator.scaleDebounce": "5", "operator.resync": "10", "networkPolicy.enabled": "true",
                    "networkPolicy.egressPorts": f"{{53/UDP,53/TCP,443,6443,9090,{kafka_port}}}",
                    "appNetworkPolicies.egressPorts": f"{{53/UDP,53/TCP,443,6443,{kafka_port},{pg_port}}}"})
    yield c
    if c.discarded_after:  # cluster.down() ends every pod and process, and the next up starts afresh
        return
    c.kubectl("delete", "streamapps", "--all", "-n", NS, "--wait=true", "--timeout=120s", check=False)
    c.helm("uninstall", "streamapp", "-n", NS)
    c.kubectl("delete", "namespace", NS, "--wait=true", "--timeout=120s", check=False)
    c.kubectl("delete", "pv", f"streamapp-e2e-{RUN}", "--wait=false", check=False)
