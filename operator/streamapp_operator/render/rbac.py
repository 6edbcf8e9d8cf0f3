"""The driver's identity: a ServiceAccount and a namespaced Role with exactly what Spark needs.

What Spark 4.0's driver (client mode, spark.kubernetes.driver.pod.name set) calls, with the
settings of contract.SPARK_DRIVER_SCOPE_CONF (no executor ConfigMap, no Service deletion, no claims of its own):

- get its own pod (ExecutorPodsAllocator, at start) and an executor's (ExecutorPodsLifecycleManager);
- list and watch executor pods by label (ExecutorPodsWatchSnapshotSource and the polling source;
  waiting for its own pod to be ready);
- create executor pods; patch them (the executor-id label when an executor asks for its id, the
  decommission label);
- delete one executor pod, and delete executor pods by label selector (deletecollection: pending
  pods past their creation timeout, killed executors, all of them when the driver stops).

RBAC has no label-scoped rules, so these verbs hold for every pod of the namespace, not only the
app's executors (docs/operator.md, "The driver's Role"). Nothing cluster-wide.
"""

from __future__ import annotations

from streamapp_api import StreamApp

from .. import names
from .common import metadata

DRIVER_RULES = (
    {"apiGroups": [""], "resources": ["pods"],
     "verbs": ["get", "list", "watch", "create", "patch", "delete", "deletecollection"]},
)


def render_service_account(app: StreamApp, uid: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata(app, uid, names.service_account(app.metadata.name), "driver"),
        "automountServiceAccountToken": False,
    }


def render_role(app: StreamApp, uid: str) -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": metadata(app, uid, names.role(app.metadata.name), "driver"),
        "rules": [dict(rule) for rule in DRIVER_RULES],
    }


def render_role_binding(app: StreamApp, uid: str) -> dict:
    meta = metadata(app, uid, names.role_binding(app.metadata.name), "driver")
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": names.role(app.metadata.name)},
        "subjects": [{"kind": "ServiceAccount", "name": names.service_account(app.metadata.name),
                      "namespace": meta["namespace"]}],
    }
