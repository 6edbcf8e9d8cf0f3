"""A real node autoscaler on the test bed: Karpenter's kwok provider (streamapp_testbed.karpenter).

No Spark runs in the operator's test bed (kwok pods run no containers), so the test creates the
executor pods the way Spark's driver does: the app's executor labels, owned by the driver pod, the
executor spec's cores and memory (plus Spark's overhead) as requests; and deletes them as the driver
does when it gives executors up. The test bed's own three nodes are cordoned while the app starts, so
that the driver too lands on a node Karpenter makes, then opened again, so that Karpenter could move
the driver there: only the driver's PodDisruptionBudget and do-not-disrupt annotation keep its node.
"""

from __future__ import annotations

import json

import pytest

from streamapp_operator import names
from streamapp_operator.render.driver import pod_memory_mib
from streamapp_testbed.kafka_admin import create_topic
from streamapp_testbed.karpenter import Karpenter, node_pool

from operator_bed import simple_app, unique, wait_for

pytestmark = pytest.mark.integration
EXECUTOR_CORES = 40  # more than the test bed's nodes (32) hold; one per Karpenter node (48)


@pytest.fixture(scope="module")
def karpenter(control_plane, kwok, tmp_path_factory):
    autoscaler = Karpenter(control_plane, tmp_path_factory.mktemp("karpenter")).start()
    yield autoscaler
    autoscaler.stop()


def executor_pod(app: str, driver: dict, index: int, memory: str) -> dict:
    """An executor pod as Spark's driver makes it from the app's executor template."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"{names.executor_prefix(app)}-{index}",
            "labels": {**names.labels(app, "executor"), "spark-role": "executor", "spark-exec-id": str(index)},
            "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": driver["metadata"]["name"],
                                 "uid": driver["metadata"]["uid"], "controller": True}],
        },
        "spec": {"containers": [{"name": "executor", "image": "streamapp/runtime:test", "resources": {
            "requests": {"cpu": str(EXECUTOR_CORES), "memory": f"{pod_memory_mib(memory, None)}Mi"},
            "limits": {"memory": f"{pod_memory_mib(memory, None)}Mi"}}}]},
    }


def test_executors_that_do_not_fit_get_nodes_and_idle_nodes_go_but_the_drivers_stays(cluster, kafka, kwok, karpenter):
    pool = unique("executors")
    cp = cluster.cp
    cp.kubectl("apply", "-f", "-", input=json.dumps(node_pool(pool, cpu_limit="48")))  # room for one node
    try:
        for node in kwok.node_names:
            cp.kubectl("cordon", node)
        topic = unique("lines")
        create_topic(kafka.bootstrap, topic, partitions=3)
        cluster.pv_for("app")
        cluster.apply(simple_app("app", cluster.namespace, kafka.bootstrap, topic, executors=3,
                                 executor={"cores": EXECUTOR_CORES, "memory": "2g"}))
        driver = wait_for("the driver running on a node Karpenter made",
                          lambda: cluster.running_driver("app"), timeout=120)
        driver_node = driver["spec"]["nodeName"]
        assert [n["metadata"]["name"] for n in karpenter.nodes(pool)] == [driver_node]

        for i in range(1, 4):
            cluster.apply(executor_pod("app", driver, i, "2g"))
        # one fits next to the driver; the pool's limit holds Karpenter back: two wait, and status says so
        status = wait_for("Scaling ExecutorsPending", lambda: (
            (c := cluster.condition("app", "Scaling")).get("reason") == "ExecutorsPending" and c), timeout=60)
        assert status["status"] == "True"
        assert "2 executor pods of 3 wanted wait for room on a node" in status["message"]
        assert "Insufficient cpu" in status["message"]
        assert cluster.status("app")["scaling"]["pendingExecutors"] == 2
        assert cluster.condition("app", "Degraded")["status"] == "False"

        cp.kubectl("patch", "nodepool", pool, "--type=merge", "-p", '{"spec":{"limits":{"cpu":"240"}}}')
        wait_for("every executor running", lambda: len([
            p for p in cluster.kube.list("Pod", cluster.namespace, names.executor_selector("app"))
            if p["status"].get("phase") == "Running"]) == 3, timeout=90)
        assert len(karpenter.nodes(pool)) == 3
        placed = wait_for("Scaling False", lambda: (
            (c := cluster.condition("app", "Scaling")).get("reason") == "ExecutorsScheduled" and c), timeout=30)
        assert placed["status"] == "False" and "pendingExecutors" not in cluster.status("app")["scaling"]

        # the bed's nodes open again: the driver (1 core) would fit there, its node could go
        for node in kwok.node_names:
            cp.kubectl("uncordon", node)
        cluster.kubectl("delete", "pod", "-l", names.executor_selector("app"), "--wait=false")
        wait_for("the idle nodes removed", lambda: [n["metadata"]["name"] for n in karpenter.nodes(pool)]
                 == [driver_node], timeout=120)
        blocked = wait_for("Karpenter naming the driver's annotation", lambda: [
            e for e in json.loads(cp.kubectl("get", "events", "-A", "--field-selector", "reason=DisruptionBlocked",
                                             "-o", "json").stdout)["items"]
            if e["involvedObject"].get("name") == driver_node and "do-not-disrupt" in e.get("message", "")], timeout=60)
        assert blocked
        kept = cluster.running_driver("app")
        assert kept is not None and kept["metadata"]["uid"] == driver["metadata"]["uid"]
        assert kept["spec"]["nodeName"] == driver_node
    except BaseException:
        print(f"karpenter log:\n{karpenter.log_tail()}")
        raise
    finally:
        for node in kwok.node_names:
            cp.kubectl("uncordon", node, check=False)
        karpenter.remove_pool(pool)
