"""The policy file (the chart's ``policy`` values): its shape, every key's default, and nothing else.

A key the models do not know is refused with its path (``sparkConf.alow``), so that a typo never
loosens a cluster quietly. Defaults are the choice for a cluster whose StreamApp authors are not its
admins (docs/security.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from ..contract import DEFAULT_REFUSED_FUNCTIONS
from ..errors import InvalidSpec, issues_from_validation_error

DEFAULT_IMAGES = ("streamapp/runtime",)
# Node labels and taints of the control plane: apps never run beside the API server and etcd.
CONTROL_PLANE = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
# Pod annotations that give the pod a cloud identity or another's secrets, loosen its security profile
# or attach it to other networks (past NetworkPolicies). Globs, compared lower-case.
IDENTITY_ANNOTATIONS = (
    "iam.amazonaws.com/*", "eks.amazonaws.com/*", "iam.gke.io/*", "azure.workload.identity/*",
    "vault.hashicorp.com/*", "gke-gcsfuse/*",
    "kubernetes.io/*", "*.kubernetes.io/*", "*.k8s.io/*",
    "k8s.v1.cni.cncf.io/*", "v1.multus-cni.io/*", "cni.projectcalico.org/*",
)
# Pod labels that bind a cloud identity (Azure AD pod identity, Azure workload identity).
IDENTITY_LABELS = ("aadpodidbinding", "azure.workload.identity/*")


class _PolicyModel(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, validate_by_alias=True,
                              validate_by_name=True, frozen=True)


class SparkConfPolicy(_PolicyModel):
    allow: tuple[str, ...] = Field(default=(), description="Globs of sparkConf keys allowed beyond the safe list "
                                   "(e.g. 'spark.kubernetes.node.selector.*'); '*' allows every key.")


class FunctionPolicy(_PolicyModel):
    refuse: tuple[str, ...] = Field(default=DEFAULT_REFUSED_FUNCTIONS,
                                    description="SQL functions refused in every expression (case-insensitive).")


class KafkaOptionPolicy(_PolicyModel):
    allow: tuple[str, ...] = Field(default=(), description="Globs of Kafka client options (spec.kafka.options and "
                                   "the keys of the Secret spec.kafka.secretRef names) allowed beyond the safe list, "
                                   "compared lower-case (e.g. an OAuth token endpoint).")


class CheckpointPolicy(_PolicyModel):
    locations: tuple[str, ...] = Field(default=(), description="Where an app may keep its checkpoints: s3a:// "
                                       "locations with {namespace} and {name}, e.g. 's3a://ckpt/{namespace}/{name}'; "
                                       "an app's location must be one of them or under one. Empty: any bucket.")


class TablePolicy(_PolicyModel):
    locations: tuple[str, ...] = Field(default=(), description="Where an app's parquet and delta sinks may write "
                                       "s3a:// tables: locations with {namespace} and {name} ('*' matches any "
                                       "characters), e.g. 's3a://lake/{namespace}'; a table's path must be one of "
                                       "them or under one. Empty: no s3a:// table. A relative path, under the app's "
                                       "own storage, is always allowed.")


class EndpointPolicy(_PolicyModel):
    allow: tuple[str, ...] = Field(default=("*",), description="Hosts (globs) spec.state.checkpoint.s3.endpoint may "
                                   "name. Link-local, loopback, unspecified and cloud metadata hosts are refused "
                                   "unless listed here by name (no glob).")


class UserCodePolicy(_PolicyModel):
    """Python steps and udfs: the author's own code, run in the driver and the executors with the app's service
    account and Secrets (docs/security.md, "User code")."""

    namespaces: tuple[str, ...] = Field(default=(), description="Namespaces (globs) whose apps may run python "
                                        "steps and udfs. Empty: none.")
    modules: tuple[str, ...] = Field(default=(), description="Modules python steps and udfs may call a function of: a "
                                     "dotted name allows that module and those under it ('acme' allows "
                                     "'acme.enrich'); '*' allows any. Empty: none.")
    config_maps: tuple[str, ...] = Field(default=(), description="ConfigMaps (globs of names) spec.userCode."
                                         "configMaps may mount. Empty: none (code from the image only).")


class KeyPolicy(_PolicyModel):
    allow: tuple[str, ...] = Field(default=("*",), description="Keys (globs) authors may set.")
    refuse: tuple[str, ...] = Field(default=(), description="Keys (globs, compared lower-case) refused even if allowed.")


class NodeSelectorPolicy(KeyPolicy):
    refuse: tuple[str, ...] = Field(default=CONTROL_PLANE, description="Node label keys refused (globs).")


class TolerationPolicy(KeyPolicy):
    refuse: tuple[str, ...] = Field(default=CONTROL_PLANE, description="Taint keys refused (globs).")
    every_taint: bool = Field(default=False, description="Whether a toleration without key (operator Exists: "
                              "every taint, also the control plane's) is allowed.")


class AnnotationPolicy(KeyPolicy):
    refuse: tuple[str, ...] = Field(default=IDENTITY_ANNOTATIONS, description="Annotation keys refused (globs).")


class LabelPolicy(KeyPolicy):
    refuse: tuple[str, ...] = Field(default=IDENTITY_LABELS, description="Label keys refused (globs).")


class PodPolicy(_PolicyModel):
    """spec.driver and spec.executor: where the pods run and what they carry."""

    node_selector: NodeSelectorPolicy = NodeSelectorPolicy()
    tolerations: TolerationPolicy = TolerationPolicy()
    annotations: AnnotationPolicy = AnnotationPolicy()
    labels: LabelPolicy = LabelPolicy()


class Policy(_PolicyModel):
    """The operator-level policy (a YAML file, the chart's ``policy`` values)."""

    images: tuple[str, ...] = Field(default=DEFAULT_IMAGES, description="Prefixes spec.image must start with "
                                    "(a repository, or a registry ending in '/'); '*' allows any image.")
    spark_conf: SparkConfPolicy = SparkConfPolicy()
    functions: FunctionPolicy = FunctionPolicy()
    kafka_options: KafkaOptionPolicy = KafkaOptionPolicy()
    checkpoints: CheckpointPolicy = CheckpointPolicy()
    tables: TablePolicy = TablePolicy()
    endpoints: EndpointPolicy = EndpointPolicy()
    pods: PodPolicy = PodPolicy()
    user_code: UserCodePolicy = UserCodePolicy()

    @classmethod
    def from_mapping(cls, document: Any) -> "Policy":
        """The policy, or InvalidSpec naming each wrong key (e.g. 'sparkConf.alow')."""
        try:
            return cls.model_validate(document or {})
        except ValidationError as exc:
            raise InvalidSpec(issues_from_validation_error(exc, cls)) from exc

    @classmethod
    def from_file(cls, path: str | Path) -> "Policy":
        return cls.from_mapping(yaml.safe_load(Path(path).read_text()))
