"""The driver's identity: a ServiceAccount and a namespaced Role with exactly what Spark needs.

Spark's driver (client mode, spark.kubernetes.driver.pod.name set) creates, watches, labels and
deletes its executor pods, and creates and deletes the per-application ConfigMap and Service it
attaches to them, plus on-demand PersistentVolumeClaims when configured. Nothing cluster-wide.
"""

from __future__ import annotations

from streamapp_api import StreamApp

from .. import names
from .common import metadata

DRIVER_RULES = (
    {"apiGroups": [""], "resources": ["pods"],
     "verbs": ["get", "list", "watch", "create", "patch", "delete", "deletecollection"]},
    {"apiGroups": [""], "resources": ["services", "configmaps", "persistentvolumeclaims"],
     "verbs": ["get", "list", "watch", "create", "delete", "deletecollection"]},
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
