"""spec.userCode's ConfigMaps are mounted read-only at the same path in the driver and the executor
template, where the runtime looks for them (contract.user_code_path)."""

from __future__ import annotations

import pytest

from streamapp_api import contract
from streamapp_operator.render import Launch
from streamapp_operator.render.config import executor_template
from streamapp_operator.render.driver import render_driver_pod
from streamapp_testkit.operator_apps import app

pytestmark = pytest.mark.unit


def _mounts(pod_spec: dict) -> tuple[dict, dict]:
    volumes = {v["name"]: v.get("configMap", {}).get("name") for v in pod_spec["volumes"]}
    (container,) = pod_spec["containers"]
    mounts = {m["mountPath"]: (volumes[m["name"]], m.get("readOnly")) for m in container["volumeMounts"]
              if m["mountPath"].startswith(contract.USER_CODE_DIR)}
    return volumes, mounts


def test_user_code_config_maps_are_mounted_in_the_driver_and_every_executor():
    long_name = "pricing-" + "x" * 200  # longer than a volume name may be
    the_app = app(userCode={"configMaps": ["pricing", long_name]})
    expected = {f"{contract.USER_CODE_DIR}/pricing": ("pricing", True),
                f"{contract.USER_CODE_DIR}/{long_name}": (long_name, True)}
    driver = render_driver_pod(the_app, "uid", Launch(2, "streamapp/runtime:test"), "hash")
    assert _mounts(driver["spec"])[1] == expected
    assert _mounts(executor_template(the_app)["spec"])[1] == expected


def test_without_user_code_nothing_is_mounted():
    the_app = app()
    driver = render_driver_pod(the_app, "uid", Launch(2, "streamapp/runtime:test"), "hash")
    for spec in (driver["spec"], executor_template(the_app)["spec"]):
        assert _mounts(spec)[1] == {}
