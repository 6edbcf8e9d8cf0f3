"""The driver's headless Service: executors connect back to the driver through it."""

from __future__ import annotations

from streamapp_api import StreamApp

from .. import names
from .common import metadata


def render_service(app: StreamApp, uid: str) -> dict:
    name = app.metadata.name
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(app, uid, names.driver_service(name), "driver"),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {names.LABEL_APP: name, names.LABEL_COMPONENT: "driver"},
            "ports": [
                {"name": "driver-rpc", "port": names.DRIVER_PORT, "targetPort": names.DRIVER_PORT, "protocol": "TCP"},
                {"name": "blockmanager", "port": names.BLOCK_MANAGER_PORT, "targetPort": names.BLOCK_MANAGER_PORT, "protocol": "TCP"},
                {"name": "metrics", "port": names.METRICS_PORT, "targetPort": names.METRICS_PORT, "protocol": "TCP"},
            ],
        },
    }
