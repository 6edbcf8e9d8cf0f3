"""The ConfigMap the runtime reads: the validated manifest and the Spark configuration decided here.

See docs/runtime-contract.md: ``streamapp.yaml`` is apiVersion/kind/metadata/spec of the checked
app; ``spark.properties`` is one ``key=value`` a line, applied verbatim by the runtime.
"""

from __future__ import annotations

import copy
import hashlib
import json

import yaml

from streamapp_api import StreamApp, contract, spark_memory

from .. import names
from .common import CONTAINER_SECURITY, POD_SECURITY, Launch, image_of, metadata, namespace_of, placed
from .disruption import DECOMMISSION_CONF, EXECUTOR_ANNOTATIONS, EXECUTOR_GRACE_SECONDS
from .security import EXECUTOR_MASTER_ENV, SPARK_SECURITY_CONF, auth_mount, auth_volume
from .storage import s3_credentials_env
from .ui import DEFAULT_UI, SparkUI, spark_ui_conf
from .user_code import user_code_mounts, user_code_volumes

EXECUTOR_TEMPLATE = contract.EXECUTOR_TEMPLATE_FILE
_VOLUME = f"spark.kubernetes.executor.volumes.persistentVolumeClaim.{names.CHECKPOINT_VOLUME}"


def manifest(app: StreamApp) -> dict:
    """The app as the runtime reads it: no status, metadata reduced to what identifies it."""
    meta: dict = {"name": app.metadata.name, "namespace": namespace_of(app)}
    if app.metadata.labels:
        meta["labels"] = dict(sorted(app.metadata.labels.items()))
    return {"apiVersion": app.api_version, "kind": app.kind, "metadata": meta, "spec": app.spec.to_dict()}


# Spark on Kubernetes holds a new SparkContext until 80% of its executors have registered (up to 30 s).
# A driver's own start (its checks, the checkpoint, Kafka, planning the queries) needs no executor, so
# it goes on meanwhile and only the first batch's tasks wait for them. Real-time mode keeps the wait:
# its queries need every task slot at once.
START_WITHOUT_EXECUTORS = {"spark.scheduler.minRegisteredResourcesRatio": "0"}


def spark_properties(app: StreamApp, launch: Launch, ui: SparkUI = DEFAULT_UI) -> dict[str, str]:
    name, spec = app.metadata.name, app.spec
    props = {
        # The API server by the address every pod is given (what in-cluster clients use): no cluster
        # DNS needed. The runtime expands ${env:...} (docs/runtime-contract.md).
        "spark.master": "k8s://https://${env:KUBERNETES_SERVICE_HOST}:${env:KUBERNETES_SERVICE_PORT}",
        "spark.submit.deployMode": "client",
        "spark.app.name": name,
        "spark.kubernetes.namespace": namespace_of(app),
        "spark.kubernetes.driver.pod.name": names.driver_pod(name),
        "spark.kubernetes.executor.podNamePrefix": names.executor_prefix(name),
        "spark.kubernetes.container.image": image_of(app, launch),
        "spark.kubernetes.executor.deleteOnTermination": "true",
        f"spark.kubernetes.executor.label.{names.LABEL_APP}": name,
        f"spark.kubernetes.executor.label.{names.LABEL_COMPONENT}": "executor",
        "spark.driver.port": str(names.DRIVER_PORT),
        "spark.driver.blockManager.port": str(names.BLOCK_MANAGER_PORT),
        "spark.blockManager.port": str(names.BLOCK_MANAGER_PORT),
        "spark.driver.cores": str(spec.driver.cores),
        "spark.driver.memory": spark_memory(spec.driver.memory),
        "spark.executor.instances": str(launch.executors),
        "spark.executor.cores": str(spec.executor.cores),
        "spark.executor.memory": spark_memory(spec.executor.memory),
        "spark.kubernetes.executor.podTemplateFile": f"{names.CONFIG_DIR}/{EXECUTOR_TEMPLATE}",
        "spark.kubernetes.executor.podTemplateContainerName": "executor",
        **_checkpoint_conf(app),
        **contract.app_sql_conf(spec.state.store),
        **SPARK_SECURITY_CONF,
        **contract.SPARK_DRIVER_SCOPE_CONF,
        **DECOMMISSION_CONF,  # executors evicted by a node scale-down leave gracefully
        **spark_ui_conf(app, ui),  # the app's own spark.ui.enabled, else the operator's default (render/ui.py)
        **({} if spec.realtime else START_WITHOUT_EXECUTORS),
        contract.REFUSED_FUNCTIONS_CONF: contract.format_refused_functions(launch.refused_functions),
    }
    if spec.image_pull_policy:
        props["spark.kubernetes.container.image.pullPolicy"] = spec.image_pull_policy
    if spec.driver.memory_overhead:
        props["spark.driver.memoryOverhead"] = spark_memory(spec.driver.memory_overhead)
    if spec.executor.memory_overhead:
        props["spark.executor.memoryOverhead"] = spark_memory(spec.executor.memory_overhead)
    for key, value in (spec.spark_conf or {}).items():
        props.setdefault(key, value)  # the validator refuses managed keys; never let one win anyway
    return dict(sorted(props.items()))


def _checkpoint_conf(app: StreamApp) -> dict[str, str]:
    """Executors mount the app's claim at the driver's path, or reach the object store as it does."""
    checkpoint = app.spec.state.checkpoint
    if checkpoint.on_object_store:
        return checkpoint.spark_conf()
    return {
        f"{_VOLUME}.options.claimName": names.checkpoint_claim(app.metadata.name),
        f"{_VOLUME}.mount.path": names.CHECKPOINT_MOUNT,
        f"{_VOLUME}.mount.readOnly": "false",
    }


def _on_driver_node(app: StreamApp) -> dict:
    """Required pod affinity to the driver's node: where a ReadWriteOnce claim is mounted already."""
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {names.LABEL_APP: app.metadata.name, names.LABEL_COMPONENT: "driver"}},
        "topologyKey": "kubernetes.io/hostname",
    }]}}


def executor_template(app: StreamApp) -> dict:
    """The pod template Spark starts executors from: locked down like the driver, with the app's
    Spark authentication key and the object store's credentials, on the driver's node when the
    checkpoint claim can be mounted on one node only (Spark adds its own local-dir emptyDirs, the
    checkpoint volume and the resources)."""
    template = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"labels": names.labels(app.metadata.name, "executor"), "annotations": dict(EXECUTOR_ANNOTATIONS)},
        "spec": {
            "terminationGracePeriodSeconds": EXECUTOR_GRACE_SECONDS,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": copy.deepcopy(POD_SECURITY),
            "containers": [{
                "name": "executor",
                "env": [{"name": "HOME", "value": "/tmp"}, dict(EXECUTOR_MASTER_ENV), *s3_credentials_env(app)],
                "securityContext": copy.deepcopy(CONTAINER_SECURITY),
                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, auth_mount(), *user_code_mounts(app)],
            }],
            "volumes": [{"name": "tmp", "emptyDir": {}}, auth_volume(app), *user_code_volumes(app)],
        },
    }
    if app.spec.state.checkpoint.executors_on_driver_node:
        template["spec"]["affinity"] = _on_driver_node(app)
    placed(template["spec"], template["metadata"], app, app.spec.executor)
    return template


def render_config_map(app: StreamApp, uid: str, launch: Launch, ui: SparkUI = DEFAULT_UI) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(app, uid, names.config_map(app.metadata.name), "config"),
        "data": {
            contract.MANIFEST_FILE: yaml.safe_dump(manifest(app), sort_keys=False, default_flow_style=False),
            contract.SPARK_PROPERTIES_FILE: contract.format_properties(spark_properties(app, launch, ui)),
            EXECUTOR_TEMPLATE: yaml.safe_dump(executor_template(app), sort_keys=False, default_flow_style=False),
        },
    }


def config_hash(config_map: dict) -> str:
    """A short digest of the ConfigMap's data, annotated on the driver started with it."""
    text = json.dumps(config_map.get("data") or {}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
