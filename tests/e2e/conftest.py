"""The cluster the end-to-end tests run on: the kind cluster of testbed/kind
(streamapp_testbed.kind_cluster), used and left up when ``make kind-up`` brought it up, else brought
up and down here; Kafka and Postgres of the test bed run on this machine at the kind network's
gateway address.

Without STREAMAPP_E2E_CLUSTER=kind these tests are not collected (`make test` and `make e2e` set it).

Session fixtures: the cluster, a real Prometheus (Debian's) scraping it through the chart's
PodMonitor and ServiceMonitor (streamapp_testkit/e2e_monitors.py) for the whole session, and the
operator installed by its Helm chart.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import yaml

from streamapp_testbed.cluster_client import ClusterClient

if os.environ.get("STREAMAPP_E2E_CLUSTER", "") != "kind":
    collect_ignore_glob = ["test_*.py"]


@dataclass
class E2ECluster(ClusterClient):
    """kubectl, helm and the chart (streamapp_testbed.cluster_client), and where the cluster's Kafka
    and Postgres listen."""

    kafka_bootstrap: str = ""
    postgres_dsn: str = ""
    node_ip: str = ""
    volume_dirs: list = field(default_factory=list)
    discarded_after: bool = False  # the session brought the cluster up and takes it down (with all in it)

    def volume_dir(self, name: str) -> str:
        """A directory on the node for a hostPath PersistentVolume, writable by the runtime's user."""
        from streamapp_testbed import kind_cluster

        path = f"/var/tmp/streamapp-e2e/{name}"
        self.volume_dirs.append(path)
        return kind_cluster.node_dir(path)


@pytest.fixture(scope="session")
def e2e_cluster(tmp_path_factory) -> Iterator[E2ECluster]:
    """testbed/kind's cluster, Kafka and Postgres on this host at the kind network's gateway."""
    from streamapp_testbed import kind_cluster

    with kind_cluster.bed(tmp_path_factory.mktemp("kind-bed")) as bed:
        e2e = E2ECluster(bed.client.kubeconfig, bed.client.context, kafka_bootstrap=bed.kafka_bootstrap,
                         postgres_dsn=bed.postgres_dsn, node_ip=bed.host, discarded_after=bed.created)
        try:
            yield e2e
        finally:
            if not bed.created and e2e.volume_dirs:
                kind_cluster.node("rm", "-rf", *e2e.volume_dirs)


@pytest.fixture(scope="session")
def prometheus(e2e_cluster, tmp_path_factory):
    """Started before the operator, so it sees every pod of the session."""
    from streamapp_testkit.e2e_clicks import NS
    from streamapp_testkit.e2e_monitors import Discovery, scrape_configs
    from streamapp_testbed.prometheus import Prometheus

    c = e2e_cluster
    rendered = c.chart(NS, "template", values={"podMonitor.enabled": "true", "serviceMonitor.enabled": "true",
                                               "podMonitor.interval": "5s", "serviceMonitor.interval": "5s"}).stdout
    workdir = tmp_path_factory.mktemp("prometheus")
    configs, watches = scrape_configs([d for d in yaml.safe_load_all(rendered) if d], workdir)
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
def cluster_object_store(e2e_cluster, tmp_path_factory):
    """The test bed's S3-compatible server on the node's address, where pods reach it (checkpoints)."""
    from streamapp_testbed.s3 import ObjectStore

    store = ObjectStore(tmp_path_factory.mktemp("s3"), host=e2e_cluster.node_ip)
    try:
        yield store.start()
    finally:
        store.stop()


@pytest.fixture(scope="session")
def operator(e2e_cluster, prometheus, cluster_object_store):
    """The operator installed by its chart into the e2e namespace (removed with everything after)."""
    from streamapp_testkit.e2e_clicks import NS, RUN, SHORT_LIVED_JVMS

    c = e2e_cluster
    s3_port = cluster_object_store.endpoint.rsplit(":", 1)[1]  # checkpoints on S3 (test_click_sessions_s3)
    # The apps' JVM options for their short lives (e2e_clicks.SHORT_LIVED_JVMS), as an admin allows them.
    allow = "{" + ",".join(SHORT_LIVED_JVMS) + "}"
    c.install_operator(NS, c.kafka_bootstrap, c.postgres_dsn, values={"operator.scaleDebounce": "5", "operator.resync": "10",
                                                                      "policy.sparkConf.allow": allow},
                       app_ports=(s3_port,))
    yield c
    if c.discarded_after:  # the bed takes the cluster down with every pod in it
        return
    c.uninstall_operator(NS)
    c.kubectl("delete", "pv", f"streamapp-e2e-{RUN}", "--wait=false", check=False)
