"""Checkpoints on an object store or a volume: what the operator renders, the default it fills in, and
the checks that refuse a mix of the two."""

from __future__ import annotations

import argparse

import pytest
import yaml

from streamapp_testkit.operator_apps import BASE, merge
from streamapp_api import contract, load, parse
from streamapp_api.checkpoint import CheckpointDefault
from streamapp_operator import checkpoint_default, names
from streamapp_operator.render import Launch, render_all

pytestmark = pytest.mark.unit
UID = "00000000-0000-0000-0000-000000000000"
S3 = {"location": "s3a://ckpt/orders", "s3": {"endpoint": "http://s3.storage:8333", "region": "eu-west-1",
      "pathStyleAccess": True, "secretRef": {"name": "s3-creds"}}}


def objects(checkpoint: dict | None = None, default: CheckpointDefault | None = None, **spec) -> dict:
    document = merge(BASE, {"spec": {"state": {"checkpoint": checkpoint}} if checkpoint else {}} | {})
    document["spec"].update(spec)
    app, issues = parse(document, None, default)
    assert app is not None and not [i for i in issues if i.severity == "error"], issues
    return {o["kind"]: o for o in render_all(app, UID, Launch(2))}


def test_an_object_store_checkpoint_has_no_claim_and_no_volume():
    found = objects(S3)
    assert "PersistentVolumeClaim" not in found
    pod = found["Pod"]["spec"]
    assert names.CHECKPOINT_VOLUME not in [v["name"] for v in pod["volumes"]]
    driver = pod["containers"][0]
    assert names.CHECKPOINT_MOUNT not in [m["mountPath"] for m in driver["volumeMounts"]]
    env = {e["name"]: e for e in driver["env"]}
    assert env[contract.ENV_CHECKPOINT_DIR]["value"] == "s3a://ckpt/orders/gen-0"
    assert env["AWS_ACCESS_KEY_ID"]["valueFrom"] == {"secretKeyRef": {"name": "s3-creds", "key": "AWS_ACCESS_KEY_ID"}}
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "s3-creds"


def test_spark_reaches_the_store_and_no_secret_lands_in_the_config_map():
    config = objects(S3)["ConfigMap"]["data"]
    props = contract.parse_properties(config[contract.SPARK_PROPERTIES_FILE])
    assert props["spark.hadoop.fs.s3a.endpoint"] == "http://s3.storage:8333"
    assert props["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert props["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert props["spark.hadoop.fs.s3a.aws.credentials.provider"] == contract.S3A_ENV_CREDENTIALS
    assert not any("persistentVolumeClaim" in key for key in props)
    template = yaml.safe_load(config[contract.EXECUTOR_TEMPLATE_FILE])
    executor_env = {e["name"] for e in template["spec"]["containers"][0]["env"]}
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= executor_env
    assert "affinity" not in template["spec"]  # executors may spread: the store is everywhere
    assert "secretKeyRef" not in config[contract.SPARK_PROPERTIES_FILE]


@pytest.mark.parametrize("modes, on_driver_node", [(None, True), (["ReadWriteOnce"], True),
                                                   (["ReadWriteMany"], False)])
def test_executors_of_a_read_write_once_claim_run_on_the_drivers_node(modes, on_driver_node):
    found = objects({"accessModes": modes} if modes else None)
    assert found["PersistentVolumeClaim"]["spec"]["accessModes"] == (modes or ["ReadWriteOnce"])
    template = yaml.safe_load(found["ConfigMap"]["data"][contract.EXECUTOR_TEMPLATE_FILE])
    affinity = template["spec"].get("affinity")
    assert (affinity is not None) == on_driver_node
    if affinity:
        term = affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        assert term["labelSelector"]["matchLabels"] == {names.LABEL_APP: "orders", names.LABEL_COMPONENT: "driver"}


def test_the_operators_default_location_is_filled_in_only_where_nothing_is_named():
    default = CheckpointDefault("s3a://ckpt/{namespace}/{name}", {"endpoint": "http://s3:8333", "pathStyleAccess": True})
    document = merge(BASE, {"metadata": {"namespace": "shop"}})
    app, _ = parse(document, None, default)
    assert app.spec.state.checkpoint.location == "s3a://ckpt/shop/orders"
    assert app.spec.state.checkpoint.s3.endpoint == "http://s3:8333"
    volume, _ = parse(merge(document, {"spec": {"state": {"checkpoint": {"size": "1Gi"}}}}), None, default)
    assert volume.spec.state.checkpoint.location is None and volume.spec.state.checkpoint.size == "1Gi"
    # without a default: a volume with the defaults written out, as the driver's manifest records them
    plain = load(document).to_dict()["spec"]["state"]["checkpoint"]
    assert plain == {"size": "10Gi", "accessModes": ["ReadWriteOnce"]}


@pytest.mark.parametrize("checkpoint, path, fragment", [
    ({"location": "s3a://ckpt/x", "size": "1Gi"}, "spec.state.checkpoint.location", "remove size"),
    ({"location": "s3a://ckpt/x", "accessModes": ["ReadWriteMany"]}, "spec.state.checkpoint.location", "exclusive"),
    ({"s3": {"endpoint": "http://s3:8333"}}, "spec.state.checkpoint.s3", "need a location"),
    ({"location": "s3://ckpt/x"}, "spec.state.checkpoint.location", "s3a://bucket"),
    ({"location": "s3a://ckpt/x", "s3": {"endpoint": "s3.local:8333"}}, "spec.state.checkpoint.s3.endpoint", "http"),
])
def test_a_mix_of_volume_and_object_store_is_refused_by_field(checkpoint, path, fragment):
    _, issues = parse(merge(BASE, {"spec": {"state": {"checkpoint": checkpoint}}}))
    errors = [(i.path, i.message) for i in issues if i.severity == "error"]
    assert any(p == path and fragment in m for p, m in errors), errors


def _flags(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    checkpoint_default.add_arguments(parser)
    return parser.parse_args(argv)


def test_the_default_location_flags():
    found = checkpoint_default.from_arguments(_flags(
        "--default-checkpoint-location", "s3a://ckpt/{namespace}/{name}", "--default-checkpoint-s3-endpoint",
        "http://s3:8333", "--default-checkpoint-s3-path-style", "--default-checkpoint-s3-secret", "s3"))
    assert found.for_app("ns", "app") == {"location": "s3a://ckpt/ns/app", "s3": {
        "endpoint": "http://s3:8333", "pathStyleAccess": True, "secretRef": {"name": "s3"}}}
    assert checkpoint_default.from_arguments(_flags()) is None
    for bad in ("s3a://ckpt/shared", "/var/ckpt/{name}"):
        with pytest.raises(ValueError, match="--default-checkpoint-location"):
            checkpoint_default.from_arguments(_flags("--default-checkpoint-location", bad))
