"""The StreamApp another app restores from (spec.state.restoreFrom.app), read while a driver may start."""

from __future__ import annotations

from streamapp_api import Policy
from streamapp_api.checkpoint import CheckpointDefault

from ..decide.world import RestoreSource
from ..kubeapi import Kube
from .kube import checked_app


def restore_source(kube: Kube, namespace: str, name: str, policy: Policy | None = None,
                   checkpoint: CheckpointDefault | None = None) -> RestoreSource:
    """The app ``name`` of ``namespace``: whether it exists and its object-store checkpoint location, as
    the operator settles it (its default location included) and only if its spec passes the checks."""
    body = kube.get("StreamApp", namespace, name)
    if body is None:
        return RestoreSource(name, found=False)
    other, _ = checked_app(body, policy, checkpoint)
    if other is None:
        return RestoreSource(name, found=True, invalid=True)
    return RestoreSource(name, found=True, location=other.spec.state.checkpoint.location)
