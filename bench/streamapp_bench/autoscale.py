"""Load-step autoscaling on the kind cluster (streamapp_testbed.kind_cluster): `scaling.mode: load`
following a steady input rate, then ×4, then back, once per rescale method (in place against
today's driver restart), interleaved when there are several rounds.

The operator is installed by its chart; each run is a fresh load-step app (streamapp_testbed.load_app:
topic of `partitions` partitions, checkpoint volume, Postgres table; `work` is its CPU knob), and
after the run its table is compared with what the broker acknowledged: rows lost and duplicated. The app
starts with maxExecutors 1 (so it does not begin at the partition count and shrink) and, once its
batches flow, maxExecutors is raised to 4: then the base phase, the ×4 step and the way back, each
second sampled (autoscale_probe). Figures: autoscale_analysis."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from streamapp_testbed import cluster_apps, kafka_admin, kind_cluster
from streamapp_testbed.waiting import NotYet, wait_for
from streamapp_testbed.load_app import QUERY, PacedProducer, compare, manifest, table_counts

from . import autoscale_analysis as analysis
from .autoscale_probe import Probe

log = logging.getLogger("bench.autoscale")
NS, CLASS = "streamapp-bench-autoscale", "streamapp-bench-autoscale"
METHODS = ("restart", "inPlace")


def rescale_field_known() -> bool:
    """Whether this tree's API (and so the CRD its chart installs) has spec.scaling.rescale."""
    from streamapp_api.spec import Scaling

    return "rescale" in Scaling.model_fields


class Run:
    """One app through settle, base, ×4 and back."""

    def __init__(self, kind: kind_cluster.KindBed, method: str, round_: int, opts: dict, pass_method: bool):
        self.client, self.kind, self.method, self.round, self.opts = kind.client, kind, method, round_, opts
        rid = os.urandom(2).hex()
        self.name = f"load-{method.lower()}-{round_}-{rid}"
        self.topic, self.table, self.volume = f"bench-load-{rid}", f"load_counts_{rid}", f"{NS}-{rid}"
        self.volume_dir = f"/var/tmp/streamapp-bench/autoscale-{rid}"  # on the node
        self.pass_method = pass_method
        self.rate = opts["rate"]

    def _phase(self, probe: Probe, name: str, seconds: float, samples: list[dict]) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            tick = time.monotonic()
            s = probe.sample(name)
            s["produced"] = self.producer.per_second.get(int(time.time()) - 1)
            samples.append(s)
            time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))

    def settled(self, probe: Probe):
        s = probe.sample("settle")
        ok = (s.get("target") == 1 and s.get("pods") == 1 and s.get("last_batch") is not None
              and s["t"] - s["last_batch"] < 3 * self.opts["trigger_s"] and (s.get("registered") or 0) >= 1)
        return True if ok else NotYet(f"target {s.get('target')}, {s.get('pods')} executor pods, "
                                      f"last batch {s.get('last_batch')}")

    def go(self) -> dict:
        c, o = self.client, self.opts
        bootstrap, dsn = self.kind.kafka_bootstrap, self.kind.postgres_dsn
        c.apply(cluster_apps.hostpath_volume(self.volume, kind_cluster.node_dir(self.volume_dir), CLASS))
        kafka_admin.create_topic(bootstrap, self.topic, partitions=o["partitions"])
        self.producer = PacedProducer(bootstrap, self.topic, lambda: self.rate)
        self.producer.start()
        app = manifest(self.name, NS, bootstrap, self.topic, self.table, CLASS,
                       rescale=self.method if self.pass_method else None, work=o["work"], trigger=o["trigger"],
                       up_window=o["up_window"], down_window=o["down_window"], executor_cpu=o["executor_cpu"])
        t_apply = time.time()
        c.apply(app)
        probe = Probe(c, NS, self.name, QUERY, bootstrap, self.topic, o["partitions"], t0=t_apply)
        samples: list[dict] = []
        try:
            wait_for("batches of the first driver", lambda: self.settled(probe), timeout=o["timeout"], every=2)
            c.kubectl("patch", "streamapp", self.name, "-n", NS, "--type", "merge",
                      "-p", json.dumps({"spec": {"scaling": {"maxExecutors": o["max_executors"]}}}))
            wait_for("batches after maxExecutors was raised", lambda: self.settled(probe), timeout=o["timeout"], every=2)
            probe.t0 = time.time()  # t = 0: the base phase begins
            log.info("%s: settled %.0f s after apply; base phase", self.name, probe.t0 - t_apply)
            self._phase(probe, "base", o["base_s"], samples)
            step_at = time.time() - probe.t0
            self.rate = o["rate"] * o["factor"]
            self._phase(probe, "step", o["step_s"], samples)
            back_at = time.time() - probe.t0
            self.rate = o["rate"]
            self._phase(probe, "back", o["back_s"], samples)
        finally:
            acked = self.producer.stop()
            probe.close()
        want = acked
        try:
            wait_for("every record counted in the table",
                     lambda: sum(table_counts(dsn, self.table).values()) >= sum(want.values()),
                     timeout=o["drain_s"], every=2)
        except TimeoutError as exc:
            log.warning("%s: %s", self.name, exc)
        rows = compare(want, table_counts(dsn, self.table))
        if self.producer.errors:
            rows["producer_errors"] = len(self.producer.errors)
        figures = analysis.analyse(samples, step_at, back_at, o["trigger_s"])
        log.info("%s: %s; rows %s", self.name, {k: v for k, v in figures.items() if k != "changes"}, rows)
        return {"method": self.method, "round": self.round, "app": self.name, "rescale_field_set": self.pass_method,
                "step_at": round(step_at, 2), "back_at": round(back_at, 2), "settle_s": round(probe.t0 - t_apply, 1),
                "figures": figures, "rows": rows, "samples": samples}

    def clean(self) -> None:
        self.client.kubectl("delete", "streamapp", self.name, "-n", NS, "--wait=true", "--timeout=120s", check=False)
        self.client.kubectl("delete", "pvc", "-n", NS, "--all", "--wait=true", "--timeout=60s", check=False)
        self.client.kubectl("delete", "pv", self.volume, "--wait=false", check=False)
        kind_cluster.node("rm", "-rf", self.volume_dir)


def run(bed, workdir: Path, methods: tuple[str, ...] = METHODS, rounds: int = 1, rate: float = 800, factor: float = 4,
        work: int = 4000, partitions: int = 8, trigger: str = "4s", base_s: float = 45, step_s: float = 180,
        back_s: float = 90, up_window: str = "15s", down_window: str = "60s", executor_cpu: str = "150m",
        max_executors: int = 4, timeout: float = 300, results: Path | None = None) -> dict:  # noqa: ARG001
    known = rescale_field_known()
    skipped = {}
    if not known and len(methods) > 1:
        skipped = {m: "spec.scaling.rescale is not in this tree: only the restart it does today runs"
                   for m in methods if m != "restart"}
        methods = ("restart",)
    opts = {"rate": rate, "factor": factor, "work": work, "partitions": partitions, "trigger": trigger,
            "trigger_s": float(trigger.rstrip("s")), "base_s": base_s, "step_s": step_s, "back_s": back_s,
            "up_window": up_window, "down_window": down_window, "executor_cpu": executor_cpu,
            "max_executors": max_executors, "timeout": timeout, "drain_s": 120}
    runs: list[dict] = []
    with kind_cluster.bed(workdir) as kind:
        client = kind.client
        try:
            client.install_operator(NS, kind.kafka_bootstrap, kind.postgres_dsn, values={"operator.resync": "10"})
            client.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pg", "namespace": NS},
                          "stringData": {"uri": kind.postgres_dsn}})
            node = json.loads(client.kubectl("get", "nodes", "-o", "json").stdout)["items"][0]["status"]["allocatable"]
            for i in range(rounds):
                for method in methods:
                    one = Run(kind, method, i + 1, opts, pass_method=known)
                    try:
                        runs.append(one.go())
                    finally:
                        one.clean()
        finally:
            if not kind.created:  # a cluster `make kind-up` left up stays up, without what the bench put in it
                client.uninstall_operator(NS)
    result = {"options": {k: v for k, v in opts.items() if k != "trigger_s"}, "methods": list(methods),
              "skipped": skipped, "cluster": "kind", "node_allocatable": {k: node.get(k) for k in ("cpu", "memory")},
              "summary": analysis.summary(runs),
              "runs": [{k: v for k, v in r.items() if k != "samples"} for r in runs],
              "load_at_end": " ".join(f"{x:.1f}" for x in os.getloadavg())}
    if results is not None:
        analysis.write_csv(results / "autoscale.csv", runs)
        try:
            analysis.plot(results / "autoscale.png", runs, analysis.plot_title(result))
        except ImportError as exc:  # the samples are kept: `python -m streamapp_bench.autoscale_analysis DIR` draws it
            log.warning("no PNG drawn (%s); the samples are in %s", exc, results / "autoscale.csv")
    return result
