"""What may keep an app from running, read only while it is not running (reconcile._blockers says
when): the checkpoint claim and what was said about it, the Secrets the spec names, the executors of
a driver not healthy yet. A running, healthy app costs none of these requests."""

from __future__ import annotations

from streamapp_api import StreamApp

from .. import names
from ..decide.diagnosis import referenced_secrets
from ..decide.world import Claim, ExecutorPods, MissingSecret
from ..kubeapi import Kube
from .kube import unschedulable

CLAIM_EVENTS = 5  # the newest of a claim's events kept: the newest says why it is still Pending


def claim(kube: Kube, namespace: str, app: str) -> Claim | None:
    """The checkpoint claim's phase and, while it is Pending, its newest events ("Reason: message")."""
    name = names.checkpoint_claim(app)
    found = kube.get("PersistentVolumeClaim", namespace, name)
    if found is None:
        return None
    spec, phase = found.get("spec") or {}, (found.get("status") or {}).get("phase")
    told: tuple[str, ...] = ()
    if phase == "Pending":
        events = kube.list("Event", namespace, fields=f"involvedObject.kind=PersistentVolumeClaim,involvedObject.name={name}")
        events.sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "", reverse=True)
        told = tuple(f"{e.get('reason')}: {e.get('message', '')}" for e in events[:CLAIM_EVENTS])
    return Claim(phase, spec.get("storageClassName"), tuple(spec.get("accessModes") or ()), told)


def missing_secrets(kube: Kube, namespace: str, app: StreamApp, known: dict[str, dict | None] | None = None
                    ) -> tuple[MissingSecret, ...]:
    """The Secrets (and keys) the spec names that are not there. Only names and keys are looked at.
    ``known``: Secrets already read by this reconcile (the Kafka one), by name."""
    seen = dict(known or {})
    missing = []
    for name, key, field in referenced_secrets(app):
        if name not in seen:
            seen[name] = kube.get("Secret", namespace, name)
        secret = seen[name]
        if secret is None:
            missing.append(MissingSecret(name, None, field))
        elif key is not None and key not in (secret.get("data") or {}) and key not in (secret.get("stringData") or {}):
            missing.append(MissingSecret(name, key, field))
    return tuple(missing)


def executor_pods(kube: Kube, namespace: str, app: str) -> ExecutorPods:
    """How many executors are Pending (and of those, unschedulable) or Failed, and why the first one is."""
    pending = failed = unplaced = 0
    why = None
    for pod in kube.list("Pod", namespace, names.executor_selector(app)):
        status = pod.get("status") or {}
        if pod["metadata"].get("deletionTimestamp") or status.get("phase") not in ("Pending", "Failed"):
            continue
        if status.get("phase") == "Pending":
            pending += 1
            said = unschedulable(status)
            waiting = next(((c.get("state") or {}).get("waiting") for c in status.get("containerStatuses") or []
                            if (c.get("state") or {}).get("waiting")), None)
            if said:
                unplaced += 1
                why = why or f"Unschedulable: {said}"
            elif waiting and waiting.get("reason") not in ("ContainerCreating", "PodInitializing"):
                why = why or f"{waiting.get('reason')}: {waiting.get('message', '')}"
        else:
            failed += 1
            why = why or f"{status.get('reason') or 'Failed'}: {status.get('message', '')}"
    return ExecutorPods(pending, failed, why, unplaced)
