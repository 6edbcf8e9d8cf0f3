"""The StreamApp resource: spec, the settings around the pipeline, and the top-level object."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict

from .base import MAX_LIST, MODULE_PATTERN, PYTHON_NAME_PATTERN, ApiModel, K8sName, Name, api_config, cel
from .changes import IGNORE, RESCALE, RESTART, ByField, ByItem, BySteps, ChangeClass
from .checkpoint import Checkpoint
from .durations import REALTIME, Duration, SparkMemory, Trigger, cel_millis
from .pods import PodPlacement
from .sinks import DELIVERY_DESCRIPTION, SINKS_NEED_A_REGISTRY, Delivery, Sink
from .sources import KEY_FORMATS, VALUE_FORMATS, Kafka, Source, Table, reads_registry_cel
from .status import StreamAppStatus
from .steps import MAX_STEPS, Step

GROUP = "streamapp.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "StreamApp"
PLURAL = "streamapps"
SINGULAR = "streamapp"
SHORT_NAMES = ("sapp",)
# metadata.name names the driver pod and Service, so it must be a DNS-1035 label with room for suffixes.
APP_NAME_PATTERN = r"^[a-z]([-a-z0-9]{0,48}[a-z0-9])?$"
APP_NAME_HELP = "a DNS label of at most 50 characters: lowercase letters, digits and '-', starting with a letter"
_LIST_MAP_BY_NAME: JsonDict = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}


class Stream(ApiModel):
    """A named derived stream: read one source or stream, apply steps in order.

    Branching is several streams reading the same 'from'.
    """

    name: Name = Field(description="Name other streams, join steps and sinks use to read this stream.")
    from_: Annotated[Name, ChangeClass("incompatible", "the stream's state was built from another input")] = Field(
        alias="from", description="Name of the source or stream this stream reads."
    )
    steps: Annotated[list[Step], BySteps(otherwise=ChangeClass("restart", "stateless steps changed"))] = Field(
        default_factory=list,
        max_length=MAX_STEPS,
        description="Steps applied in order; each is a mapping with exactly one key (filter, select, "
        "withColumns, explode, keyBy, join, window, aggregate, accumulate, dedupe, sql, python).",
    )
    emit: Annotated[
        Literal["final", "updates"] | None,
        ChangeClass("incompatible", "the output mode of a stateful query cannot change"),
    ] = Field(
        default=None,
        description="When aggregated or joined rows are emitted. final: once per window and key, when "
        "the watermark closes the window (needs a watermark; Spark append mode). updates: every "
        "time a row changes (Spark update mode; not with stream-stream joins). Default: final when "
        "every aggregation upstream is windowed over a watermarked event time or a stream-stream join "
        "is upstream, else updates. "
        "Streams reading this one inherit it.",
    )


SNAPSHOT_EVERY_MIN_SECONDS = 60  # a copy of every query's checkpoint is no per-batch affair
SNAPSHOT_EVERY_MESSAGE = "every must be at least 1m"


class SnapshotSchedule(ApiModel):
    """Periodic snapshots, taken by the running driver after a committed batch."""

    model_config = api_config(
        cel(f"{cel_millis('self.every')} >= {SNAPSHOT_EVERY_MIN_SECONDS * 1000}", SNAPSHOT_EVERY_MESSAGE,
            field_path=".every"),
    )

    every: Duration = Field(description="How often: a snapshot after the first batch committed this long after the "
                            "last one (at least 1m).")
    keep: int = Field(default=3, ge=1, le=100, description="How many periodic snapshots to keep; older ones are "
                      "deleted. Snapshots taken on request (snapshotNonce) are never deleted by the operator.")


class RestoreFrom(ApiModel):
    """The snapshot a new state generation starts from (instead of from startingOffsets)."""

    snapshot: Name = Field(description="The snapshot's name: a snapshotNonce value, or a periodic snapshot's name "
                           "as status.state.lastSnapshot or 'streamapp snapshot' lists it.")
    app: Annotated[str | None, Field(pattern=APP_NAME_PATTERN, max_length=50)] = Field(
        default=None,
        description="Another StreamApp of this namespace whose snapshot to start from (its checkpoint in an object "
        "store): the blue/green path. Default: this app's own snapshots.",
    )


RESTORE_WITHOUT_RESET = ("restoreFrom is read only when a state generation starts: set or change it together with "
                         "a new spec.state.resetNonce (removing it alone is fine)")
# A transition rule (updates only: a new app may start from a snapshot): restoreFrom set or changed
# only together with a change of resetNonce. rules.check_change is its twin.
_RESTORE_WITH_RESET = cel(
    "!has(self.restoreFrom) || (has(oldSelf.restoreFrom) && self.restoreFrom == oldSelf.restoreFrom) || "
    "(has(self.resetNonce) ? (!has(oldSelf.resetNonce) || self.resetNonce != oldSelf.resetNonce) : "
    "has(oldSelf.resetNonce))",
    RESTORE_WITHOUT_RESET,
    field_path=".restoreFrom",
)


class State(ApiModel):
    """Checkpoints and state stores (Kafka Streams: state stores and changelogs)."""

    model_config = api_config(_RESTORE_WITH_RESET)

    checkpoint: Annotated[Checkpoint, ByField(why="checkpoint settings changed", switch="location")] = Field(
        default_factory=Checkpoint,
        description=Checkpoint.__doc__,
        json_schema_extra={"default": {}},
    )
    store: Annotated[
        Literal["rocksdb", "hdfs"],
        ChangeClass("incompatible", "the checkpoint's state was written by the other state store provider"),
    ] = Field(
        default="rocksdb",
        description="State store provider: rocksdb (on disk, large state) or hdfs (in memory, small state).",
    )
    retain_on_delete: Annotated[bool, IGNORE] = Field(
        default=True,
        description="Keep the checkpoint volume when the StreamApp is deleted, so re-creating it resumes "
        "(an object-store checkpoint is never deleted by the operator).",
    )
    reset_nonce: Annotated[str | None, ChangeClass("reset")] = Field(
        default=None,
        max_length=63,
        description="Change this value to discard checkpoints and state: the app restarts from "
        "startingOffsets. Needed after changes that make the old state unusable.",
    )
    snapshot_nonce: Annotated[Name | None, IGNORE] = Field(
        default=None,
        description="Change this value to take a snapshot of the app's state now, named after the value: every "
        "query's checkpoint at its next committed batch, copied beside the checkpoints (<base>/snapshots/<name>). "
        "The driver keeps running.",
    )
    snapshots: Annotated[SnapshotSchedule | None, IGNORE] = Field(
        default=None, description=SnapshotSchedule.__doc__,
    )
    restore_from: Annotated[RestoreFrom | None, IGNORE] = Field(
        default=None,
        description="Start the next state generation from this snapshot. Read only when a generation starts, so it "
        "is set or changed together with resetNonce: each query resumes after the snapshot's batch.",
    )


HEALTH_WINDOW_MIN_SECONDS = 10
HEALTH_WINDOW_MESSAGE = "healthWindow must be at least 10s"


class Upgrade(ApiModel):
    """What the operator does around a spec change that restarts the driver or resets state: a snapshot
    first, and, if asked, a rollback when the changed app does not become healthy."""

    model_config = api_config(
        # has(): the API server checks the default ({}) against this rule before it fills in the field's own default
        cel(f"!has(self.healthWindow) || {cel_millis('self.healthWindow')} >= {HEALTH_WINDOW_MIN_SECONDS * 1000}",
            HEALTH_WINDOW_MESSAGE, field_path=".healthWindow"),
    )

    snapshot: bool = Field(default=True, description="Before stopping a Ready driver for such a change, ask it for a "
                           "snapshot named pre-<generation>-<time> and restart once it is taken (at most two "
                           "trigger intervals plus 5m). These count against snapshots.keep; the newest is kept.")
    rollback: bool = Field(default=False, description="Roll a changed app that does not become healthy within "
                           "healthWindow back to its last stable spec, restored from the snapshot taken before the "
                           "change. The resource keeps the spec you applied; status.upgrade.rollback says what "
                           "failed. Off by default: a rollback re-emits the output of the batches after the snapshot "
                           "and runs a spec other than the one applied.")
    health_window: Duration = Field(default="5m", description="A changed app is healthy, and its spec stable, once its "
                                    "driver has been Ready this long with no failure since the change (at least 10s).")


ScalingMode = Literal["partitions", "load", "manual"]


class Scaling(ApiModel):
    """How many executors the app runs: from its input partitions (the default), from the load it
    measures, or spec.executors; always within minExecutors..maxExecutors."""

    model_config = api_config(
        cel(
            "!has(self.maxExecutors) || self.minExecutors <= self.maxExecutors",
            "minExecutors must not exceed maxExecutors",
            field_path=".minExecutors",
        )
    )

    mode: Annotated[ScalingMode | None, RESCALE] = Field(
        default=None,
        description="partitions: ceil(input partitions / executor cores). load: follow the measured load "
        "(input rate, processing rate, lag; see targetUtilization). manual: spec.executors (what "
        "'kubectl scale' and a HorizontalPodAutoscaler set). Default: manual when spec.executors is set, "
        "else partitions.",
    )
    min_executors: Annotated[int, RESCALE] = Field(default=1, ge=1, le=1000, description="Fewest executors.")
    max_executors: Annotated[int | None, RESCALE] = Field(
        default=None,
        ge=1,
        le=1000,
        description="Most executors. Default: no bound besides the input partition count. In load mode "
        "a new checkpoint gets at least maxExecutors × executor cores shuffle partitions to grow into.",
    )
    rescale: Annotated[Literal["inPlace", "restart"] | None, IGNORE] = Field(
        default=None,
        description="How a running app changes its executor count. inPlace: the driver keeps running and "
        "asks Spark for more executors, or decommissions the surplus gracefully (no batch fails, no query "
        "restarts); a driver that does not apply the new count within a minute is restarted with it "
        "(status.scaling.lastRescale says so). restart: the driver is restarted gracefully with the new count. "
        "Default: inPlace.",
    )
    # The load-mode settings feed the next decision; a count that changes because of them is a rescale
    # of its own, so changing them alone leaves the running driver as it is. Unset, they take the
    # defaults of LOAD_DEFAULTS (and stay out of the manifests of apps that do not use them).
    target_utilization: Annotated[float | None, IGNORE] = Field(
        default=None,
        ge=0.1,  # not gt=0: the CRD schema's exclusiveMinimum is a boolean, pydantic writes a number
        le=1,
        description="load: the share of its time the app should spend processing (batch time ÷ trigger "
        "interval, or input rate ÷ processing rate); the rest is headroom for bursts. Default: 0.7.",
    )
    catch_up: Annotated[Duration | None, IGNORE] = Field(
        default=None,
        description="load: how fast a backlog (lag) should be worked off, on top of the input rate. Default: 5m.",
    )
    scale_up_window: Annotated[Duration | None, IGNORE] = Field(
        default=None,
        description="load: a larger count must be asked for this long before the app grows, and the app grows "
        "at most once per window. Default: 30s.",
    )
    scale_down_window: Annotated[Duration | None, IGNORE] = Field(
        default=None,
        description="load: a smaller count must be asked for this long before the app shrinks, and it shrinks "
        "at most once per window. Default: 5m.",
    )

    @property
    def in_place(self) -> bool:
        """Whether a change of the executor count is applied to the running driver (rescale inPlace)."""
        return self.rescale != "restart"

    def with_load_defaults(self) -> Scaling:
        """These settings with every unset load setting at its default."""
        return self.model_copy(update={k: v for k, v in LOAD_DEFAULTS.items() if getattr(self, k) is None})


LOAD_DEFAULTS = {"target_utilization": 0.7, "catch_up": "5m", "scale_up_window": "30s", "scale_down_window": "5m"}


class Resources(PodPlacement):
    """CPU and memory of a Spark process, and where its pods run."""

    cores: int = Field(default=1, ge=1, le=64, description="CPU cores (and Spark task slots).")
    memory: SparkMemory = Field(default="2g", description="JVM heap, e.g. 2g or 2Gi.")
    memory_overhead: SparkMemory | None = Field(
        default=None,
        description="Off-heap memory added to the pod's limit (Python workers, RocksDB). Default: Spark's (10%, at least 384m).",
    )


class ExecutorResources(Resources):
    """CPU and memory of each executor, and where executor pods run."""

    cores: int = Field(default=2, ge=1, le=64, description="CPU cores per executor (partitions processed at once).")


class RestartPolicy(ApiModel):
    """How the operator restarts a failed or stalled driver: exponential backoff, optional restart limit."""

    model_config = api_config(
        cel(
            "!has(self.backoff) || !has(self.maxBackoff) || "
            f"{cel_millis('self.backoff')} <= {cel_millis('self.maxBackoff')}",
            "backoff must not exceed maxBackoff",
            field_path=".backoff",
        )
    )

    backoff: Duration = Field(default="10s", description="Delay before the first restart; doubles each time.")
    max_backoff: Duration = Field(default="5m", description="Longest delay between restarts.")
    max_restarts: int = Field(
        default=0,
        ge=0,
        le=1_000_000,
        description="Give up (phase Failed) after this many consecutive restarts. 0: never give up.",
    )
    stall_after: Annotated[Duration | None, IGNORE] = Field(
        default=None,
        description="Restart a running driver (lastRestart.reason Stalled, counted like a failure) when a query "
        "with records waiting in its input has committed no batch for this long. Default: 10 trigger intervals, "
        "at least 5m (15m in real-time mode, whose progress comes once per 5m checkpoint interval).",
    )


class DeadLetter(ApiModel):
    """Where records that cannot be read (bad JSON, wrong types) go instead of failing the app."""

    enabled: bool = Field(default=True, description="Send unreadable records to the dead-letter topic.")
    topic: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9._-]{1,249}$",
        max_length=249,
        description="Dead-letter topic. Default: '<metadata.name>.dlq'.",
    )
    delivery: Delivery = Field(default="at-least-once", description=DELIVERY_DESCRIPTION)


_EXECUTORS_IN_BOUNDS = cel(
    "!has(self.executors) || !has(self.scaling) || "
    "((!has(self.scaling.minExecutors) || self.executors >= self.scaling.minExecutors) && "
    "(!has(self.scaling.maxExecutors) || self.executors <= self.scaling.maxExecutors))",
    "executors must lie within scaling.minExecutors and scaling.maxExecutors (use suspend to stop the app)",
    field_path=".executors",
)


_EXECUTORS_ONLY_IN_MANUAL_MODE = cel(
    "!has(self.executors) || !has(self.scaling) || !has(self.scaling.mode) || self.scaling.mode == 'manual'",
    "executors is the manual count: remove it, or set scaling.mode to manual (or leave mode unset)",
    field_path=".executors",
)
_MANUAL_MODE_NEEDS_EXECUTORS = cel(
    "!has(self.scaling) || !has(self.scaling.mode) || self.scaling.mode != 'manual' || has(self.executors)",
    "scaling.mode manual needs spec.executors (kubectl scale sets it)",
    field_path=".scaling.mode",
)

_REGISTRY_FORMATS = ", ".join(name for name, kind in VALUE_FORMATS.items() if kind.needs_registry)
_REGISTRY_KEY_FORMATS = "[" + ", ".join(f"'{name}'" for name, kind in KEY_FORMATS.items() if kind.registry_type) + "]"


def _reads_no_registry(item: str) -> str:
    return f"!{reads_registry_cel(item)} && (!has({item}.keyFormat) || !({item}.keyFormat in {_REGISTRY_KEY_FORMATS}))"


_FORMATS_NEED_A_REGISTRY = cel(
    f"has(self.kafka.schemaRegistry) || (self.sources.all(s, {_reads_no_registry('s')}) "
    f"&& (!has(self.tables) || self.tables.all(t, {_reads_no_registry('t')})))",
    f"formats {_REGISTRY_FORMATS} and key formats {_REGISTRY_KEY_FORMATS.strip('[]')} read each record's schema "
    "from a registry: set spec.kafka.schemaRegistry"
    + "".join(f" (or, for {name}, describe the records with {kind.options_field})"
              for name, kind in VALUE_FORMATS.items() if kind.needs_registry and kind.options_field),
    field_path=".kafka",
)


class UserCode(ApiModel):
    """Python code of the app's own that python steps import, beside the modules of the runtime image."""

    config_maps: list[K8sName] = Field(
        default_factory=list, max_length=16,
        description="ConfigMaps in the app's namespace whose keys are Python files (e.g. enrich.py, imported as "
        "module enrich), mounted read-only on the driver and every executor and put on the Python path. "
        "Each must be allowed by the operator policy 'userCode.configMaps'.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )


class Udf(ApiModel):
    """A Python function of your own, called by name in the app's SQL expressions (a user-defined
    function), one record at a time; needs the operator policy 'userCode' to allow it."""

    name: str = Field(pattern=PYTHON_NAME_PATTERN, max_length=128,
                      description="The name expressions call it by, e.g. 'tier' for 'tier(amount)'; not the name "
                      "of a Spark SQL function.")
    module: str = Field(pattern=MODULE_PATTERN, max_length=256,
                        description="The module holding the function: of the app's image, or a file of a ConfigMap "
                        "in spec.userCode.configMaps.")
    function: str = Field(pattern=PYTHON_NAME_PATTERN, max_length=128,
                          description="The function's name in the module; called with the call's arguments as "
                          "Python values.")
    returns: str = Field(max_length=1024, description="Spark SQL type of what it returns, e.g. string, double, "
                         "boolean. A call that raises returns null and its arguments go to the dead-letter topic "
                         "with the Python error.")


class StreamAppSpec(ApiModel):
    """The desired pipeline: Kafka sources and tables, derived streams, and sinks."""

    model_config = api_config(_EXECUTORS_IN_BOUNDS, _EXECUTORS_ONLY_IN_MANUAL_MODE, _MANUAL_MODE_NEEDS_EXECUTORS,
                              _FORMATS_NEED_A_REGISTRY, SINKS_NEED_A_REGISTRY)

    image: Annotated[str | None, RESTART] = Field(
        default=None,
        max_length=512,
        description="Runtime image for driver and executors. Default: the operator's runtime image.",
    )
    image_pull_policy: Annotated[Literal["Always", "IfNotPresent", "Never"] | None, RESTART] = Field(
        default=None, description="Image pull policy. Default: Kubernetes' (IfNotPresent unless :latest)."
    )
    image_pull_secrets: Annotated[list[K8sName] | None, RESTART] = Field(
        default=None, max_length=16,
        description="Secrets (kubernetes.io/dockerconfigjson) in the app's namespace to pull the runtime image "
        "for the driver and the executors from a private registry.",
    )
    user_code: Annotated[UserCode | None, RESTART] = Field(default=None, description=UserCode.__doc__)
    udfs: Annotated[list[Udf] | None, RESTART] = Field(
        default=None, max_length=MAX_LIST, description=Udf.__doc__, json_schema_extra=_LIST_MAP_BY_NAME,
    )
    kafka: Annotated[Kafka, RESTART] = Field(description=Kafka.__doc__)
    sources: Annotated[list[Source], ByItem()] = Field(
        min_length=1, max_length=MAX_LIST, description="Streams read from Kafka (KStream).",
        json_schema_extra=_LIST_MAP_BY_NAME,
    )
    tables: Annotated[list[Table], ByItem()] = Field(
        default_factory=list, max_length=MAX_LIST,
        description="Tables read from Kafka changelog topics (KTable): latest value per key; a null value deletes the key.",
        json_schema_extra=_LIST_MAP_BY_NAME,
    )
    streams: Annotated[list[Stream], ByItem(added_or_removed="stream added or removed")] = Field(
        default_factory=list, max_length=MAX_LIST,
        description="Named derived streams, each a list of steps over a source or another stream.",
        json_schema_extra=_LIST_MAP_BY_NAME,
    )
    sinks: Annotated[
        list[Sink],
        ByItem(match="query", added_or_removed="sink added or removed",
               rest=ChangeClass("restart", "sink settings changed")),
    ] = Field(
        min_length=1, max_length=MAX_LIST,
        description="Where sources and streams are written. Each sink runs as its own streaming query.",
    )
    dead_letter: Annotated[DeadLetter, RESTART] = Field(
        default_factory=DeadLetter, description=DeadLetter.__doc__, json_schema_extra={"default": {}}
    )
    trigger: Annotated[Trigger | None, RESTART] = Field(
        default=None,
        description="Micro-batch interval (Kafka Streams: commit interval), or 'realtime': records flow "
        "through long-running tasks as they arrive (stateless pipelines writing to Kafka only; each query "
        "holds a task slot per input partition). Default: start the next batch as soon as the previous "
        "one finishes.",
    )
    shuffle_partitions: Annotated[
        int | None, ChangeClass("incompatible", "the checkpoint's state is partitioned by it")
    ] = Field(
        default=None,
        ge=1,
        le=10000,
        description="Partitions of shuffles and of state (spark.sql.shuffle.partitions). Fixed by the "
        "first checkpoint: changing it later needs a state reset. Default: the largest input "
        "topic's partition count at first start.",
    )
    state: Annotated[State, ByField()] = Field(
        default_factory=State, description=State.__doc__, json_schema_extra={"default": {}}
    )
    scaling: Annotated[Scaling, ByField(why="scaling changed")] = Field(
        default_factory=Scaling, description=Scaling.__doc__, json_schema_extra={"default": {}}
    )
    executors: Annotated[int | None, RESCALE] = Field(
        default=None,
        ge=1,
        le=1000,
        description="Fixed executor count (scaling mode manual); what 'kubectl scale' and a "
        "HorizontalPodAutoscaler set. Refused with scaling.mode partitions or load. Remove it to follow the "
        "partition count again.",
    )
    driver: Annotated[Resources, RESTART] = Field(
        default_factory=Resources, description="Driver: resources and placement.", json_schema_extra={"default": {}}
    )
    executor: Annotated[ExecutorResources, RESTART] = Field(
        default_factory=ExecutorResources, description=ExecutorResources.__doc__, json_schema_extra={"default": {}}
    )
    spark_conf: Annotated[dict[str, str] | None, RESTART] = Field(
        default=None,
        max_length=128,
        description="Extra Spark configuration (spark.* -> value). Settings the operator manages "
        "(executor count and resources, shuffle partitions, checkpoint location, master) are refused.",
    )
    restart_policy: Annotated[RestartPolicy, IGNORE] = Field(
        default_factory=RestartPolicy, description=RestartPolicy.__doc__, json_schema_extra={"default": {}}
    )
    upgrade: Annotated[Upgrade, IGNORE] = Field(
        default_factory=Upgrade, description=Upgrade.__doc__, json_schema_extra={"default": {}}
    )
    suspend: Annotated[bool, IGNORE] = Field(  # suspend and resume are decided on their own
        default=False,
        description="Stop driver and executors, keeping checkpoints; set back to false to resume where it stopped.",
    )

    @property
    def realtime(self) -> bool:
        """Real-time mode (trigger: realtime) rather than micro-batches."""
        return self.trigger == REALTIME

    @property
    def scaling_mode(self) -> ScalingMode:
        """The mode in effect: scaling.mode, else manual when executors is set, else partitions."""
        return self.scaling.mode or ("manual" if self.executors is not None else "partitions")


class ObjectMeta(BaseModel):
    """The parts of Kubernetes object metadata the API reads; everything else is kept as is."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str = Field(pattern=APP_NAME_PATTERN, max_length=50)
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class StreamApp(BaseModel):
    """A Kafka Streams-style pipeline run on Spark Structured Streaming."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    api_version: Literal["streamapp.io/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["StreamApp"]
    metadata: ObjectMeta
    spec: StreamAppSpec
    status: StreamAppStatus | None = None

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @property
    def dead_letter_topic(self) -> str | None:
        """The dead-letter topic in effect (None when disabled)."""
        letter = self.spec.dead_letter
        return (letter.topic or f"{self.metadata.name}.dlq") if letter.enabled else None
