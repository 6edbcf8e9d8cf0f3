"""The checkpoint PersistentVolumeClaim (none for an object-store checkpoint), and the S3 credentials
of one: owned by the app only when the user gives up retention."""

from __future__ import annotations

from streamapp_api import StreamApp, contract

from .. import names
from .common import metadata


def render_checkpoint_claim(app: StreamApp, uid: str) -> dict | None:
    """The claim, or None for an app whose checkpoint is on an object store."""
    checkpoint = app.spec.state.checkpoint
    if checkpoint.on_object_store:
        return None
    spec: dict = {
        "accessModes": checkpoint.claim_access_modes,
        "resources": {"requests": {"storage": checkpoint.claim_size}},
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


def s3_credentials_env(app: StreamApp) -> list[dict]:
    """The object store's access key pair from the app's Secret, as the variables S3A reads (driver and
    executors alike); none without a secretRef (S3A's own chain: pod identity)."""
    checkpoint = app.spec.state.checkpoint
    ref = checkpoint.s3.secret_ref if checkpoint.on_object_store and checkpoint.s3 else None
    if ref is None:
        return []
    return [{"name": env, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": key}}}
            for env, key in ((contract.ENV_S3_ACCESS_KEY_ID, ref.access_key_id_key),
                             (contract.ENV_S3_SECRET_ACCESS_KEY, ref.secret_access_key_key))]
