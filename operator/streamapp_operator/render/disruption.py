"""What node autoscalers and drains may do to an app's pods: the driver stays, executors may go.

A node scale-down (Cluster Autoscaler, Karpenter) or a drain evicts pods through the eviction API,
which honours PodDisruptionBudgets; both autoscalers also read a pod annotation before they even
pick a node. The driver holds the query and its state: evicting it stops the app for a restart (a
cold JVM, state stores reloaded), so it is protected both ways. An executor is cheap to lose: the
driver asks for a replacement (it keeps spark.executor.instances) and, with decommissioning on,
the leaving executor first hands its shuffle blocks to the others (docs/operator.md, "Node
autoscalers").
"""

from __future__ import annotations

from streamapp_api import StreamApp

from .. import names
from .common import metadata

SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"  # Cluster Autoscaler
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"  # Karpenter
DRIVER_ANNOTATIONS = {SAFE_TO_EVICT: "false", DO_NOT_DISRUPT: "true"}
EXECUTOR_ANNOTATIONS = {SAFE_TO_EVICT: "true"}

# Spark's executor decommissioning: on the decommission signal (SIGPWR, sent by the pod's preStop
# hook that Spark adds when this is on) an executor takes no new tasks, finishes the running ones,
# migrates its shuffle blocks to the other executors, then exits; a batch in flight is not failed.
DECOMMISSION_CONF = {
    "spark.decommission.enabled": "true",
    "spark.storage.decommission.enabled": "true",
    "spark.storage.decommission.shuffleBlocks.enabled": "true",
    "spark.storage.decommission.rddBlocks.enabled": "false",  # streaming queries cache no RDDs
}
# The kubelet's wait from the preStop hook to SIGKILL: room for a micro-batch to finish and its
# shuffle blocks to move (Kubernetes' default is 30 s).
EXECUTOR_GRACE_SECONDS = 90


def render_disruption_budget(app: StreamApp, uid: str) -> dict:
    """No voluntary eviction of the driver while it is Ready (minAvailable 1 of its one pod). A driver
    that is not Ready (starting, or its queries unhealthy) may be evicted (AlwaysAllow): it does no
    work a restart would lose, and a drain must not wait on it forever.

    minAvailable as a number, not maxUnavailable 0: for maxUnavailable (or a percentage) the
    disruption controller reads the scale of the pods' controller, here the StreamApp, whose scale
    subresource is its executor count and answers 500 when spec.executors is unset (auto scaling). It
    retried that per app without end, used up kube-controller-manager's request budget and held up
    the binding of volumes (the control-plane bench: half the claims of 500 apps Pending)."""
    name = app.metadata.name
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(app, uid, names.disruption_budget(name), "driver"),
        "spec": {
            "minAvailable": 1,
            "selector": {"matchLabels": {names.LABEL_APP: name, names.LABEL_COMPONENT: "driver"}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }
