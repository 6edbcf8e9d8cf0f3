"""What the operator observed: written only by the operator through the status subresource."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from .base import ApiModel

Phase = Literal["Pending", "Starting", "Running", "Restarting", "Suspended", "Failed", "Invalid"]
PHASES: tuple[str, ...] = get_args(Phase)


class Condition(ApiModel):
    """A standard Kubernetes condition: Ready, Progressing, Degraded or SpecValid."""

    type: str = Field(max_length=316, description="Condition type, e.g. Ready.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str | None = Field(default=None, max_length=1024, description="One-word CamelCase reason.")
    message: str | None = Field(default=None, max_length=32768, description="Human-readable details.")
    last_transition_time: str | None = Field(
        default=None, description="When status last changed (RFC 3339).",
        json_schema_extra={"format": "date-time"},
    )
    observed_generation: int | None = Field(default=None, ge=0, description="Spec generation the condition is about.")


class SinkStatus(ApiModel):
    """Progress of one sink's streaming query."""

    name: str = Field(max_length=63, description="The sink's query name.")
    batch_id: int | None = Field(default=None, description="Last completed micro-batch.")
    lag: int | None = Field(default=None, ge=0, description="Records not yet read by this query, summed over partitions.")
    input_rows_per_second: float | None = Field(default=None, description="Input rate of the last batch.")
    processed_rows_per_second: float | None = Field(default=None, description="Processing rate of the last batch.")
    last_progress_time: str | None = Field(
        default=None, description="Time of the last progress report (RFC 3339).",
        json_schema_extra={"format": "date-time"},
    )
    transactions: int | None = Field(
        default=None, ge=0, description="Kafka transactions committed since the driver started (delivery exactly-once).")
    transactions_aborted: int | None = Field(
        default=None, ge=0, description="Kafka transactions aborted after an error since the driver started; "
        "their batches are written again.")
    partitions_skipped: int | None = Field(
        default=None, ge=0, description="Batch partitions not written again since the driver started, because "
        "this checkpoint had written them before (batches replayed after a restart).")


class LastSnapshot(ApiModel):
    """The last snapshot the driver took: every query's checkpoint at a committed batch."""

    name: str = Field(max_length=63, description="Its name: spec.state.snapshotNonce, or every-<time> for a "
                      "periodic one; what spec.state.restoreFrom.snapshot names.")
    taken_at: str = Field(description="When it was complete (RFC 3339).", json_schema_extra={"format": "date-time"})
    location: str | None = Field(default=None, max_length=1024, description="Where it is.")
    size_bytes: int | None = Field(default=None, ge=0, description="Its size in bytes.")
    batches: dict[str, int] | None = Field(
        default=None, max_length=64, description="Per query, the batch it holds: a restore resumes each query "
        "after its batch.")


class KeptSnapshot(ApiModel):
    """A snapshot of the app that is kept: found by the driver at its start, or taken since, and not deleted."""

    name: str = Field(max_length=63, description="Its name: what spec.state.restoreFrom.snapshot names.")
    taken_at: str | None = Field(default=None, description="When it was complete (RFC 3339); unset when not "
                                 "recorded.", json_schema_extra={"format": "date-time"})
    location: str = Field(max_length=1024, description="Where it is.")
    size_bytes: int | None = Field(default=None, ge=0, description="Its size in bytes; unset when not recorded.")
    batches: dict[str, int] | None = Field(
        default=None, max_length=64, description="Per query, the batch it holds: a restore resumes each query "
        "after its batch.")


class SnapshotFailure(ApiModel):
    """The last snapshot that failed (unset once a later snapshot succeeds)."""

    name: str = Field(max_length=63, description="The snapshot's name.")
    time: str = Field(description="When it failed (RFC 3339).", json_schema_extra={"format": "date-time"})
    reason: str = Field(max_length=1024, description="The error's first line.")


class RestoreStatus(ApiModel):
    """Where the current state generation starts from: spec.state.restoreFrom as the operator resolved it."""

    snapshot: str = Field(max_length=63, description="spec.state.restoreFrom.snapshot.")
    app: str | None = Field(default=None, max_length=63, description="spec.state.restoreFrom.app.")
    reset_nonce: str | None = Field(default=None, max_length=63, description="The spec.state.resetNonce of the "
                                    "generation.")
    location: str = Field(max_length=1024, description="The snapshot's location, passed to the driver.")


class StateStatus(ApiModel):
    """The checkpoint in use: a volume or an object-store location."""

    claim_name: str | None = Field(default=None, max_length=253, description="PersistentVolumeClaim holding checkpoints.")
    location: str | None = Field(default=None, max_length=1024, description="Object-store location holding checkpoints.")
    reset_nonce: str | None = Field(default=None, max_length=63, description="spec.state.resetNonce the current state was created under.")
    shuffle_partitions: int | None = Field(
        default=None, ge=1, description="Shuffle/state partitions fixed by the current checkpoint."
    )
    last_snapshot: LastSnapshot | None = Field(default=None, description=LastSnapshot.__doc__)
    last_snapshot_failure: SnapshotFailure | None = Field(default=None, description=SnapshotFailure.__doc__)
    snapshots: list[KeptSnapshot] | None = Field(
        default=None, max_length=100, description="The snapshots kept, newest first (at most 100), as the running "
        "driver last reported them: those taken on request, the periodic and pre-change ones retention keeps. "
        "Kept as they were while no driver runs.")
    restore_from: RestoreStatus | None = Field(
        default=None, description="Where the current state generation starts from: spec.state.restoreFrom as the "
        "operator resolved it for the generation's first driver, and passed to every later driver of the "
        "generation (also once the other app is gone).")


class UpgradeWatch(ApiModel):
    """The change whose driver is being watched until it is healthy (spec.upgrade.healthWindow)."""

    generation: int = Field(ge=0, description="The spec generation changed to.")
    started_at: str = Field(description="When its driver was started for it (RFC 3339): the window runs from then.",
                            json_schema_extra={"format": "date-time"})
    snapshot: str | None = Field(default=None, max_length=63, description="The snapshot taken just before the "
                                 "change, when one was (spec.upgrade.snapshot).")


class PreSnapshot(ApiModel):
    """A snapshot asked of the running driver before a restart for a spec change."""

    name: str = Field(max_length=63, description="pre-<generation>-<time asked>.")
    asked_at: str = Field(description="When it was asked for (RFC 3339).", json_schema_extra={"format": "date-time"})


class RollbackStatus(ApiModel):
    """The last rollback: the change that did not become healthy, and the spec the app went back to."""

    generation: int = Field(ge=0, description="The spec generation that failed: the app runs the last stable spec "
                            "until the spec changes again.")
    to_generation: int = Field(ge=0, description="The generation of the stable spec the app went back to.")
    time: str = Field(description="When it was rolled back (RFC 3339).", json_schema_extra={"format": "date-time"})
    reason: str = Field(max_length=1024, description="Why the change was taken as failed.")
    snapshot: str | None = Field(default=None, max_length=63, description="The snapshot the state was restored "
                                 "from (none: the stable spec's own checkpoint was kept, as after a reset).")
    failed_spec: str = Field(max_length=262144, description="The spec that failed, as JSON, for inspection.")


class UpgradeStatus(ApiModel):
    """Spec changes that restart the driver: the last stable spec, the change being watched, the last rollback."""

    last_stable_generation: int | None = Field(default=None, ge=0, description="The generation whose spec ran "
                                               "healthy for spec.upgrade.healthWindow most recently.")
    last_stable_spec: str | None = Field(default=None, max_length=262144, description="That spec, as JSON: what a "
                                         "rollback goes back to.")
    watching: UpgradeWatch | None = Field(default=None, description=UpgradeWatch.__doc__)
    pre_snapshot: PreSnapshot | None = Field(default=None, description=PreSnapshot.__doc__)
    rollback: RollbackStatus | None = Field(default=None, description=RollbackStatus.__doc__)


class LastRestart(ApiModel):
    """The operator's last decision to start a new driver in place of the old one."""

    time: str = Field(description="When the restart was decided (RFC 3339).", json_schema_extra={"format": "date-time"})
    reason: str = Field(
        max_length=63, description="DriverFailed, DriverDeleted, NodeLost or Stalled (counted in restarts); Rescale, "
        "RescaleFallback (a rescale in place the driver did not apply), SpecChange (a planned, graceful "
        "restart, not counted) or RolledBack (spec.upgrade.rollback: back to the last stable spec).",
    )
    exit_code: int | None = Field(default=None, description="Exit code of the old driver container, when known.")
    message: str | None = Field(
        default=None, max_length=4096, description="The failed driver's last words: the error the runtime wrote "
        "(its termination message), else the last lines of its log.")


class LastRescale(ApiModel):
    """The last change of the running app's executor count, and how it was made."""

    from_: int = Field(alias="from", ge=0, description="Executors before.")
    to: int = Field(ge=0, description="Executors asked for.")
    method: Literal["InPlace", "Restart", "Fallback"] = Field(
        description="InPlace: the running driver was asked to change its executors (no restart). Restart: the "
        "driver was restarted with the new count (scaling.rescale restart, or a change that needs one). "
        "Fallback: the driver did not apply the count in place in time (too old a runtime, the API server "
        "out of its reach) and was restarted with it.",
    )
    time: str = Field(description="When it was decided (RFC 3339).", json_schema_extra={"format": "date-time"})
    applied_time: str | None = Field(
        default=None, description="InPlace: when the driver reported the new count applied (RFC 3339); unset "
        "while it has not.", json_schema_extra={"format": "date-time"},
    )
    message: str | None = Field(default=None, max_length=1024, description="What happened, in words.")


class ScalingStatus(ApiModel):
    """The executor count's last decision: the mode in effect, the count it settled on and why."""

    mode: Literal["partitions", "load", "manual"] = Field(description="The scaling mode in effect.")
    target: int | None = Field(default=None, ge=0, description="Executors the mode asks for.")
    reason: str | None = Field(
        default=None, max_length=1024,
        description="Why, in words: the load measured and what it needs, or why the count is kept.",
    )
    limited_by: Literal["minExecutors", "maxExecutors", "partitions", "shufflePartitions"] | None = Field(
        default=None, description="The bound that kept the target from what the load asks for.",
    )
    last_decision_time: str | None = Field(
        default=None, description="When the target last changed (RFC 3339).", json_schema_extra={"format": "date-time"},
    )
    pending_executors: int | None = Field(
        default=None, ge=0, description="Executor pods the scheduler finds no node for (they wait for a node "
        "autoscaler or for capacity; see the Scaling condition); unset when none wait.",
    )
    last_rescale: LastRescale | None = Field(default=None, description=LastRescale.__doc__)


class StreamAppStatus(ApiModel):
    """Observed state of the StreamApp."""

    observed_generation: int | None = Field(default=None, ge=0, description="Spec generation this status describes.")
    phase: Phase | None = Field(
        default=None,
        description="Pending: no driver yet (being set up, waiting for Kafka). Starting: the driver pod "
        "exists but is not Ready yet. Running: the driver is Ready. Restarting: the old driver is stopping "
        "or a restart waits out its backoff. Suspended: spec.suspend is true. Failed: maxRestarts reached. "
        "Invalid: the spec was refused (see the SpecValid condition).",
    )
    reason: str | None = Field(
        default=None, max_length=63, description="What keeps the app from running as its spec says, in one word "
        "(e.g. ImagePullFailed, ClaimPending, Unschedulable, OOMKilled, PipelineError, SecretMissing, "
        "IncompatibleChange); unset while it runs or starts as expected. See docs/operator.md.")
    message: str | None = Field(default=None, max_length=32768, description="Why the app is in this phase.")
    executors: int | None = Field(default=None, ge=0, description="Executors running (scale subresource status).")
    desired_executors: int | None = Field(
        default=None, ge=0, description="Executors the app should run (see scaling): spec.executors, from the source "
        "partitions, or from the load.",
    )
    selector: str | None = Field(default=None, max_length=1024, description="Label selector of executor pods (scale subresource).")
    partitions: int | None = Field(default=None, ge=0, description="Input partitions, summed over source topics.")
    lag: int | None = Field(default=None, ge=0, description="Records not yet processed, summed over sinks and partitions.")
    scaling: ScalingStatus | None = Field(default=None, description=ScalingStatus.__doc__)
    restarts: int | None = Field(default=None, ge=0, description="Driver restarts since the last successful run.")
    last_restart: LastRestart | None = Field(default=None, description=LastRestart.__doc__)
    driver_pod: str | None = Field(default=None, max_length=253, description="Name of the current driver pod.")
    ui_url: str | None = Field(
        default=None, alias="uiURL", max_length=2048, description="Where the driver's Spark UI is served while it "
        "runs: the app's Ingress, else the Service <app>-ui inside the cluster (kubectl port-forward "
        "svc/<app>-ui 4040 from outside); unset while the app's UI is off (docs/operator.md, 'Spark UI').")
    state: StateStatus | None = Field(default=None, description=StateStatus.__doc__)
    upgrade: UpgradeStatus | None = Field(default=None, description=UpgradeStatus.__doc__)
    sinks: list[SinkStatus] | None = Field(
        default=None, max_length=64, description="Per-sink query progress.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    conditions: list[Condition] | None = Field(
        default=None, max_length=32, description="Standard conditions: Ready, Progressing, Degraded, SpecValid, "
        "Scaling (executor pods waiting for a node: reason ExecutorsPending), Paused (the "
        "streamapp.io/pause-reconciliation annotation: reason ReconciliationPaused) and RolledBack (the applied "
        "spec did not become healthy: the app runs its last stable spec).",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
