"""`make demo`: the operator's main job on a kind cluster.

Brings the cluster up (streamapp_testbed.kind_cluster: testbed/kind's cluster with the project's
images in its node; Kafka and Postgres on this host at the kind network's gateway), installs the
operator with its Helm chart,
applies the click-sessions app and produces generated clicks, shows `kubectl get sapp` as the app
goes from Pending to Running, prints the windows it wrote to Kafka and Postgres, kills the driver
pod, shows the new driver restored from the checkpoint with exactly the windows a correct run gives
(none twice: the Kafka sink is exactly-once), and tears everything down. A cluster that `make
kind-up` left up is used and left up. The end-to-end tests run the same app through the same code
(streamapp_testbed.cluster_apps, cluster_client, kind_cluster).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from streamapp_testbed import cluster_apps, kafka_admin, kind_cluster
from streamapp_testbed.cluster_client import ClusterClient
from streamapp_testbed.waiting import wait_for

NS = "streamapp-demo"
APP = "click-sessions"
CLASS = "streamapp-demo"
T0 = time.monotonic()


def say(message: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {message}", flush=True)


class Watch:
    """`kubectl get sapp` printed whenever its row changes, until `done()` says True."""

    def __init__(self, client: ClusterClient):
        self.client, self.last = client, None

    def row(self) -> str:
        out = self.client.kubectl("get", "sapp", APP, "-n", NS, check=False).stdout.splitlines()
        return "\n".join(out) if len(out) == 2 else ""

    def until(self, what: str, done, timeout: float = 600) -> None:
        def check():
            row = self.row()
            if row:
                header, line = row.splitlines()
                changed = line.rsplit(None, 1)[0]  # all but AGE
                if changed != self.last:
                    if self.last is None:
                        print(f"{'':10}$ kubectl get sapp -n {NS} -w\n{'':10}{header}", flush=True)
                    print(f"[{time.monotonic() - T0:6.1f}s] {line}", flush=True)
                    self.last = changed
            return done()

        wait_for(what, check, timeout=timeout, every=2)


def show_windows(bootstrap: str, dsn: str, out: str, table: str) -> None:
    import psycopg

    topic = cluster_apps.topic_rows(bootstrap, out)
    with psycopg.connect(dsn, connect_timeout=5) as conn:
        per_window = conn.execute(
            f"SELECT window_start, count(*), sum(clicks), sum(page_views), sum(time_spent) FROM {table} "
            "GROUP BY window_start ORDER BY window_start").fetchall()
    print(f"{'':10}Postgres table {table}, by 1-minute window (closed by the 30 s watermark):")
    print(f"{'':12}{'window start (UTC)':<20} {'sessions':>8} {'clicks':>7} {'views':>6} {'time spent':>10}")
    for start, sessions, clicks, views, spent in per_window:
        print(f"{'':12}{start:%Y-%m-%d %H:%M}     {sessions:>8} {clicks:>7} {views:>6} {spent:>10}")
    print(f"{'':10}Kafka topic {out}: {len(topic)} windows, each once; e.g.")
    for (session, start), (clicks, views, spent) in sorted(topic.items())[:3]:
        print(f"{'':12}{session} {start}: clicks={clicks} page_views={views} time_spent={spent}")


def main() -> int:
    run = os.urandom(3).hex()
    topic, out, table = f"clickstream-{run}", f"session-summaries-{run}", f"session_stats_{run}"
    volume, volume_dir = f"streamapp-demo-{run}", f"/var/tmp/streamapp-demo/{run}"
    say("using the kind cluster make kind-up left up" if kind_cluster.is_up()
        else "bringing up a kind cluster (make kind-up)")
    with tempfile.TemporaryDirectory(prefix="streamapp-demo-") as workdir, kind_cluster.bed(Path(workdir)) as bed:
        try:
            return _run(bed, run, topic, out, table, volume, volume_dir)
        finally:
            say("tearing down")
            if not bed.created:  # a cluster left up stays up, without the demo's objects
                bed.client.uninstall_operator(NS)
                bed.client.kubectl("delete", "pv", volume, "--wait=false", check=False)
                kind_cluster.node("rm", "-rf", volume_dir)
            say("done: everything the demo started is stopped" + ("" if bed.created else " (the cluster stays up)"))


def _run(bed: kind_cluster.KindBed, run: str, topic: str, out: str, table: str, volume: str, volume_dir: str) -> int:
    client, bootstrap, dsn = bed.client, bed.kafka_bootstrap, bed.postgres_dsn
    say(f"cluster up: kind context {client.context}, Kafka {bootstrap}, Postgres on {bed.host}")
    say(f"helm upgrade --install streamapp-operator charts/streamapp-operator -n {NS} --wait ...")
    client.install_operator(NS, bootstrap, dsn, values={"operator.resync": "10"})
    say("operator running (admission webhook on)")

    client.apply(cluster_apps.hostpath_volume(volume, kind_cluster.node_dir(volume_dir), CLASS), {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pg", "namespace": NS},
        "stringData": {"uri": dsn}})  # fmt: skip
    kafka_admin.create_topic(bootstrap, topic, partitions=2)
    sent = cluster_apps.round_events(0)
    cluster_apps.produce(bootstrap, topic, sent)
    say(f"produced {len(sent)} clicks of {len({e.session_id for e in sent})} sessions to {topic} (2 partitions)")
    app = cluster_apps.click_sessions_exactly_once(NS, bootstrap, CLASS, "5s", backoff="2s", topic=topic, out=out,
                                                   table=table, dead_letter=f"{APP}-dlq-{run}")
    client.apply(app)
    say(f"kubectl apply: StreamApp {APP} (examples/click-sessions.yaml, Kafka and checkpoint of this cluster)")
    watch = Watch(client)
    exact = lambda: cluster_apps.outputs_exact(bootstrap, dsn, out, table, sent)  # noqa: E731
    watch.until("a running app with every window written",
                lambda: client.app_object(NS, APP).get("status", {}).get("phase") == "Running" and exact() is True)
    say(f"every closed window written, as a correct run gives ({len(cluster_apps.expected(sent))} windows):")
    show_windows(bootstrap, dsn, out, table)

    driver = client.running(NS, APP, "driver")[0]["metadata"]
    client.kubectl("delete", "pod", driver["name"], "-n", NS, "--grace-period=0", "--force")
    say(f"killed the driver: kubectl delete pod {driver['name']} --force")
    more = cluster_apps.round_events(1)
    cluster_apps.produce(bootstrap, topic, more)
    sent += more
    say(f"produced {len(more)} more clicks while no driver runs")
    watch.until("a new driver restored from the checkpoint with every window written",
                lambda: any(p["metadata"]["uid"] != driver["uid"] for p in client.running(NS, APP, "driver"))
                and exact() is True)  # fmt: skip
    status = client.app_object(NS, APP)["status"]
    say(f"restored from the checkpoint (restarts {status.get('restarts')}, last: "
        f"{status.get('lastRestart', {}).get('reason')}): topic and table hold exactly the "
        f"{len(cluster_apps.expected(sent))} windows a correct run gives, none twice")
    show_windows(bootstrap, dsn, out, table)
    return 0
