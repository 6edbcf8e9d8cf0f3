"""StreamApps and checkpoint volumes shaped for the project's single-node cluster: what the
end-to-end tests and the recovery bench both run (one place, so the two measure the same app)."""

from __future__ import annotations

import yaml

from .paths import REPO_DIR


def click_sessions(namespace: str, kafka_bootstrap: str, topic: str, storage_class: str, trigger: str,
                   backoff: str) -> dict:
    """examples/click-sessions.yaml reading `topic`, with its checkpoint on a ReadWriteMany volume of
    `storage_class` and driver and executors small enough for a 2-core node. Sinks are the example's;
    the caller points them where it reads."""
    app = yaml.safe_load((REPO_DIR / "examples" / "click-sessions.yaml").read_text())
    app["metadata"]["namespace"] = namespace
    spec = app["spec"]
    spec["kafka"]["bootstrapServers"] = kafka_bootstrap
    spec["sources"][0]["topic"] = topic
    spec["state"]["checkpoint"] = {"size": "1Gi", "accessModes": ["ReadWriteMany"], "storageClassName": storage_class}
    spec["driver"] = {"cores": 1, "memory": "1g"}
    spec["executor"] = {"cores": 1, "memory": "1g"}
    # A 2-core node: executors ask for a quarter of a core.
    spec["sparkConf"] = {"spark.kubernetes.executor.request.cores": "250m"}
    spec["trigger"] = trigger
    spec["restartPolicy"] = {"backoff": backoff, "maxBackoff": "10s", "maxRestarts": 0}
    return app


def hostpath_volume(name: str, path: str, storage_class: str) -> dict:
    """A static ReadWriteMany PersistentVolume on a directory of the node (kept when its claim goes)."""
    return {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": storage_class,
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": path, "type": "Directory"}},
    }  # fmt: skip
