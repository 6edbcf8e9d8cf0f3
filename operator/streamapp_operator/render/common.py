"""What every rendered object shares: metadata with labels and the owner reference."""

from __future__ import annotations

from dataclasses import dataclass

from streamapp_api import StreamApp, contract

from .. import names


SPARK_UID = 185  # the user of the Apache Spark images
POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": SPARK_UID,
    "runAsGroup": SPARK_UID,
    "fsGroup": SPARK_UID,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SECURITY = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "privileged": False,
    "capabilities": {"drop": ["ALL"]},
}


@dataclass(frozen=True)
class Launch:
    """The operator's decisions a driver is started with (everything else comes from the spec)."""

    executors: int
    default_image: str = names.DEFAULT_RUNTIME_IMAGE
    # The cluster policy's functions.refuse: the driver refuses an app whose plans call one (whatever
    # the admission check read in its text).
    refused_functions: tuple[str, ...] = contract.DEFAULT_REFUSED_FUNCTIONS


def namespace_of(app: StreamApp) -> str:
    return app.metadata.namespace or "default"


def metadata(app: StreamApp, uid: str, name: str, component: str, owned: bool = True, **extra) -> dict:
    meta = {
        "name": name,
        "namespace": namespace_of(app),
        "labels": names.labels(app.metadata.name, component),
    }
    if owned:
        meta["ownerReferences"] = [names.owner_reference(app.metadata.name, uid)]
    meta.update(extra)
    return meta


def image_of(app: StreamApp, launch: Launch) -> str:
    return app.spec.image or launch.default_image


def placed(pod_spec: dict, metadata: dict, app: StreamApp, placement) -> dict:
    """The user's node selector, tolerations, labels and annotations (``spec.driver`` or ``spec.executor``)
    and the app's image pull secrets on a pod; the operator's own labels and annotations win (the API
    refuses user keys under its prefixes anyway)."""
    pod_spec.update(placement.pod_spec_fields())
    if app.spec.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": name} for name in app.spec.image_pull_secrets]
    for key in ("labels", "annotations"):
        given = getattr(placement, key)
        if given:
            metadata[key] = {**given, **(metadata.get(key) or {})}
    return pod_spec
