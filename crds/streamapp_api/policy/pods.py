"""Where an app's pods may run and what they may carry (spec.driver, spec.executor): node selectors,
tolerations, labels and annotations against the policy's ``pods`` lists. Pure.

Keys are compared lower-case: a refusal must not be walked around by case (Kubernetes' own prefixes
are DNS names, case-insensitive to a reader).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Iterator

from ..errors import Issue, shown
from ..pods import PodPlacement
from .model import KeyPolicy, PodPolicy

# Why a default refusal is one (the first matching glob wins); other refusals are the admin's.
_REASONS = (
    (("node-role.kubernetes.io/*",), "places the pod on the control plane, beside the API server and etcd"),
    (("iam.amazonaws.com/*", "eks.amazonaws.com/*", "iam.gke.io/*", "azure.workload.identity/*", "aadpodidbinding",
      "gke-gcsfuse/*"), "gives the pod a cloud identity (a role other workloads hold)"),
    (("vault.hashicorp.com/*",), "makes Vault's agent inject secrets of a role into the pod"),
    (("k8s.v1.cni.cncf.io/*", "v1.multus-cni.io/*", "cni.projectcalico.org/*"),
     "attaches the pod to other networks or addresses, past its NetworkPolicy"),
    (("kubernetes.io/*", "*.kubernetes.io/*", "*.k8s.io/*"),
     "is reserved for Kubernetes (security profiles, scheduling and admission)"),
)


def _matches(key: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatchcase(key.lower(), p.lower()) for p in patterns)


def key_refusal(key: str, rules: KeyPolicy, what: str, setting: str) -> str | None:
    """Why ``key`` (a label, annotation, node label or taint key) is refused under ``rules``, or None."""
    if _matches(key, rules.refuse):
        why = next((why for patterns, why in _REASONS if _matches(key, patterns)), "is on the admin's list")
        return f"{what} {shown(key)} is refused: it {why}; an admin can lift it in the operator policy 'pods.{setting}.refuse'"
    if not _matches(key, rules.allow):
        return (f"{what} {shown(key)} is not among the keys this cluster allows ({', '.join(rules.allow) or 'none'}, "
                f"operator policy 'pods.{setting}.allow')")
    return None


def placement_policy_issues(placement: PodPlacement, path: str, pods: PodPolicy) -> Iterator[Issue]:
    for key in placement.node_selector or {}:
        refusal = key_refusal(key, pods.node_selector, "node label", "nodeSelector")
        if refusal:
            yield Issue(f"{path}.nodeSelector[{key}]", refusal)
    for i, toleration in enumerate(placement.tolerations or ()):
        where = f"{path}.tolerations[{i}]"
        if toleration.key is None:
            if not pods.tolerations.every_taint:
                yield Issue(f"{where}.key", "a toleration without key (operator Exists) tolerates every taint, also "
                            "the control plane's and those of nodes set aside for others; name the taint's key "
                            "(an admin can allow it with the operator policy 'pods.tolerations.everyTaint')")
            continue
        refusal = key_refusal(toleration.key, pods.tolerations, "taint", "tolerations")
        if refusal:
            yield Issue(f"{where}.key", refusal)
    for setting, what in (("labels", "label"), ("annotations", "annotation")):
        for key in getattr(placement, setting) or {}:
            refusal = key_refusal(key, getattr(pods, setting), what, setting)
            if refusal:
                yield Issue(f"{path}.{setting}[{key}]", refusal)
