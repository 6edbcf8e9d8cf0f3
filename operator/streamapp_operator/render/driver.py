"""The driver pod: the runtime in Spark client mode, non-root, read-only root, no privilege.

Its restartPolicy is Never: the operator, not the kubelet, decides when a driver is replaced, and
only once the old pod is gone (the fixed pod name is the fence).
"""

from __future__ import annotations

import copy
import json

from streamapp_api import StreamApp, contract, parse_duration, spark_memory_mib
from streamapp_api.spec import SnapshotSchedule, State

from .. import names
from .common import CONTAINER_SECURITY, POD_SECURITY, Launch, image_of, metadata, placed
from .disruption import DRIVER_ANNOTATIONS
from .security import auth_mount, auth_volume
from .descriptor_sets import descriptor_set_mounts, descriptor_set_volumes
from .user_code import user_code_mounts, user_code_volumes
from .storage import s3_credentials_env


def pod_memory_mib(memory: str, overhead: str | None) -> int:
    """Heap plus overhead, Spark's way: the overhead defaults to 10% of the heap, at least 384 MiB."""
    heap = spark_memory_mib(memory)
    extra = spark_memory_mib(overhead) if overhead else max(384, heap // 10)
    return heap + extra


def snapshot_ask(state: State) -> str | None:
    """The snapshot ask written on the driver pod (contract.ANN_SNAPSHOT): the nonce, the period in seconds
    and how many periodic snapshots to keep; None when the spec asks for none."""
    if state.snapshot_nonce is None and state.snapshots is None:
        return None
    schedule = state.snapshots
    every = int(parse_duration(schedule.every).total_seconds()) if schedule else None
    keep = schedule.keep if schedule else SnapshotSchedule.model_fields["keep"].default
    return json.dumps({"nonce": state.snapshot_nonce, "every": every, "keep": keep}, separators=(",", ":"))


def _env(app: StreamApp, restore_from: str | None, restore_id: str | None) -> list[dict]:
    state = app.spec.state
    return [
        {"name": contract.ENV_CHECKPOINT_DIR, "value": names.checkpoint_dir(state.reset_nonce, state.checkpoint.location)},
        # a new state generation starts from this snapshot (decide/restore.py resolved it; the runtime
        # restores only into a generation that is still empty)
        *([{"name": contract.ENV_RESTORE_FROM, "value": restore_from}] if restore_from else []),
        # a rollback: the generation's checkpoint is replaced by the snapshot, once (decide/upgrade.py)
        *([{"name": contract.ENV_RESTORE_ID, "value": restore_id}] if restore_from and restore_id else []),
        {"name": contract.ENV_METRICS_PORT, "value": str(names.METRICS_PORT)},
        {"name": contract.ENV_POD_IP, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": contract.ENV_POD_UID, "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        {"name": "SPARK_LOCAL_DIRS", "value": names.SPARK_LOCAL_DIR},
        {"name": "HOME", "value": "/tmp"},
        {"name": contract.ENV_TERMINATION_LOG, "value": contract.TERMINATION_LOG},
        *_sink_secret_env(app),
        *s3_credentials_env(app),
    ]


def _sink_secret_env(app: StreamApp) -> list[dict]:
    """The Secret keys sinks need (a connection URI, say), under the names the runtime reads."""
    refs = {(ref.env, ref.secret, ref.key) for sink in app.spec.sinks for ref in sink.target.secret_env()}
    return [
        {"name": env, "valueFrom": {"secretKeyRef": {"name": name, "key": key}}}
        for env, name, key in sorted(refs, key=lambda r: r[1:])
    ]


def _container(app: StreamApp, launch: Launch, restore_from: str | None, restore_id: str | None) -> dict:
    spec = app.spec
    on_object_store = spec.state.checkpoint.on_object_store
    memory = f"{pod_memory_mib(spec.driver.memory, spec.driver.memory_overhead)}Mi"
    container = {
        "name": "driver",
        "image": image_of(app, launch),
        "command": ["streamapp", "run", f"{names.CONFIG_DIR}/{contract.MANIFEST_FILE}",
                    "--spark-conf", f"{names.CONFIG_DIR}/{contract.SPARK_PROPERTIES_FILE}"],
        "env": _env(app, restore_from, restore_id),
        "ports": [
            {"name": "driver-rpc", "containerPort": names.DRIVER_PORT, "protocol": "TCP"},
            {"name": "blockmanager", "containerPort": names.BLOCK_MANAGER_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": names.METRICS_PORT, "protocol": "TCP"},
            {"name": "ui", "containerPort": names.UI_PORT, "protocol": "TCP"},
        ],
        "resources": {
            "requests": {"cpu": str(spec.driver.cores), "memory": memory},
            "limits": {"memory": memory},
        },
        "readinessProbe": {
            "httpGet": {"path": contract.HEALTH_PATH, "port": "metrics"},
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        # Why it failed survives it: the runtime writes its fatal error there; without one (killed, or
        # dead before it could write) the kubelet keeps the tail of its log instead.
        "terminationMessagePath": contract.TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": copy.deepcopy(CONTAINER_SECURITY),
        "volumeMounts": [
            {"name": "config", "mountPath": names.CONFIG_DIR, "readOnly": True},
            *([] if on_object_store else [{"name": names.CHECKPOINT_VOLUME, "mountPath": names.CHECKPOINT_MOUNT}]),
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "spark-local", "mountPath": names.SPARK_LOCAL_DIR},
            auth_mount(),
            *user_code_mounts(app),
            *descriptor_set_mounts(app),
        ],
    }
    if spec.image_pull_policy:
        container["imagePullPolicy"] = spec.image_pull_policy
    if spec.kafka.secret_ref is not None:
        container["envFrom"] = [{"prefix": contract.ENV_KAFKA_PREFIX, "secretRef": {"name": spec.kafka.secret_ref.name}}]
    registry = spec.kafka.schema_registry
    if registry is not None and registry.secret_ref is not None:
        container["env"].append({"name": contract.ENV_SCHEMA_REGISTRY_USER_INFO, "valueFrom": {"secretKeyRef": {
            "name": registry.secret_ref.name, "key": contract.SCHEMA_REGISTRY_USER_INFO_KEY}}})
    return container


def render_driver_pod(app: StreamApp, uid: str, launch: Launch, config_hash: str, restore_from: str | None = None,
                      restore_id: str | None = None) -> dict:
    """``restore_from``: spec.state.restoreFrom's location, resolved by the operator (decide/restore.py), or
    a rollback's snapshot with its ``restore_id`` (decide/upgrade.py)."""
    name = app.metadata.name
    ask = snapshot_ask(app.spec.state)
    annotations = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(names.METRICS_PORT),
        "prometheus.io/path": contract.METRICS_PATH,
        names.ANN_EXECUTORS: str(launch.executors),
        names.ANN_STATE_GENERATION: names.state_generation(app.spec.state.reset_nonce),
        names.ANN_CONFIG_HASH: config_hash,
        **({names.ANN_SNAPSHOT: ask} if ask else {}),  # changed on the running pod (decide/snapshot.py)
        **DRIVER_ANNOTATIONS,  # no node scale-down evicts it (render/disruption.py)
    }
    meta = metadata(app, uid, names.driver_pod(name), "driver", annotations=annotations)
    meta["labels"]["spark-role"] = "driver"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": placed({
            "serviceAccountName": names.service_account(name),
            "automountServiceAccountToken": True,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 120,
            "enableServiceLinks": False,
            "securityContext": copy.deepcopy(POD_SECURITY),
            "containers": [_container(app, launch, restore_from, restore_id)],
            "volumes": [
                {"name": "config", "configMap": {"name": names.config_map(name)}},
                *([] if app.spec.state.checkpoint.on_object_store else [
                    {"name": names.CHECKPOINT_VOLUME,
                     "persistentVolumeClaim": {"claimName": names.checkpoint_claim(name)}}]),
                {"name": "tmp", "emptyDir": {}},
                {"name": "spark-local", "emptyDir": {}},
                auth_volume(app),
                *user_code_volumes(app),
                *descriptor_set_volumes(app),
            ],
        }, meta, app, app.spec.driver),
    }
