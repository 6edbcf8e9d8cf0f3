"""The ConfigMaps of spec.userCode, mounted read-only at the same path in the driver and every
executor (streamapp_api.contract.user_code_path), where the runtime puts them on the Python path."""

from __future__ import annotations

from streamapp_api import StreamApp, contract


def _config_maps(app: StreamApp) -> list[str]:
    return list(app.spec.user_code.config_maps) if app.spec.user_code is not None else []


def user_code_volumes(app: StreamApp) -> list[dict]:
    # By position: a ConfigMap's name may be longer than a volume's (a DNS label of 63 characters).
    return [{"name": f"user-code-{k}", "configMap": {"name": name}} for k, name in enumerate(_config_maps(app))]


def user_code_mounts(app: StreamApp) -> list[dict]:
    return [{"name": f"user-code-{k}", "mountPath": contract.user_code_path(name), "readOnly": True}
            for k, name in enumerate(_config_maps(app))]
