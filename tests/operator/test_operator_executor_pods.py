"""The executor pods, read the way the operator reads them for drivers that do not answer: one list
per namespace shared by every app's reconcile, each app still told its own. Real API server,
scheduler and kwok nodes."""

from __future__ import annotations

import pytest

from streamapp_operator import names
from streamapp_operator.observe.blockers import NamespaceExecutors, executor_pods

from streamapp_testbed.waiting import wait_for
from streamapp_testkit.counting_kube import ListCounter

pytestmark = pytest.mark.integration


def _executor(app: str, fits: bool) -> dict:
    """An executor pod of ``app``: one a kwok node runs, or one no node can take."""
    spec = {"containers": [{"name": "executor", "image": "streamapp/runtime:test"}]}
    if not fits:
        spec["nodeSelector"] = {"streamapp-test/no-such-node": "true"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"{app}-exec-1", "labels": {names.LABEL_APP: app, names.LABEL_COMPONENT: "executor"}}, "spec": spec}


def test_one_list_tells_each_app_its_own_executors(own_namespace):
    ns = own_namespace
    ns.apply(_executor("waits", fits=False))
    ns.apply(_executor("runs", fits=True))
    kube = ListCounter(ns.kube.client, fan_out=1)
    wait_for("one executor unschedulable, one running", lambda: (
        executor_pods(kube, ns.namespace, "waits").unschedulable == 1
        and (ns.get("Pod", "runs-exec-1") or {}).get("status", {}).get("phase") == "Running"))
    alone = executor_pods(kube, ns.namespace, "waits")

    shared, kube.lists = NamespaceExecutors(max_age=60), 0
    waits = executor_pods(kube, ns.namespace, "waits", shared)
    runs = executor_pods(kube, ns.namespace, "runs", shared)
    none = executor_pods(kube, ns.namespace, "no-executors", shared)
    assert kube.lists == 1  # the other apps' reconciles shared the first one's list
    assert waits == alone and waits.pending == waits.unschedulable == 1 and "Unschedulable" in waits.why
    assert runs.pending == runs.failed == 0 and none.pending == none.failed == 0

    stale = NamespaceExecutors(max_age=0)
    executor_pods(kube, ns.namespace, "waits", stale)
    executor_pods(kube, ns.namespace, "runs", stale)
    assert kube.lists == 3  # older than max_age: listed again
