"""Where an app keeps its checkpoints and state stores: a PersistentVolumeClaim, or an object store
(S3-compatible, ``s3a://bucket/prefix``), the defaults the operator fills in for each, and how every
location under it is formed (operator and runtime both ask here).

Locations are strings, a path or a URI, joined with ``join`` (never pathlib, which folds ``s3a://``
into ``s3a:/``). Under the app's base (its ``location``, else the volume's mount) each state generation
has a root, ``gen-<resetNonce>``; under the root, each query its own checkpoint folder.

The two are exclusive. The volume fields carry no CRD default (a defaulted ``accessModes`` would make
every object look like a volume app): ``with_checkpoint_defaults`` fills them, or the operator's default
object-store location, into an app that names neither, before anything reads it. What it fills is
what the driver's manifest records, so a later change of the operator's default shows as a change of
``location`` (refused unless reset), never as a silent move.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field

from . import contract
from .base import ApiModel, K8sName, api_config, cel
from .changes import IGNORE, RESTART, ChangeClass
from .durations import Quantity

S3_LOCATION_PATTERN = r"^s3a://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?$"
S3_LOCATION_HELP = "s3a://bucket or s3a://bucket/prefix (a bucket name: lowercase letters, digits, '.' and '-')"
_SECRET_KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"
DEFAULT_SIZE = "10Gi"
# ReadWriteOnce: what the default StorageClass of kind, EKS and GKE offers. Executors then run on the
# driver's node (the operator's executor pod template: required pod affinity), where the claim is mounted.
DEFAULT_ACCESS_MODES = ("ReadWriteOnce",)
VOLUME_FIELDS = ("size", "storageClassName", "accessModes")


def join(base: str, name: str) -> str:
    """``base/name`` for a local path or a URI (``s3a://bucket/x``), ``name`` one path segment."""
    if not base or not name or "/" in name:
        raise ValueError(f"a checkpoint location joins a base and one path segment, got {base!r} and {name!r}")
    return f"{base.rstrip('/')}/{name}"


def is_local(location: str) -> bool:
    """A path or file: URI (a volume), as opposed to an object store's URI (s3a://)."""
    return "://" not in location or location.startswith("file:")


def state_generation(reset_nonce: str | None) -> str:
    """The checkpoint sub-directory of one state generation: a reset starts a fresh one."""
    return f"gen-{reset_nonce or '0'}"


def checkpoint_root(base: str, reset_nonce: str | None) -> str:
    """The app's checkpoint root for its current state generation, under ``base`` (a path or a URI)."""
    return join(base, state_generation(reset_nonce))


def driver_checkpoint_root(reset_nonce: str | None, location: str | None = None) -> str:
    """The driver pod's checkpoint root: under the object-store location, else under the volume's mount."""
    return checkpoint_root(location or contract.CHECKPOINT_MOUNT, reset_nonce)


SNAPSHOTS = "snapshots"


def snapshot_location(base: str, name: str) -> str:
    """Where the snapshot ``name`` of an app lives: beside its state generations, under its base."""
    return join(join(base, SNAPSHOTS), name)


def periodic_snapshot_name(taken_at_epoch: float) -> str:
    """A periodic snapshot's name: its time, which sorts like the time (retention deletes the oldest)."""
    return "every-" + time.strftime("%Y%m%d-%H%M%S", time.gmtime(taken_at_epoch))


def pre_change_snapshot_name(generation: int, asked_at_epoch: float) -> str:
    """The name of the snapshot the operator asks for before a spec change restarts the driver: the
    generation changed to and the time asked (unique across a re-created app; retention counts these with
    the periodic ones by that time, and keeps the newest, which a rollback restores)."""
    return f"pre-{generation}-" + time.strftime("%Y%m%d-%H%M%S", time.gmtime(asked_at_epoch))


def query_checkpoint(root: str, query: str) -> str:
    """Where one query keeps its offsets, commits and state, under the app's checkpoint root."""
    return join(root, query)


class S3SecretRef(ApiModel):
    """A Secret in the StreamApp's namespace holding an S3 access key pair."""

    name: K8sName = Field(description="Name of the Secret in the StreamApp's namespace.")
    access_key_id_key: str = Field(default="AWS_ACCESS_KEY_ID", pattern=_SECRET_KEY_PATTERN, max_length=253,
                                   description="The Secret's key holding the access key id.")
    secret_access_key_key: str = Field(default="AWS_SECRET_ACCESS_KEY", pattern=_SECRET_KEY_PATTERN, max_length=253,
                                       description="The Secret's key holding the secret access key.")


class S3(ApiModel):
    """How driver and executors reach the object store (Hadoop's S3A connector, fs.s3a.*)."""

    endpoint: str | None = Field(
        default=None, pattern=r"^https?://[^\s/]+(/[^\s]*)?$", max_length=512,
        description="Endpoint URL of an S3-compatible store, e.g. http://seaweedfs.storage:8333. Default: AWS S3.")
    region: str | None = Field(default=None, pattern=r"^[a-z0-9-]{1,64}$", max_length=64,
                               description="Region of the bucket. Default: S3A's (from the environment, else us-east-1).")
    path_style_access: bool = Field(
        default=False, description="Address buckets as endpoint/bucket rather than bucket.endpoint (most "
        "S3-compatible stores need this).")
    secret_ref: S3SecretRef | None = Field(
        default=None, description="The access key pair, passed to driver and executors as AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY from the Secret (never copied into a ConfigMap). Default: S3A's credential chain "
        "(e.g. EKS pod identity / IRSA).")


class Checkpoint(ApiModel):
    """Where checkpoints and state stores live, shared by driver and executors: a PersistentVolumeClaim
    (size, storageClassName, accessModes) or an object store (location, s3)."""

    model_config = api_config(
        cel("!has(self.location) || (!has(self.size) && !has(self.storageClassName) && !has(self.accessModes))",
            "location (object storage) and size, storageClassName, accessModes (a volume) are exclusive",
            field_path=".location"),
        cel("!has(self.s3) || has(self.location)", "s3 settings need a location (s3a://bucket/prefix)",
            field_path=".s3"),
    )

    location: Annotated[
        str | None,
        ChangeClass("incompatible", "the checkpoint would move to another location, where the app's state is not"),
    ] = Field(
        default=None, pattern=S3_LOCATION_PATTERN, max_length=1024,
        description="Object-storage location of this app's checkpoints, e.g. s3a://bucket/streamapps/ns/app. "
        "Default: the operator's default location, else a volume.")
    s3: Annotated[S3 | None, RESTART] = Field(default=None, description=S3.__doc__)
    size: Annotated[Quantity | None, IGNORE] = Field(
        default=None, description=f"Requested volume size, e.g. 10Gi. Default: {DEFAULT_SIZE}.")
    storage_class_name: Annotated[
        str | None,
        ChangeClass("incompatible", "a PersistentVolumeClaim's storage class cannot change, and a state reset "
                    "keeps the claim", reset_proof=True),
    ] = Field(
        default=None,
        max_length=253,
        description="StorageClass of the claim. Default: the cluster's default StorageClass.",
    )
    access_modes: Annotated[
        list[Literal["ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod"]] | None,
        ChangeClass("incompatible", "a PersistentVolumeClaim's access modes cannot change, and a state reset "
                    "keeps the claim", reset_proof=True),
    ] = Field(
        default=None,
        min_length=1,
        max_length=3,
        description="Access modes of the claim. Default: ReadWriteOnce, with every executor on the driver's node; "
        "executors spread over nodes need ReadWriteMany.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )

    @property
    def on_object_store(self) -> bool:
        return self.location is not None

    @property
    def claim_size(self) -> str:
        return self.size or DEFAULT_SIZE

    @property
    def claim_access_modes(self) -> list[str]:
        return list(self.access_modes or DEFAULT_ACCESS_MODES)

    def spark_conf(self) -> dict[str, str]:
        """The Spark settings reaching the object store (none for a volume): contract.s3a_conf."""
        if self.location is None:
            return {}
        s3 = self.s3 or S3()
        return contract.s3a_conf(s3.endpoint, s3.region, s3.path_style_access, s3.secret_ref is not None)

    @property
    def executors_on_driver_node(self) -> bool:
        """A claim only one node can mount: executors must run where the driver runs."""
        return not self.on_object_store and "ReadWriteMany" not in self.claim_access_modes


@dataclass(frozen=True)
class CheckpointDefault:
    """The operator's default object-storage checkpoint (--default-checkpoint-location …): the location
    may hold ``{namespace}`` and ``{name}``, which become the app's."""

    location: str
    s3: dict[str, Any] | None = None  # an S3 block as in the API (camelCase), e.g. {"endpoint": …, "secretRef": {…}}

    def for_app(self, namespace: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = {"location": self.location.replace("{namespace}", namespace).replace("{name}", name)}
        if self.s3:
            found["s3"] = copy.deepcopy(self.s3)
        return found


def with_checkpoint_defaults(document: dict[str, Any], default: CheckpointDefault | None = None) -> dict[str, Any]:
    """The manifest with its checkpoint settled: the operator's default location for an app that names
    neither a location nor a volume field, else the volume defaults when it names no location. Other
    shapes (and documents that are not manifests) are returned as they are, for validation to judge."""
    spec = document.get("spec") if isinstance(document, dict) else None
    state = spec.get("state", {}) if isinstance(spec, dict) else None
    checkpoint = state.get("checkpoint", {}) if isinstance(state, dict) else None
    if not isinstance(checkpoint, dict) or checkpoint.get("location"):
        return document
    out = copy.deepcopy(document)
    target = out["spec"].setdefault("state", {}).setdefault("checkpoint", {})
    if default is not None and not any(k in checkpoint for k in VOLUME_FIELDS) and "s3" not in checkpoint:
        meta = out.get("metadata") or {}
        target.update(default.for_app(str(meta.get("namespace") or "default"), str(meta.get("name") or "")))
        return out
    target.setdefault("size", DEFAULT_SIZE)
    target.setdefault("accessModes", list(DEFAULT_ACCESS_MODES))
    return out

