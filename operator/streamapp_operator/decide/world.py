"""The plain data decisions are made from (what observe/ gathers) and what they produce (a Plan)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from streamapp_api import Issue, Policy, StreamApp, StreamAppSpec
from streamapp_api.checkpoint import CheckpointDefault

from ..render import DEFAULT_UI, NetworkPolicies, SparkUI

from .restarts import PodObservation
from .scaling_memory import LoadHistory, PendingScale


@dataclass(frozen=True)
class Applied:
    """What the ConfigMap says the (next) driver runs: the last spec acted on and Spark settings."""

    spec: StreamAppSpec | None
    executors: int | None


@dataclass(frozen=True)
class Driver:
    """The driver pod as observed, with what it was started with (from its annotations)."""

    pod: PodObservation
    executors: int | None = None  # started with, or asked for in place since (scaling/rescale.py)
    state_generation: str | None = None
    config_hash: str | None = None
    ip: str | None = None
    uid: str | None = None
    executors_asked_at: datetime | None = None  # when ``executors`` was asked for in place (None: the start count)
    snapshot_ask: str | None = None  # the snapshot ask on the pod (contract.ANN_SNAPSHOT), as written


@dataclass(frozen=True)
class Kafka:
    partitions: int | None = None  # summed over source topics
    error: str | None = None
    by_topic: tuple[tuple[str, int], ...] = ()  # each source topic's partition count
    missing_topics: tuple[str, ...] = ()
    auth_failed: bool = False  # Kafka refused the app's credentials: the error says which Secret


@dataclass(frozen=True)
class SnapshotTaken:
    """The last snapshot the driver reports taken (its metrics)."""

    name: str
    taken_at: datetime
    location: str | None = None
    size_bytes: int | None = None
    batches: tuple[tuple[str, int], ...] = ()  # per query, the batch it holds


@dataclass(frozen=True)
class KeptSnapshot:
    """A snapshot of the app that the driver reports kept (found, or taken, and not deleted since)."""

    name: str
    taken_at: datetime | None = None  # None: not recorded
    size_bytes: int | None = None
    batches: tuple[tuple[str, int], ...] = ()  # per query, the batch it holds


@dataclass(frozen=True)
class SnapshotFailed:
    """The last snapshot the driver reports failed."""

    name: str
    time: datetime
    reason: str


@dataclass(frozen=True)
class Progress:
    lag: int | None = None
    last_batch: datetime | None = None
    sink_lag: tuple[tuple[str, int], ...] = ()
    sink_last_batch: tuple[tuple[str, datetime], ...] = ()
    shuffle_partitions: int | None = None  # what the driver's checkpoint uses (the runtime decides it)
    # Per query, since the driver started: exactly-once Kafka transactions committed and aborted, and
    # batch partitions a sink skipped as written before (replays).
    sink_transactions: tuple[tuple[str, int], ...] = ()
    sink_aborted: tuple[tuple[str, int], ...] = ()
    sink_skipped: tuple[tuple[str, int], ...] = ()
    # Per query, of its last batch (scaling.mode load): rows/s read and processed, the batch's
    # seconds, and batches since the driver started; executors registered with the driver.
    input_rate: tuple[tuple[str, float], ...] = ()
    processed_rate: tuple[tuple[str, float], ...] = ()
    batch_seconds: tuple[tuple[str, float], ...] = ()
    batches: tuple[tuple[str, int], ...] = ()
    executors: int | None = None
    executors_target: int | None = None  # the count the driver has applied (None: a runtime that does not say)
    snapshot: SnapshotTaken | None = None
    snapshot_failure: SnapshotFailed | None = None
    snapshots_kept: tuple[KeptSnapshot, ...] | None = None  # None: the driver has not listed them (yet)
    read_at: datetime | None = None  # when this was read from the driver (None: not read, or it did not answer)
    unanswered: bool = False  # it was read and did not answer (not merely: not read yet)


@dataclass(frozen=True)
class Claim:
    """The checkpoint claim as read while no driver runs: its phase and what was said about it."""

    phase: str | None = None  # Pending, Bound, Lost
    storage_class: str | None = None
    access_modes: tuple[str, ...] = ()
    events: tuple[str, ...] = ()  # "Reason: message" of the claim's events, newest first


@dataclass(frozen=True)
class ExecutorPods:
    """The executor pods of a running driver that are not running: how many, and why the first one."""

    pending: int = 0
    failed: int = 0
    why: str | None = None  # e.g. "Unschedulable: 0/3 nodes are available: 3 Insufficient memory."
    unschedulable: int = 0  # of the pending: those the scheduler found no node for


@dataclass(frozen=True)
class MissingSecret:
    """A Secret (or a key of one) the spec names that is not there."""

    name: str
    key: str | None  # the key that is missing; None: the whole Secret is
    field: str  # where the spec names it, e.g. spec.sinks[1].postgres.secretRef


@dataclass(frozen=True)
class MissingConfigMap:
    """A ConfigMap (or a key of one) the driver pod mounts that is not there: user code, a descriptor set."""

    name: str
    key: str | None  # the key that is missing; None: the whole ConfigMap is
    field: str  # where the spec names it, e.g. spec.userCode.configMaps[0]


@dataclass(frozen=True)
class RestoreSource:
    """The app spec.state.restoreFrom.app names, as read while a driver may be started."""

    app: str
    found: bool  # a StreamApp of that name exists in the namespace
    location: str | None = None  # its object-store checkpoint location (None: a volume, or none that is valid)
    invalid: bool = False  # it exists but its spec is refused (its own status says why)


@dataclass(frozen=True)
class Observed:
    name: str
    namespace: str
    uid: str
    generation: int
    status: dict[str, Any]
    app: StreamApp | None  # None: the spec is invalid (see issues)
    issues: tuple[Issue, ...] = ()
    children: dict[str, dict[str, Any] | None] = field(default_factory=dict)  # "Kind/name" -> object or None
    applied: Applied | None = None
    driver: Driver = field(default_factory=lambda: Driver(PodObservation("absent")))
    kafka: Kafka = field(default_factory=Kafka)
    progress: Progress = field(default_factory=Progress)
    # Read only while the app is not running (what may keep it from running): the claim, the Secrets and
    # ConfigMaps the spec names, and the executors of a driver that is not healthy yet.
    claim: Claim | None = None
    missing_secrets: tuple[MissingSecret, ...] = ()
    missing_config_maps: tuple[MissingConfigMap, ...] = ()
    executor_pods: ExecutorPods = field(default_factory=ExecutorPods)
    paused: bool = False  # the app's streamapp.io/pause-reconciliation annotation is "true" (pause.py)
    restore_source: RestoreSource | None = None  # read only when a driver may be started (observe/restore.py)
    stable_app: StreamApp | None = None  # status.upgrade.lastStableSpec, checked; read only when it may run (upgrade.py)


@dataclass(frozen=True)
class Memory:
    """What one operator process remembers between reconciles of one app (lost on restart: harmless)."""

    pending_scale: PendingScale | None = None
    load: LoadHistory = field(default_factory=LoadHistory)  # scaling.mode load: lag readings, recommendations
    kafka_failures: int = 0


@dataclass(frozen=True)
class Settings:
    default_image: str
    policy: Policy = field(default_factory=Policy)  # what apps may run on this cluster (docs/security.md)
    scale_debounce: timedelta = timedelta(seconds=60)
    # How long a Ready driver has to apply a rescale in place before it is restarted with the count.
    rescale_timeout: timedelta = timedelta(seconds=60)
    terminating_poll: timedelta = timedelta(seconds=2)
    network: NetworkPolicies | None = None  # --network-policies: each app gets a NetworkPolicy
    checkpoint: CheckpointDefault | None = None  # --default-checkpoint-location: apps naming no checkpoint
    ui: SparkUI = DEFAULT_UI  # Spark UI on by default (--no-spark-ui), an Ingress per app (--spark-ui-ingress-host)


@dataclass(frozen=True)
class Event:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


DriverAction = Literal["create", "delete", "delete_now"]


@dataclass(frozen=True)
class Plan:
    status: dict[str, Any]
    create: tuple[dict[str, Any], ...] = ()  # children missing, in order
    patch: tuple[dict[str, Any], ...] = ()  # children to converge (merge patches carrying kind and name)
    driver: DriverAction | None = None
    driver_pod: dict[str, Any] | None = None  # the pod to create
    driver_patch: dict[str, Any] | None = None  # a merge patch of the running driver pod (rescale in place)
    status_first: bool = False  # deletions: record intent in status before acting
    events: tuple[Event, ...] = ()
    requeue: timedelta | None = None  # a full look then (or at the next resync, if that is sooner)
    # A full look then, with nothing to look at before it: the resyncs until then may stay cheap.
    due: timedelta | None = None
    memory: Memory = field(default_factory=Memory)
    restarted: bool = False
    desired_executors: int | None = None
