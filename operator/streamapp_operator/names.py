"""Deterministic names, labels and the few constants shared by rendering and decisions.

Every child of a StreamApp is named from the app's name alone, so a second create of the same child
is a 409 and never a duplicate. The driver pod's fixed name is also the fence: the API server cannot
hold two pods of that name, so a new driver can only exist once the old one is gone.
"""

from __future__ import annotations

from streamapp_api import API_VERSION, KIND, checkpoint, contract
from streamapp_api.version import __version__

GROUP_PREFIX = "streamapp.io"
LABEL_APP = f"{GROUP_PREFIX}/app"
LABEL_COMPONENT = f"{GROUP_PREFIX}/component"
MANAGED_BY = "streamapp-operator"

# Annotations on the driver pod: what it was started with; the executor count (and when it was last
# changed) is also where a running driver reads the count to rescale to (streamapp_api.contract).
ANN_EXECUTORS = contract.ANN_EXECUTORS
ANN_EXECUTORS_ASKED_AT = contract.ANN_EXECUTORS_ASKED_AT
ANN_SNAPSHOT = contract.ANN_SNAPSHOT  # the snapshot ask (nonce, period, retention), changed on the running pod
ANN_STATE_GENERATION = f"{GROUP_PREFIX}/state-generation"
ANN_CONFIG_HASH = f"{GROUP_PREFIX}/config-hash"
# On a StreamApp, "true": the operator leaves the app and its children as they are (Strimzi's annotation).
ANN_PAUSE_RECONCILIATION = f"{GROUP_PREFIX}/pause-reconciliation"

# Shared with the runtime: owned by streamapp_api.contract (docs/runtime-contract.md).
CONFIG_DIR = contract.CONFIG_DIR
CHECKPOINT_MOUNT = contract.CHECKPOINT_MOUNT
METRICS_PORT = contract.METRICS_PORT
SPARK_LOCAL_DIR = "/var/lib/spark/local"
DRIVER_PORT = 7078
BLOCK_MANAGER_PORT = 7079
UI_PORT = 4040  # Spark's web UI (spark.ui.port), behind the Service <app>-ui
DEFAULT_RUNTIME_IMAGE = f"streamapp/runtime:{__version__}"
CHECKPOINT_VOLUME = "checkpoint"
# The per-app Spark authentication key (a Secret the operator fills at creation), mounted in the driver
# and every executor at the same path (spark.authenticate.secret.file).
SPARK_AUTH_VOLUME = "spark-auth"
SPARK_AUTH_DIR = "/var/run/secrets/streamapp.io/spark-auth"
SPARK_AUTH_KEY = "secret"


def driver_pod(app: str) -> str:
    return f"{app}-driver"


def driver_service(app: str) -> str:
    return f"{app}-driver"


def ui_service(app: str) -> str:
    return f"{app}-ui"


def ui_ingress(app: str) -> str:
    return f"{app}-ui"


def service_account(app: str) -> str:
    return f"{app}-driver"


def role(app: str) -> str:
    return f"{app}-driver"


def role_binding(app: str) -> str:
    return f"{app}-driver"


def config_map(app: str) -> str:
    return f"{app}-config"


def spark_auth_secret(app: str) -> str:
    return f"{app}-spark-auth"


def disruption_budget(app: str) -> str:
    return f"{app}-driver"


def network_policy(app: str) -> str:
    return f"{app}-spark"


def checkpoint_claim(app: str) -> str:
    return f"{app}-checkpoint"


def executor_prefix(app: str) -> str:
    return f"{app}-exec"


state_generation = checkpoint.state_generation
checkpoint_dir = checkpoint.driver_checkpoint_root  # the driver's root: under the location, else the mount


def labels(app: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "streamapp",
        "app.kubernetes.io/instance": app,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        LABEL_APP: app,
        LABEL_COMPONENT: component,
    }


def executor_selector(app: str) -> str:
    """Label selector of the executor pods (the scale subresource's status.selector)."""
    return f"{LABEL_APP}={app},{LABEL_COMPONENT}=executor"


def owner_reference(app_name: str, app_uid: str) -> dict:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": app_name,
        "uid": app_uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
