"""Which rendered children are missing and which need a patch to converge.

Only the fields the operator owns and may change are compared: labels, the annotations it renders
(added or changed, never removed: others may annotate too) and owner references everywhere, plus a
Role's rules, a RoleBinding's subjects, a Service's ports and the spec of a NetworkPolicy, of the
driver's PodDisruptionBudget, and the rules and TLS of the Spark UI's Ingress (its class is set
once: a cluster's default class may fill it in). Immutable parts (a claim's spec, a binding's roleRef) are created once and left alone; the
ConfigMap is the driver's input and is written by the plan, never here. The Spark authentication
Secret is only ever created (with its key, by act/): never patched, so never rotated under a driver.
"""

from __future__ import annotations

from typing import Any

KubeObject = dict[str, Any]  # a Kubernetes object as JSON: rendered, or as the API server returned it
MUTABLE = {"Role": ("rules",), "RoleBinding": ("subjects",), "Service": ("spec.ports",), "NetworkPolicy": ("spec",),
           "PodDisruptionBudget": ("spec",), "Ingress": ("spec.rules", "spec.tls")}
NEVER_PATCHED = ("ConfigMap", "Secret")  # here: the plan writes the ConfigMap; the Secret is create-only


def key(obj: KubeObject) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def _get(obj: KubeObject, path: str) -> Any:
    found: Any = obj
    for part in path.split("."):
        found = (found or {}).get(part)
    return found


def _owner_uids(obj: KubeObject) -> list[str]:
    return sorted(ref.get("uid", "") for ref in obj.get("metadata", {}).get("ownerReferences") or [])


def converge(rendered: KubeObject, observed: KubeObject) -> KubeObject | None:
    """A merge patch (with apiVersion, kind and name) bringing ``observed`` to ``rendered``, or None."""
    patch: dict[str, Any] = {}
    meta_r, meta_o = rendered["metadata"], observed.get("metadata", {})
    labels = {k: v for k, v in meta_r.get("labels", {}).items() if (meta_o.get("labels") or {}).get(k) != v}
    if labels:
        patch.setdefault("metadata", {})["labels"] = labels
    annotations = {k: v for k, v in (meta_r.get("annotations") or {}).items()
                   if (meta_o.get("annotations") or {}).get(k) != v}
    if annotations:
        patch.setdefault("metadata", {})["annotations"] = annotations
    if _owner_uids(rendered) != _owner_uids(observed):
        patch.setdefault("metadata", {})["ownerReferences"] = meta_r.get("ownerReferences") or None
    for path in MUTABLE.get(rendered["kind"], ()):
        if _get(rendered, path) != _get(observed, path):
            head, *rest = path.split(".")
            value, before = _get(rendered, path), _get(observed, path)
            if isinstance(value, dict) and isinstance(before, dict):
                # a merge patch keeps what it does not name: a field the operator no longer renders is
                # removed by name (a PodDisruptionBudget cannot hold maxUnavailable and minAvailable)
                value = {**{k: None for k in before if k not in value}, **value}
            if rest:
                patch.setdefault(head, {})[rest[0]] = value
            else:
                patch[head] = value
    if not patch:
        return None
    meta = patch.setdefault("metadata", {})
    meta["name"] = meta_r["name"]
    meta["namespace"] = meta_r["namespace"]
    return {"apiVersion": rendered["apiVersion"], "kind": rendered["kind"], **patch}


def plan_children(rendered: list[KubeObject], observed: dict[str, KubeObject | None]) -> tuple[list[KubeObject], list[KubeObject]]:
    """(objects to create, patches to apply), the NEVER_PATCHED kinds excluded from patches."""
    create, patches = [], []
    for obj in rendered:
        current = observed.get(key(obj))
        if current is None:
            create.append(obj)
        elif obj["kind"] not in NEVER_PATCHED:
            patch = converge(obj, current)
            if patch:
                patches.append(patch)
    return create, patches
