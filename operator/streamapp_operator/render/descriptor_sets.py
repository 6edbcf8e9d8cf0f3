"""The ConfigMaps of Protobuf descriptor sets (a source's or table's protobuf.descriptorSet), mounted
read-only in the driver only (streamapp_api.contract.descriptor_set_dir): the driver reads each set once
when the app starts and ships its bytes to the executors with the decoder."""

from __future__ import annotations

from streamapp_api import StreamApp, contract


def _config_maps(app: StreamApp) -> list[str]:
    names: list[str] = []
    for item in [*app.spec.sources, *app.spec.tables]:
        options = item.value_format.options_of(item)
        descriptor_set = getattr(options, "descriptor_set", None)
        if descriptor_set is not None and descriptor_set.config_map not in names:
            names.append(descriptor_set.config_map)
    return names


def descriptor_set_volumes(app: StreamApp) -> list[dict]:
    # By position: a ConfigMap's name may be longer than a volume's (a DNS label of 63 characters).
    return [{"name": f"descriptor-set-{k}", "configMap": {"name": name}} for k, name in enumerate(_config_maps(app))]


def descriptor_set_mounts(app: StreamApp) -> list[dict]:
    return [{"name": f"descriptor-set-{k}", "mountPath": contract.descriptor_set_dir(name), "readOnly": True}
            for k, name in enumerate(_config_maps(app))]
