"""The one status writer: a merge patch of what changed, nothing when nothing did."""

from __future__ import annotations

from streamapp_api import API_VERSION, KIND

from ..decide.status import status_patch
from ..decide.world import Observed
from ..kubeapi import Kube


def write_status(kube: Kube, obs: Observed, status: dict) -> bool:
    patch = status_patch(obs.status, status)
    if not patch:
        return False
    body = {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": obs.name, "namespace": obs.namespace}, "status": patch}
    kube.patch(body, subresource="status")
    return True
