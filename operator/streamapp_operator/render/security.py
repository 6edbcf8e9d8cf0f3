"""Spark's own traffic between the driver and its executors: authenticated and encrypted, always.

Each app has a Secret ``<app>-spark-auth`` holding a random key. Rendering leaves the key out (a
rendering is deterministic and never carries it); act/ fills it in when it creates the Secret, and
nothing ever rewrites it, so a running driver and the executors it starts later always agree.

The driver and every executor mount the Secret at the same path and Spark reads the key from that
file (``spark.authenticate.secret.file``). Without the file, Spark on Kubernetes generates a key and
hands it to executors in their environment (``_SPARK_AUTH_SECRET``), readable by anyone who may read
pods in the namespace.

The settings that keep the driver's Kubernetes calls to executor pods only (its Role is pods only:
render/rbac.py) are the API's ``contract.SPARK_DRIVER_SCOPE_CONF``: it refuses them in sparkConf.
"""

from __future__ import annotations

from streamapp_api import StreamApp

from .. import names
from .common import metadata

SECRET_FILE = f"{names.SPARK_AUTH_DIR}/{names.SPARK_AUTH_KEY}"
# Spark 4.0 reads a key file only where spark.master says Kubernetes, and an executor starts without
# spark.master (only spark.auth*, spark.network*, … reach its first connection, SparkConf
# .isExecutorStartupConf), so with the file alone it has no key and never joins. The executor's
# entrypoint turns SPARK_JAVA_OPT_* variables into JVM options; the driver's spark.master replaces
# this one once the executor has its properties.
EXECUTOR_MASTER_ENV = {"name": "SPARK_JAVA_OPT_STREAMAPP_MASTER",
                       "value": "-Dspark.master=k8s://https://kubernetes.default.svc"}
# Owner and group read only; the kubelet gives the files the pod's fsGroup (185, Spark's user).
SECRET_MODE = 0o440

# Settings the operator owns (streamapp_api's SPARK_MANAGED_CONF refuses them in sparkConf).
SPARK_SECURITY_CONF = {
    "spark.authenticate": "true",
    "spark.authenticate.secret.file": SECRET_FILE,
    # AES-based encryption of every RPC and block transfer, keyed from the shared secret.
    "spark.network.crypto.enabled": "true",
    # Version 2 of the key exchange (an extra key-derivation round), as Spark's docs recommend.
    "spark.network.crypto.authEngineVersion": "2",
    # AES/GCM authenticates what it encrypts (the default AES/CTR does not: flipped ciphertext bits
    # would go unnoticed). The first Spark 4.0 release dropped every message after a connection's first
    # in this mode (SPARK-56227); the pinned Spark does not (tests/runtime/test_spark_auth.py).
    "spark.network.crypto.cipher": "AES/GCM/NoPadding",
    # No external shuffle service to talk to: never fall back to SASL DIGEST-MD5.
    "spark.network.crypto.saslFallback": "false",
}


def render_spark_auth_secret(app: StreamApp, uid: str) -> dict:
    """The Secret without its key (act/ fills it in on create: see act/apply.py)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata(app, uid, names.spark_auth_secret(app.metadata.name), "spark-auth"),
        "type": "Opaque",
    }


def auth_volume(app: StreamApp) -> dict:
    return {"name": names.SPARK_AUTH_VOLUME,
            "secret": {"secretName": names.spark_auth_secret(app.metadata.name), "defaultMode": SECRET_MODE}}


def auth_mount() -> dict:
    return {"name": names.SPARK_AUTH_VOLUME, "mountPath": names.SPARK_AUTH_DIR, "readOnly": True}
