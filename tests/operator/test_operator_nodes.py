"""A real node autoscaler on the test bed: Karpenter's kwok provider (streamapp_testbed.karpenter).

No Spark runs in the operator's test bed (kwok pods run no containers), so the test does with the
executor pods what Spark's driver does (Executors). The test bed's own three nodes are cordoned while
the app starts, so that the driver too lands on a node Karpenter makes, then opened again, so that
Karpenter could move the driver (and the executor left next to it) there: only the driver's
do-not-disrupt annotation and PodDisruptionBudget keep its node. The NodePool is tainted and the app
tolerates it, so that nothing else on the shared bed gets (or blocks) a node of it.

A pod bound to a new node in the moment Karpenter lifts the node's `karpenter.sh/unregistered`
NoExecute taint can be deleted by kube-controller-manager's taint eviction, whose view of the node is
a few milliseconds old (kubernetes/kubernetes#139992, a race of any cluster); on this bed it caught
both executors of the new node in the first run here. Spark replaces a lost executor, and so does
Executors.keep; the operator restarts a lost driver, which settled_driver waits out.
"""

from __future__ import annotations

import json
import time

import pytest
import yaml

from streamapp_api import contract
from streamapp_operator import names
from streamapp_operator.render.driver import pod_memory_mib
from streamapp_testbed.kafka_admin import create_topic
from streamapp_testbed.karpenter import INSTANCE_CPU, Karpenter, node_pool, pool_toleration

from streamapp_testkit.operator_bed import simple_app, unique
from streamapp_testbed.waiting import wait_for

pytestmark = pytest.mark.integration
# Two executors and the driver fill one of Karpenter's nodes (INSTANCE_CPU); a third does not fit.
EXECUTOR_CORES = 20
EXECUTOR_MEMORY = "2g"
EXECUTORS = 4
DRIVER_NODE_WATCH = 45  # seconds from the scale-down (a control run without the protections: the node went in 26 s)


@pytest.fixture(scope="module")
def karpenter(control_plane, kwok, tmp_path_factory):
    autoscaler = Karpenter(control_plane, tmp_path_factory.mktemp("karpenter")).start()
    yield autoscaler
    autoscaler.stop()


class Executors:
    """What Spark's driver does with its executor pods: it asks for a number of executors, makes their
    pods from the app's executor template (named and labelled as Spark names them, owned by the driver
    pod, the executor spec's cores and memory plus Spark's overhead as requests), replaces a pod that
    disappears with one of a new executor id, and deletes the pods of executors it gives up."""

    def __init__(self, cluster, app: str, driver: dict):
        self.cluster, self.app, self.driver = cluster, app, driver
        self.wanted, self.next_id = 0, 1

    def pods(self) -> list[dict]:
        """The executor pods alive (not being deleted, not ended)."""
        return [p for p in self.cluster.kube.list("Pod", self.cluster.namespace, names.executor_selector(self.app))
                if not p["metadata"].get("deletionTimestamp") and p["status"].get("phase") not in ("Failed", "Succeeded")]

    def running(self) -> list[dict]:
        return [p for p in self.pods() if p["status"].get("phase") == "Running"]

    def keep(self) -> None:
        """Replace what disappeared (see test's docstring: a pod bound as Karpenter lifts its taint)."""
        for _ in range(self.wanted - len(self.pods())):
            self.cluster.apply(self._pod(self.next_id))
            self.next_id += 1

    def ask(self, wanted: int) -> None:
        self.wanted = wanted
        self.keep()

    def give_up(self, pods: list[dict]) -> None:
        self.wanted -= len(pods)
        for pod in pods:
            self.cluster.kubectl("delete", "pod", pod["metadata"]["name"], "--wait=false")

    def _pod(self, index: int) -> dict:
        config = self.cluster.get("ConfigMap", f"{self.app}-config")["data"]
        pod = yaml.safe_load(config[contract.EXECUTOR_TEMPLATE_FILE])
        meta = pod["metadata"]
        meta["name"] = f"{names.executor_prefix(self.app)}-{index}"
        meta["labels"] = {**meta.get("labels", {}), "spark-role": "executor", "spark-exec-id": str(index)}
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": self.driver["metadata"]["name"],
                                    "uid": self.driver["metadata"]["uid"], "controller": True}]
        memory = f"{pod_memory_mib(EXECUTOR_MEMORY, None)}Mi"
        container = pod["spec"]["containers"][0]
        container["image"] = "streamapp/runtime:test"
        container["resources"] = {"requests": {"cpu": str(EXECUTOR_CORES), "memory": memory},
                                  "limits": {"memory": memory}}
        return pod


def settled_driver(cluster) -> dict | None:
    """The running driver, the same pod a second later (see Executors.keep: the driver can be caught
    too; the operator then starts a new one)."""
    first = cluster.running_driver("app")
    if first is None:
        return None
    time.sleep(1)
    again = cluster.running_driver("app")
    return again if again and again["metadata"]["uid"] == first["metadata"]["uid"] else None


def test_executors_that_do_not_fit_get_nodes_and_idle_nodes_go_but_the_drivers_stays(cluster, kafka, kwok, karpenter):
    started = time.monotonic()
    pool = unique("executors")
    cp = cluster.cp
    cp.kubectl("apply", "-f", "-", input=json.dumps(node_pool(pool, cpu_limit=str(INSTANCE_CPU))))  # one node
    try:
        for node in kwok.node_names:
            cp.kubectl("cordon", node)
        topic = unique("lines")
        create_topic(kafka.bootstrap, topic, partitions=EXECUTORS)
        cluster.pv_for("app")
        placement = {"tolerations": [pool_toleration(pool)]}
        cluster.apply(simple_app(
            "app", cluster.namespace, kafka.bootstrap, topic, executors=EXECUTORS,
            executor={"cores": EXECUTOR_CORES, "memory": EXECUTOR_MEMORY, **placement}, driver=placement,
            state={"checkpoint": {"accessModes": ["ReadWriteMany"]}}))  # executors may run on any node
        driver = wait_for("the driver running on a node Karpenter made", lambda: settled_driver(cluster), timeout=90)
        driver_node = driver["spec"]["nodeName"]
        assert [n["metadata"]["name"] for n in karpenter.nodes(pool)] == [driver_node]

        executors = Executors(cluster, "app", driver)
        executors.ask(EXECUTORS)
        # two fit next to the driver; the pool's limit holds Karpenter back: two wait, and status says so
        # (a reconcile between the scheduler's two verdicts may first count one: the status converges)
        pending = wait_for("Scaling ExecutorsPending for two", lambda: (
            (c := cluster.condition("app", "Scaling")).get("reason") == "ExecutorsPending"
            and f"2 executor pods of {EXECUTORS} wanted wait for room on a node" in c.get("message", "") and c),
            timeout=45)
        assert pending["status"] == "True"
        assert "Insufficient cpu" in pending["message"]
        status = wait_for("REASON ExecutorsPending", lambda: (s := cluster.status("app")).get("reason") == "ExecutorsPending"
                          and s, timeout=30)  # what kubectl get sapp shows: REASON, and MESSAGE with the scheduler's words
        assert status["scaling"]["pendingExecutors"] == 2 and "wait for room on a node" in status["message"]
        assert cluster.condition("app", "Degraded")["status"] == "False"
        assert len(executors.running()) == 2 and len(karpenter.nodes(pool)) == 1

        cp.kubectl("patch", "nodepool", pool, "--type=merge", "-p", '{"spec":{"limits":{"cpu":"1000"}}}')
        wait_for("every executor running", lambda: executors.keep() or len(executors.running()) == EXECUTORS,
                 timeout=60)
        new_nodes = {p["spec"]["nodeName"] for p in executors.running()} - {driver_node}
        assert len(new_nodes) == 1  # the two that waited, on one new node
        assert {n["metadata"]["name"] for n in karpenter.nodes(pool)} == {driver_node, *new_nodes}
        placed = wait_for("Scaling False", lambda: (
            (c := cluster.condition("app", "Scaling")).get("reason") == "ExecutorsScheduled" and c), timeout=30)
        wait_for("REASON gone", lambda: "reason" not in cluster.status("app"), timeout=30)
        assert placed["status"] == "False" and "pendingExecutors" not in cluster.status("app")["scaling"]
        scaled_up = time.monotonic()

        # the bed's nodes open again: the driver and an executor would fit on one, its node could go
        for node in kwok.node_names:
            cp.kubectl("uncordon", node)
        # a scale-down to one executor: the driver gives the others up (Spark picks which; here all but
        # one next to the driver), and the node Karpenter made for them is left idle
        next_to_driver = [p for p in executors.running() if p["spec"]["nodeName"] == driver_node]
        executors.give_up([p for p in executors.running() if p["metadata"]["name"] != next_to_driver[0]["metadata"]["name"]])
        gave_up = time.monotonic()
        wait_for("the idle node removed", lambda: [n["metadata"]["name"] for n in karpenter.nodes(pool)] == [driver_node],
                 timeout=90)
        # The driver's node stays: watched for longer than Karpenter takes to consolidate a node whose
        # pods fit elsewhere (consolidateAfter, a disruption pass every 10 s, 15 s of validation, the drain).
        while time.monotonic() < gave_up + DRIVER_NODE_WATCH:
            assert [n["metadata"]["name"] for n in karpenter.nodes(pool)] == [driver_node]
            kept = cluster.running_driver("app")
            assert kept is not None and kept["metadata"]["uid"] == driver["metadata"]["uid"]
            assert kept["spec"]["nodeName"] == driver_node
            time.sleep(1)
        assert [p["metadata"]["name"] for p in executors.running()] == [next_to_driver[0]["metadata"]["name"]]
        print(f"scale-up {scaled_up - started:.0f}s, scale-down {time.monotonic() - scaled_up:.0f}s")
    except BaseException:
        print(f"karpenter log:\n{karpenter.log_tail()}")
        raise
    finally:
        for node in kwok.node_names:
            cp.kubectl("uncordon", node, check=False)
        # the driver would hold its node through the NodePool's removal (do-not-disrupt): the app goes first
        cluster.kubectl("delete", "streamapp", "app", "--wait=false", check=False)
        cluster.kubectl("delete", "pod", "-l", names.executor_selector("app"), "--wait=false", check=False)
        karpenter.remove_pool(pool)
