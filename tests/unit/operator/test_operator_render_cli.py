"""``streamapp render FILE``: the operator's own objects, printed."""

from __future__ import annotations

import argparse

import pytest
import yaml

from streamapp_operator import render_cli

from streamapp_testkit.operator_apps import EXAMPLES

pytestmark = pytest.mark.unit


def _run(capsys, *argv) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    render_cli.configure(parser)
    code = render_cli.run(parser.parse_args(list(argv)))
    out, err = capsys.readouterr()
    return code, out, err


def test_render_prints_every_object_the_operator_applies(capsys):
    code, out, _ = _run(capsys, str(EXAMPLES / "word-count.yaml"), "--namespace", "streams", "--partitions", "6")
    objects = list(yaml.safe_load_all(out))
    assert code == 0
    assert [o["kind"] for o in objects] == ["ServiceAccount", "Role", "RoleBinding", "PersistentVolumeClaim",
                                            "Secret", "ConfigMap", "Service", "Service", "PodDisruptionBudget", "Pod"]
    assert {o["metadata"]["namespace"] for o in objects} == {"streams"}
    assert "spark.executor.instances=3\n" in objects[5]["data"]["spark.properties"]  # 6 partitions / 2 cores


def test_render_prints_the_network_policy_the_operator_would_apply(capsys):
    code, out, _ = _run(capsys, str(EXAMPLES / "word-count.yaml"), "--network-policies",
                        "--network-policy-egress=all", "--network-policy-operator=ops/app=op")
    objects = {o["kind"]: o for o in yaml.safe_load_all(out)}
    assert code == 0
    assert objects["NetworkPolicy"]["spec"]["egress"] == [{}]
    code, _, err = _run(capsys, str(EXAMPLES / "word-count.yaml"), "--network-policies", "--network-policy-egress=x")
    assert code == 2 and "'x' is not a port" in err


def test_render_prints_the_snapshot_ask_and_this_apps_restore_location(capsys, tmp_path):
    doc = yaml.safe_load((EXAMPLES / "word-count.yaml").read_text())
    doc["spec"]["state"] = {"checkpoint": {"location": "s3a://ckpt/streams/word-count"}, "resetNonce": "2",
                            "snapshotNonce": "before-upgrade", "restoreFrom": {"snapshot": "nightly"}}
    path = tmp_path / "restoring.yaml"
    path.write_text(yaml.safe_dump(doc))
    code, out, _ = _run(capsys, str(path))
    pod = list(yaml.safe_load_all(out))[-1]
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert code == 0
    assert env["STREAMAPP_RESTORE_FROM"] == "s3a://ckpt/streams/word-count/snapshots/nightly"
    assert '"nonce":"before-upgrade"' in pod["metadata"]["annotations"]["streamapp.io/snapshot"]


def test_render_refuses_an_invalid_manifest_with_the_field(capsys, tmp_path):
    doc = yaml.safe_load((EXAMPLES / "word-count.yaml").read_text())
    doc["spec"]["sinks"][0]["from"] = "nowhere"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    code, out, err = _run(capsys, str(path))
    assert code == 1 and out == ""
    assert "spec.sinks[0].from" in err


def test_streamapp_render_is_a_subcommand_of_the_streamapp_command():
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(repo / p) for p in ("crds", "operator"))}
    result = subprocess.run([sys.executable, "-m", "streamapp_api", "render", str(EXAMPLES / "word-count.yaml")],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert [d["kind"] for d in yaml.safe_load_all(result.stdout)][-1] == "Pod"
