"""Where driver and executor pods run and what they carry besides the pipeline: node selector,
tolerations, labels and annotations (spot node pools, dedicated nodes, cost labels, mesh opt-outs).

The operator's own labels and annotations are what it selects, fences and scrapes by, so keys under
the prefixes it owns are refused here (at `kubectl apply`, by CEL) rather than silently overridden.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import Field

from .base import ApiModel, api_config, cel

MAX_ENTRIES = 32
# Prefixes of the keys the operator and Spark set on these pods (selectors, fences, scraping, the
# node autoscalers' eviction hints).
RESERVED_LABEL_PREFIXES = ("streamapp.io/", "app.kubernetes.io/", "spark-")
RESERVED_ANNOTATION_PREFIXES = ("streamapp.io/", "prometheus.io/", "cluster-autoscaler.kubernetes.io/", "karpenter.sh/")


def _none_reserved(prefixes: tuple[str, ...], what: str) -> dict[str, Any]:
    rule = "self.all(k, " + " && ".join(f"!k.startsWith('{p}')" for p in prefixes) + ")"
    return {"x-kubernetes-validations": [cel(rule, f"{what} keys under {', '.join(prefixes)} are the operator's")]}


def reserved_key(key: str, prefixes: tuple[str, ...]) -> str | None:
    return next((p for p in prefixes if key.startswith(p)), None)


KeyValues = dict[str, Annotated[str, Field(max_length=4096)]]
# A label value as Kubernetes takes it (refused here, at apply, rather than when the pod is created).
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
LabelValues = dict[str, Annotated[str, Field(max_length=63, pattern=LABEL_VALUE_PATTERN)]]


class Toleration(ApiModel):
    """A Kubernetes toleration: lets the pod run on nodes with a matching taint."""

    model_config = api_config(
        cel("!has(self.operator) || self.operator != 'Exists' || !has(self.value)",
            "a toleration with operator Exists has no value", field_path=".value"),
        cel("has(self.key) || (has(self.operator) && self.operator == 'Exists')",
            "a toleration without key must have operator Exists (it then tolerates every taint)", field_path=".key"),
    )

    key: str | None = Field(default=None, max_length=317, description="Taint key; empty with Exists: every taint.")
    operator: Literal["Exists", "Equal"] | None = Field(default=None, description="Exists or Equal (default Equal).")
    value: str | None = Field(default=None, max_length=63, description="Taint value (operator Equal).")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="Taint effect to tolerate; empty: every effect.")
    toleration_seconds: int | None = Field(
        default=None, ge=0, le=86400 * 365, description="With NoExecute: how long the pod stays after the taint appears.")

    def to_kubernetes(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class PodPlacement(ApiModel):
    """Pod settings shared by the driver and the executors."""

    node_selector: LabelValues | None = Field(
        default=None, max_length=MAX_ENTRIES,
        description="Node labels the pods must run on, e.g. a node pool ({karpenter.sh/capacity-type: spot}).")
    tolerations: list[Toleration] | None = Field(
        default=None, max_length=MAX_ENTRIES, description="Taints the pods tolerate (dedicated or spot nodes).")
    labels: Annotated[LabelValues | None, Field(json_schema_extra=_none_reserved(RESERVED_LABEL_PREFIXES, "label"))] = Field(
        default=None, max_length=MAX_ENTRIES,
        description="Extra pod labels (cost allocation, policies). Keys under streamapp.io/, app.kubernetes.io/ "
        "and spark- are the operator's and Spark's.")
    annotations: Annotated[
        KeyValues | None, Field(json_schema_extra=_none_reserved(RESERVED_ANNOTATION_PREFIXES, "annotation"))
    ] = Field(
        default=None, max_length=MAX_ENTRIES,
        description="Extra pod annotations (e.g. a service mesh's injection switch). Keys under streamapp.io/, "
        "prometheus.io/, cluster-autoscaler.kubernetes.io/ and karpenter.sh/ are the operator's.")

    def pod_spec_fields(self) -> dict[str, Any]:
        """nodeSelector and tolerations as a pod spec has them (only those given)."""
        fields: dict[str, Any] = {}
        if self.node_selector:
            fields["nodeSelector"] = dict(self.node_selector)
        if self.tolerations:
            fields["tolerations"] = [t.to_kubernetes() for t in self.tolerations]
        return fields


def placement_issues(placement: PodPlacement, path: str) -> Iterator[tuple[str, str]]:
    """(path, message) for what the CEL rules above refuse at apply: the twins `streamapp validate`
    and the operator report."""
    for key, prefixes, what in (("labels", RESERVED_LABEL_PREFIXES, "label"),
                                ("annotations", RESERVED_ANNOTATION_PREFIXES, "annotation")):
        for name in getattr(placement, key) or {}:
            prefix = reserved_key(name, prefixes)
            if prefix:
                yield (f"{path}.{key}[{name}]",
                       f"{what} keys under {prefix} are the operator's (or Spark's); choose another key than {name!r}")
    for i, toleration in enumerate(placement.tolerations or ()):
        if toleration.operator == "Exists" and toleration.value is not None:
            yield f"{path}.tolerations[{i}].value", "a toleration with operator Exists has no value"
        if toleration.key is None and toleration.operator != "Exists":
            yield (f"{path}.tolerations[{i}].key",
                   "a toleration without key must have operator Exists (it then tolerates every taint)")
