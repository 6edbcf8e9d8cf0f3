"""The checkpoint PersistentVolumeClaim: owned by the app only when the user gives up retention."""

from __future__ import annotations

from streamapp_api import StreamApp

from .. import names
from .common import metadata


def render_checkpoint_claim(app: StreamApp, uid: str) -> dict:
    checkpoint = app.spec.state.checkpoint
    spec: dict = {
        "accessModes": list(checkpoint.access_modes),
        "resources": {"requests": {"storage": checkpoint.size}},
    }
    if checkpoint.storage_class_name is not None:
        spec["storageClassName"] = checkpoint.storage_class_name
    owned = not app.spec.state.retain_on_delete
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata(app, uid, names.checkpoint_claim(app.metadata.name), "checkpoint", owned=owned),
        "spec": spec,
    }
