"""What may keep an app from running, read only while it is not running (reconcile._blockers says
when): the checkpoint claim and what was said about it, the Secrets the spec names, the executors of
a driver not healthy yet. A running, healthy app costs none of these requests."""

from __future__ import annotations

import threading
import time

from streamapp_api import StreamApp

from .. import names
from ..decide.diagnosis import referenced_config_maps, referenced_secrets
from ..decide.world import Claim, ExecutorPods, MissingConfigMap, MissingSecret
from ..kubeapi import Kube
from .kube import unschedulable

CLAIM_EVENTS = 5  # the newest of a claim's events kept: the newest says why it is still Pending
CLAIM_EVENTS_MAX_AGE = 10.0  # seconds a namespace's claim events are reused: the recheck of a blocked app
EXECUTORS_MAX_AGE = 5.0  # seconds a namespace's executor pods are reused (half the recheck of an app not Ready)


def claim(kube: Kube, namespace: str, app: str, events: ClaimEvents | None = None) -> Claim | None:
    """The checkpoint claim's phase and, while it is Pending, its newest events ("Reason: message").
    ``events``: the claim events shared by every reconcile (else the claim's are listed now)."""
    name = names.checkpoint_claim(app)
    found = kube.get("PersistentVolumeClaim", namespace, name)
    if found is None:
        return None
    spec, phase = found.get("spec") or {}, (found.get("status") or {}).get("phase")
    told: tuple[str, ...] = ()
    if phase == "Pending":
        told = (events.of(kube, namespace, name) if events is not None
                else _newest(kube.list("Event", namespace, fields=_claim_events(name))).get(name, ()))
    return Claim(phase, spec.get("storageClassName"), tuple(spec.get("accessModes") or ()), told)


class ClaimEvents:
    """The events of a namespace's claims, listed once per namespace at most every ``max_age`` seconds
    and shared by every reconcile thread. An app whose claim waits for a volume is looked at every
    10 s; a list of Events per app each time made the apiserver's work grow with the square of such
    apps (bench/README.md, "Control plane", where claims bind slowly). A list with a field selector
    reads every Event of the namespace either way."""

    def __init__(self, max_age: float = CLAIM_EVENTS_MAX_AGE):
        self.max_age = max_age
        self._lock = threading.Lock()
        self._namespaces: dict[str, tuple[threading.Lock, list]] = {}  # -> (its read lock, [read at, by claim])

    def of(self, kube: Kube, namespace: str, claim_name: str) -> tuple[str, ...]:
        with self._lock:
            reading, cached = self._namespaces.setdefault(namespace, (threading.Lock(), [float("-inf"), {}]))
        with reading:  # one list at a time per namespace; the others wait for it and share it
            if time.monotonic() - cached[0] >= self.max_age:
                cached[1] = _newest(kube.list("Event", namespace, fields=_claim_events()))
                cached[0] = time.monotonic()
            return cached[1].get(claim_name, ())


def _claim_events(name: str | None = None) -> str:
    return "involvedObject.kind=PersistentVolumeClaim" + (f",involvedObject.name={name}" if name else "")


def _newest(events: list[dict]) -> dict[str, tuple[str, ...]]:
    """Claim name -> its newest CLAIM_EVENTS events, "Reason: message", newest first."""
    events = sorted(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "", reverse=True)
    by_claim: dict[str, list[str]] = {}
    for e in events:
        told = by_claim.setdefault((e.get("involvedObject") or {}).get("name") or "", [])
        if len(told) < CLAIM_EVENTS:
            told.append(f"{e.get('reason')}: {e.get('message', '')}")
    return {name: tuple(told) for name, told in by_claim.items()}


def _absent(kube: Kube, namespace: str, kind: str, refs: list[tuple[str, str | None, str]], keys_in: tuple[str, ...],
            seen: dict[str, dict | None]) -> list[tuple[str, str | None, str]]:
    """(name, the key missing or None for the whole object, the field naming it) of each reference to an
    object of ``kind`` (or a key of its ``keys_in`` maps) that is not there; each object read once."""
    absent = []
    for name, key, field in refs:
        if name not in seen:
            seen[name] = kube.get(kind, namespace, name)
        found = seen[name]
        if found is None:
            absent.append((name, None, field))
        elif key is not None and not any(key in (found.get(part) or {}) for part in keys_in):
            absent.append((name, key, field))
    return absent


def missing_secrets(kube: Kube, namespace: str, app: StreamApp, known: dict[str, dict | None] | None = None
                    ) -> tuple[MissingSecret, ...]:
    """The Secrets (and keys) the spec names that are not there. Only names and keys are looked at.
    ``known``: Secrets already read by this reconcile (the Kafka one), by name."""
    refs = referenced_secrets(app)
    return tuple(MissingSecret(*m) for m in _absent(kube, namespace, "Secret", refs, ("data", "stringData"), dict(known or {})))


def missing_config_maps(kube: Kube, namespace: str, app: StreamApp) -> tuple[MissingConfigMap, ...]:
    """The ConfigMaps (and keys) the driver pod mounts that are not there. Only names and keys are looked at."""
    refs = referenced_config_maps(app)
    return tuple(MissingConfigMap(*m) for m in _absent(kube, namespace, "ConfigMap", refs, ("data", "binaryData"), {}))


def executor_pods(kube: Kube, namespace: str, app: str, shared: NamespaceExecutors | None = None) -> ExecutorPods:
    """How many executors are Pending (and of those, unschedulable) or Failed, and why the first one is.
    ``shared``: the namespace's executor pods as every reconcile shares them (else the app's are listed now)."""
    if shared is not None:
        return shared.of(kube, namespace, app)
    return summary(kube.list("Pod", namespace, names.executor_selector(app)))


class NamespaceExecutors:
    """The executor pods of a namespace, listed once per namespace at most every ``max_age`` seconds
    and shared by every reconcile thread, each app's kept as its summary. A driver that does not
    answer its metrics has its executors looked at in every reconcile: a list per app each time made
    the API server's work grow with the square of such apps (each list reads every pod of the
    namespace; bench/README.md, "Control plane", where kwok's drivers never answer)."""

    def __init__(self, max_age: float = EXECUTORS_MAX_AGE):
        self.max_age = max_age
        self._lock = threading.Lock()
        self._namespaces: dict[str, tuple[threading.Lock, list]] = {}  # -> (its read lock, [read at, by app])

    def of(self, kube: Kube, namespace: str, app: str) -> ExecutorPods:
        with self._lock:
            reading, cached = self._namespaces.setdefault(namespace, (threading.Lock(), [float("-inf"), {}]))
        with reading:  # one list at a time per namespace; the others wait for it and share it
            if time.monotonic() - cached[0] >= self.max_age:
                by_app: dict[str, list[dict]] = {}
                # running and finished ones tell nothing here: the server leaves them out
                for pod in kube.list("Pod", namespace, f"{names.LABEL_COMPONENT}=executor,{names.LABEL_APP}",
                                     fields="status.phase!=Running,status.phase!=Succeeded"):
                    by_app.setdefault(pod["metadata"]["labels"][names.LABEL_APP], []).append(pod)
                cached[1] = {name: summary(pods) for name, pods in by_app.items()}
                cached[0] = time.monotonic()
            return cached[1].get(app, ExecutorPods())


def summary(pods: list[dict]) -> ExecutorPods:
    """What the executor pods of one app tell: the Pending (and unschedulable) and Failed ones, and why the first one is."""
    pending = failed = unplaced = 0
    why = None
    for pod in pods:
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
