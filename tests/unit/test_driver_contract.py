"""docs/runtime-contract.md, checked from both sides, one test per row: what the operator puts in the
driver pod (rendered by its own code) is what the runtime reads (parsed by its own code). Neither
side states a name of the contract: both take it from streamapp_api.contract."""

from __future__ import annotations

import argparse
import time

import pytest
import yaml
from prometheus_client import generate_latest

from streamapp_api import checkpoint, contract
from streamapp_api.document import load
from streamapp_operator import names
from streamapp_operator.observe.metrics import parse as operator_reads_metrics
from streamapp_operator.render import Launch, render_all
from streamapp_operator.render.driver import _sink_secret_env
from streamapp_runtime import cli
from streamapp_runtime.connections import postgres_uri
from streamapp_runtime.run.metrics import Metrics
from streamapp_runtime.run.settings import (
    Settings, expand_env, from_environment, merge_conf, postgres_env_uris, spark_defaults,
)
from streamapp_testbed.paths import REPO_DIR

pytestmark = pytest.mark.unit


def _example(name: str = "click-sessions", **spec):
    document = yaml.safe_load((REPO_DIR / "examples" / f"{name}.yaml").read_text())
    document["spec"].update(spec)
    return load(document)


def _rendered(app) -> dict[str, dict]:
    return {o["kind"]: o for o in render_all(app, "uid-1", Launch(3, "runtime:test"))}


def _driver_env(pod: dict, value_from: dict[str, str] | None = None, secret: dict[str, str] | None = None) -> dict[str, str]:
    """The driver's environment as the kubelet would give it: each ``value``, each ``valueFrom`` from
    ``value_from`` (by variable name), and each key of an ``envFrom`` Secret (``secret``) with its prefix."""
    container = pod["spec"]["containers"][0]
    env = {e["name"]: e["value"] if "value" in e else (value_from or {}).get(e["name"], "") for e in container["env"]}
    for source in container.get("envFrom", []):
        env.update({source["prefix"] + key: value for key, value in (secret or {}).items()})
    return env


def test_the_config_map_files_are_where_the_driver_command_reads_them():
    objects = _rendered(_example())
    container = objects["Pod"]["spec"]["containers"][0]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "config")
    assert mount["mountPath"] == contract.CONFIG_DIR and mount["readOnly"] is True
    assert set(objects["ConfigMap"]["data"]) == {contract.MANIFEST_FILE, contract.SPARK_PROPERTIES_FILE,
                                                 contract.EXECUTOR_TEMPLATE_FILE}

    assert container["command"][:2] == ["streamapp", "run"]
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    args = parser.parse_args(container["command"][2:])
    assert args.file == f"{contract.CONFIG_DIR}/{contract.MANIFEST_FILE}"
    assert args.spark_conf == f"{contract.CONFIG_DIR}/{contract.SPARK_PROPERTIES_FILE}"
    props = contract.parse_properties(objects["ConfigMap"]["data"][contract.SPARK_PROPERTIES_FILE])
    assert props["spark.kubernetes.executor.podTemplateFile"] == f"{contract.CONFIG_DIR}/{contract.EXECUTOR_TEMPLATE_FILE}"


def test_the_manifest_in_the_config_map_is_the_app_the_runtime_loads(tmp_path):
    app = _example()
    path = tmp_path / contract.MANIFEST_FILE
    path.write_text(_rendered(app)["ConfigMap"]["data"][contract.MANIFEST_FILE])
    assert cli.load_app(str(path)).spec == app.spec


def test_spark_properties_written_by_the_operator_are_applied_verbatim_by_the_runtime():
    app = _example()
    text = _rendered(app)["ConfigMap"]["data"][contract.SPARK_PROPERTIES_FILE]
    given = contract.parse_properties(text)
    assert text == contract.format_properties(given), "one codec: what is written reads back the same"
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443", contract.ENV_POD_IP: "10.0.0.9"}
    conf = merge_conf(expand_env(given, environ), spark_defaults(app.metadata.name, app.spec.state.store, environ))
    assert conf["spark.master"] == "k8s://https://10.96.0.1:443"
    for key, value in given.items():
        if "${env:" not in value:
            assert conf[key] == value, f"{key}: the operator's value must win over the runtime's default"
    # the SQL settings the app runs with are the same whether the operator or `streamapp run` chose them
    local = spark_defaults(app.metadata.name, app.spec.state.store, {})
    for key, value in contract.app_sql_conf(app.spec.state.store).items():
        assert given[key] == local[key] == value
    assert contract.SHUFFLE_PARTITIONS not in given, "the runtime decides shuffle partitions, once"


def test_a_bad_spark_properties_line_is_named():
    with pytest.raises(contract.PropertiesError, match=r"spark.properties:3: a setting without a key"):
        contract.parse_properties("a=1\n# c\n=oops\n")
    with pytest.raises(contract.PropertiesError, match=r"spark.properties:2: malformed \\uXXXX"):
        contract.parse_properties("a=1\nb=\\u00g1\n")
    assert contract.parse_properties(contract.format_properties({"a": "two\nlines"})) == {"a": "two\nlines"}


@pytest.mark.parametrize("nonce, expected", [(None, "gen-0"), ("r1", "gen-r1")])
def test_the_checkpoint_dir_the_pod_gets_is_the_root_the_runtime_uses(nonce, expected):
    app = _example(state={"resetNonce": nonce} if nonce else {})
    objects = _rendered(app)
    env = _driver_env(objects["Pod"])
    root = from_environment(checkpoint=None, app_name=app.metadata.name, kafka=None, available_now=False,
                            console=False, spark_conf={}, postgres={}, environ=env).checkpoint_root
    assert root == f"{contract.CHECKPOINT_MOUNT}/{expected}"
    mounts = {m["name"]: m["mountPath"] for m in objects["Pod"]["spec"]["containers"][0]["volumeMounts"]}
    assert mounts[names.CHECKPOINT_VOLUME] == contract.CHECKPOINT_MOUNT
    props = contract.parse_properties(objects["ConfigMap"]["data"][contract.SPARK_PROPERTIES_FILE])
    volume = f"spark.kubernetes.executor.volumes.persistentVolumeClaim.{names.CHECKPOINT_VOLUME}"
    assert props[f"{volume}.mount.path"] == contract.CHECKPOINT_MOUNT, "executors see the checkpoint where the driver does"
    assert objects["Pod"]["metadata"]["annotations"][names.ANN_STATE_GENERATION] == expected


def test_checkpoint_locations_join_as_uris_too():
    assert checkpoint.query_checkpoint("/var/lib/x/gen-0/", "counts") == "/var/lib/x/gen-0/counts"
    assert checkpoint.query_checkpoint(checkpoint.checkpoint_root("s3a://bucket/apps/a", "2"), "counts") == \
        "s3a://bucket/apps/a/gen-2/counts"
    with pytest.raises(ValueError):
        checkpoint.query_checkpoint("/x", "a/b")


def test_metrics_port_and_pod_ip_reach_the_runtime():
    objects = _rendered(_example())
    env = _driver_env(objects["Pod"], value_from={contract.ENV_POD_IP: "10.0.0.9"})
    settings = from_environment(checkpoint=None, app_name="a", kafka=None, available_now=False, console=False,
                                spark_conf={}, postgres={}, environ=env)
    assert settings.metrics_port == contract.METRICS_PORT
    assert spark_defaults("a", "rocksdb", env)["spark.driver.host"] == "10.0.0.9"
    container = objects["Pod"]["spec"]["containers"][0]
    assert {"name": "metrics", "containerPort": contract.METRICS_PORT, "protocol": "TCP"} in container["ports"]
    assert container["readinessProbe"]["httpGet"] == {"path": contract.HEALTH_PATH, "port": "metrics"}
    annotations = objects["Pod"]["metadata"]["annotations"]
    assert (annotations["prometheus.io/port"], annotations["prometheus.io/path"]) == \
        (str(contract.METRICS_PORT), contract.METRICS_PATH)


def test_kafka_secret_keys_become_kafka_options_in_the_runtime():
    app = _example(kafka={"bootstrapServers": "k:9092", "secretRef": {"name": "kafka-creds"}})
    pod = _rendered(app)["Pod"]
    assert pod["spec"]["containers"][0]["envFrom"] == [{"prefix": contract.ENV_KAFKA_PREFIX,
                                                        "secretRef": {"name": "kafka-creds"}}]
    env = _driver_env(pod, secret={"SASL_JAAS_CONFIG": "jaas", "SECURITY_PROTOCOL": "SASL_SSL"})
    settings = from_environment(checkpoint=None, app_name="a", kafka=None, available_now=False, console=False,
                                spark_conf={}, postgres={}, environ=env)
    assert settings.kafka_env_options == {"sasl.jaas.config": "jaas", "security.protocol": "SASL_SSL"}


def test_each_postgres_sink_uri_reaches_the_runtime_under_the_name_it_reads():
    app = _example()
    env = _sink_secret_env(app)
    # What the kubelet would resolve from the Secret: here each variable gets a distinct value.
    environ = {var["name"]: f"postgresql://from-{var['valueFrom']['secretKeyRef']['name']}" for var in env}
    settings = Settings(checkpoint_root="/tmp/x", postgres_uris=postgres_env_uris(environ))

    for sink in (s for s in app.spec.sinks if s.postgres):
        secret = sink.postgres.secret_ref
        assert {"name": secret.name, "key": secret.key} in [v["valueFrom"]["secretKeyRef"] for v in env]
        assert postgres_uri(settings.postgres_uris, secret.name, "spec.sinks") == f"postgresql://from-{secret.name}"


def test_the_metrics_the_runtime_serves_are_the_ones_the_operator_reads():
    metrics = Metrics("app", {"clicks": "clicks"}, {})
    now = time.time()
    metrics.observe({
        "name": "counts", "batchId": 3, "numInputRows": 10, "batchDuration": 500,
        "inputRowsPerSecond": 20.0, "processedRowsPerSecond": 40.0,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(now)),
        "sources": [{"endOffset": {"clicks": {"0": 10, "1": 20}}, "latestOffset": {"clicks": {"0": 110, "1": 25}}}],
    })
    metrics.shuffle_partitions.labels("app").set(6)
    metrics.transactions("counts", 4, 1)
    metrics.written("counts", 3, 7, 2)
    seen = operator_reads_metrics(generate_latest(metrics.registry).decode())
    assert (seen.lag, seen.sink_lag, seen.shuffle_partitions) == (105, (("counts", 105),), 6)
    assert (seen.sink_transactions, seen.sink_aborted, seen.sink_skipped) == ((("counts", 4),), (("counts", 1),), (("counts", 2),))
    assert seen.last_batch is not None and abs(seen.last_batch.timestamp() - int(now)) <= 1
    # what scaling.mode load decides from
    metrics.count_executors(lambda: 3)
    seen = operator_reads_metrics(generate_latest(metrics.registry).decode())
    assert (seen.input_rate, seen.processed_rate, seen.batch_seconds, seen.batches, seen.executors) == (
        (("counts", 20.0),), (("counts", 40.0),), (("counts", 0.5),), (("counts", 1),), 3)


def test_the_snapshot_ask_on_the_pod_is_the_one_the_runtime_follows():
    from streamapp_operator.decide.snapshot import ask_change
    from streamapp_runtime.run.snapshot_schedule import Ask, parse_ask

    app = _example(state={"snapshotNonce": "before-upgrade", "snapshots": {"every": "6h", "keep": 4}})
    rendered = _rendered(app)["Pod"]["metadata"]["annotations"][contract.ANN_SNAPSHOT]
    assert parse_ask(rendered) == Ask("before-upgrade", 21600.0, 4)
    patched = ask_change(_example(state={"snapshotNonce": "second"}).spec.state, rendered)
    assert patched is not None and parse_ask(patched.value) == Ask("second", None, 3)


def test_the_restore_location_the_pod_gets_is_the_one_the_runtime_restores_from():
    from streamapp_operator.decide.restore import resolve
    from streamapp_runtime.run import restoring

    base = "s3a://ckpt/streams/click-sessions"
    app = _example(state={"checkpoint": {"location": base}, "resetNonce": "2", "restoreFrom": {"snapshot": "s1"}})
    where = resolve(app, None, None).location
    pod = render_all(app, "uid-1", Launch(3, "runtime:test"), restore_from=where)[-1]
    env = _driver_env(pod, value_from={contract.ENV_POD_IP: "10.0.0.9"})
    assert restoring.location(app.spec.state.restore_from, app.metadata.name, base, env) == f"{base}/snapshots/s1"
    # a local run resolves its own snapshot to the same place
    assert restoring.location(app.spec.state.restore_from, app.metadata.name, base, {}) == where


def test_the_snapshot_metrics_the_runtime_serves_are_the_ones_the_operator_reads():
    metrics = Metrics("app", {}, {})
    metrics.snapshot_taken("s1", "s3a://b/app/snapshots/s1", 1767225600.0, 2048, {"counts": 41, "totals": None})
    metrics.snapshot_failed_at("every-20260101-000100", "java.io.IOException: boom", 1767225660.0)
    seen = operator_reads_metrics(generate_latest(metrics.registry).decode())
    assert seen.snapshot is not None and seen.snapshot_failure is not None
    assert (seen.snapshot.name, seen.snapshot.taken_at.timestamp(), seen.snapshot.location, seen.snapshot.size_bytes,
            seen.snapshot.batches) == ("s1", 1767225600.0, "s3a://b/app/snapshots/s1", 2048, (("counts", 41),))
    assert (seen.snapshot_failure.name, seen.snapshot_failure.reason) == ("every-20260101-000100", "java.io.IOException: boom")


def test_the_dead_letter_topic_has_one_default():
    app = _example(deadLetter={"enabled": True})
    assert app.dead_letter_topic == f"{app.metadata.name}.dlq"
    assert _example(deadLetter={"enabled": False}).dead_letter_topic is None


def test_user_code_config_maps_are_mounted_where_the_runtime_puts_them_on_the_python_path(monkeypatch):
    from streamapp_runtime.compile.user_code import user_code_paths

    monkeypatch.delenv(contract.ENV_USER_CODE_DIR, raising=False)  # the pods do not set it
    objects = _rendered(_example(userCode={"configMaps": ["pricing", "shared-code"]}))
    executor = yaml.safe_load(objects["ConfigMap"]["data"][contract.EXECUTOR_TEMPLATE_FILE])
    for pod in (objects["Pod"], executor):
        volumes = {v["name"]: v.get("configMap", {}).get("name") for v in pod["spec"]["volumes"]}
        mounted = [m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]
                   if volumes.get(m["name"]) in ("pricing", "shared-code") and m["readOnly"]]
        assert mounted == user_code_paths(["pricing", "shared-code"])


def test_the_test_bed_sets_the_jars_variable_the_runtime_reads():
    """The two packages may not import each other (.importlinter), so the name is checked here."""
    from streamapp_runtime.run.session import JARS_ENV
    from streamapp_testbed.paths import SPARK_JARS_ENV

    assert SPARK_JARS_ENV == JARS_ENV
