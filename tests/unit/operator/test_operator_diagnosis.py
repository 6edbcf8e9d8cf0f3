"""Why an app is not running: from what the kubelet, the scheduler, the volume controller and the
runtime say to one reason and a message naming the cause and what to do (a table), and how that
reaches status and events (through plan)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from streamapp_operator.decide.diagnosis import (claim_may_block, config_maps_missing, executors_not_running,
                                                 failed_driver, pending_driver, referenced_config_maps,
                                                 referenced_secrets, secrets_missing)
from streamapp_operator.decide.plan import plan
from streamapp_operator.decide.restarts import PodObservation
from streamapp_operator.decide.world import Claim, Driver, ExecutorPods, Memory, MissingConfigMap, MissingSecret

from streamapp_testkit.operator_apps import app as make_app
from test_operator_plan import SETTINGS, cond, world

pytestmark = pytest.mark.unit
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
APP = make_app(driver={"memory": "2g"})
IMAGE = "registry.example/streamapp/runtime:0.1.0"
PENDING = PodObservation("pending")
UNBOUND = "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are available"


def claim(event: str, cls: str | None = "fast", modes=("ReadWriteMany",)) -> Claim:
    return Claim("Pending", cls, modes, (event,))


@pytest.mark.parametrize("pod, found, reason, says", [
    # the claim never binds: its own events say why, whatever the scheduler adds
    (replace(PENDING, unschedulable=UNBOUND),
     claim('ProvisioningFailed: storageclass.storage.k8s.io "fast" not found'),
     "ClaimPending", ['storage class "fast" does not exist', "spec.state.checkpoint.storageClassName"]),
    (replace(PENDING, unschedulable=UNBOUND),
     claim("FailedBinding: no persistent volumes available for this claim and no storage class is set", cls=None),
     "ClaimPending", ["no storage class is set", "create a PersistentVolume"]),
    (replace(PENDING, unschedulable=UNBOUND),
     claim("ExternalProvisioning: waiting for a volume to be created, either by external provisioner "
           '"ebs.csi.aws.com" or manually created by system administrator', cls="gp3"),
     "ClaimPending", ["storage class gp3", "ReadWriteMany", "spec.state.checkpoint.accessModes"]),
    (replace(PENDING, unschedulable=UNBOUND),
     claim("ProvisioningFailed: failed to provision volume: rpc error: access mode ReadWriteMany is not supported",
           cls="standard"),
     "ClaimPending", ["does not offer ReadWriteMany", "spec.state.checkpoint.accessModes"]),
    # waiting for its first consumer is normal: not a cause by itself
    (PENDING, claim("WaitForFirstConsumer: waiting for first consumer to be created before binding"), None, []),
    # the scheduler: too big for any node, or tainted nodes
    (replace(PENDING, unschedulable="0/3 nodes are available: 3 Insufficient memory. preemption: 0/3 nodes are "
                                    "available: 3 No preemption victims found for incoming pod."),
     None, "Unschedulable", ["3 Insufficient memory", "2432Mi", "spec.driver.memory 2g"]),
    (replace(PENDING, unschedulable="0/3 nodes are available: 3 Insufficient cpu."),
     None, "Unschedulable", ["Insufficient cpu", "spec.driver.cores"]),
    (replace(PENDING, unschedulable="0/1 nodes are available: 1 node(s) had untolerated taint "
                                    "{dedicated: gpu}."),
     None, "Unschedulable", ["untolerated taint {dedicated: gpu}", "taints the driver does not tolerate"]),
    # the kubelet: the image, a Secret the container needs
    (replace(PENDING, waiting="ImagePullBackOff", message='Back-off pulling image "registry.example/streamapp/'
                                                          'runtime:0.1.0"'),
     None, "ImagePullFailed", [f"image {IMAGE} cannot be pulled", "ImagePullBackOff", "spec.image"]),
    (replace(PENDING, waiting="ErrImageNeverPull", message="Container image is not present with pull policy of Never"),
     None, "ImagePullFailed", ["ErrImageNeverPull", "not present", "spec.imagePullPolicy"]),
    (replace(PENDING, waiting="CreateContainerConfigError", message='secret "kafka-auth" not found'),
     None, "SecretMissing", ['secret "kafka-auth" not found']),
    (replace(PENDING, waiting="CreateContainerConfigError", message="couldn't find key uri in Secret shop/pg"),
     None, "SecretMissing", ["couldn't find key uri in Secret shop/pg"]),
    (replace(PENDING, waiting="CrashLoopBackOff", message="back-off 40s restarting failed container"),
     None, "CrashLoop", ["back-off 40s"]),
    # being created, nothing wrong known
    (replace(PENDING, waiting="ContainerCreating"), None, None, []),
    (PENDING, None, None, []),
])
def test_a_pending_driver_says_why(pod, found, reason, says):
    why = pending_driver(APP, pod, found, IMAGE)
    assert (why and why.reason) == reason
    for text in says:
        assert text in why.message, why.message


@pytest.mark.parametrize("said, read", [
    (UNBOUND, True),
    ("0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind.", True),
    ("0/3 nodes are available: 3 node(s) had volume node affinity conflict.", True),
    ("0/1 nodes are available: 1 node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s).", True),
    ("0/1 nodes are available: 1 node(s) exceed max volume count.", True),
    # a driver that does not fit: its WaitForFirstConsumer claim waits for it, not the other way round
    ("0/3 nodes are available: 3 Insufficient cpu.", False),
    ("0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}.", False),
    (None, False),
])
def test_the_claim_is_read_only_when_the_scheduler_names_volumes(said, read):
    assert claim_may_block(said) is read


@pytest.mark.parametrize("pod, restarts, reason, says", [
    (PodObservation("failed", 137, "OOMKilled"), 1, "OOMKilled",
     ["out of memory at its 2432Mi limit", "raise spec.driver.memory (now 2g)"]),
    (PodObservation("failed", 1, "Error", message="PipelineError: AnalysisException: [UNRESOLVED_COLUMN."
                    "WITH_SUGGESTION] A column with name `usr` cannot be resolved. Did you mean `user`?\n"
                    "'Filter ('usr = alice)\n+- Project\n+- more\n+- and more"), 1,
     "PipelineError", ["`usr` cannot be resolved", "'Filter ('usr = alice)"]),
    (PodObservation("failed", 1, "Error", message="KafkaError: Kafka refused the credentials: "
                    "SaslAuthenticationException: bad password"), 1, "KafkaError", ["refused the credentials"]),
    # no termination message: FallbackToLogsOnError gave the log's tail
    (PodObservation("failed", 1, "Error", message="Traceback (most recent call last):\nImportError: no module x"), 1,
     "DriverFailed", ["Traceback", "ImportError: no module x"]),
    (PodObservation("failed", 137, "Error"), 1, "DriverFailed", ["exit code 137", "Error"]),
    # failing again and again: a crash loop, still saying what the last failure was
    (PodObservation("failed", 1, "Error", message="PipelineError: ValueError: table clicks missing"), 3,
     "CrashLoop", ["table clicks missing", "PipelineError, 3 times in a row"]),
])
def test_a_failed_driver_says_why(pod, restarts, reason, says):
    why = failed_driver(APP, pod, restarts)
    assert why.reason == reason
    for text in says:
        assert text in why.message, why.message


def test_an_object_store_checkpoint_names_both_keys_of_its_secret():
    app = make_app(state={"checkpoint": {"location": "s3a://bucket/apps", "s3": {"secretRef": {"name": "s3-keys"}}}})
    field = "spec.state.checkpoint.s3.secretRef"
    assert referenced_secrets(app) == [("s3-keys", "AWS_ACCESS_KEY_ID", field), ("s3-keys", "AWS_SECRET_ACCESS_KEY", field)]


def test_the_schema_registry_secret_is_needed_for_its_one_key():
    registry = {"url": "http://sr:8081", "secretRef": {"name": "sr-creds"}}
    app = make_app(kafka={"bootstrapServers": "kafka:9092", "schemaRegistry": registry})
    assert referenced_secrets(app) == [("sr-creds", "basic.auth.user.info", "spec.kafka.schemaRegistry.secretRef")]


def test_missing_secrets_and_keys_are_named_with_the_field_that_names_them():
    app = make_app(kafka={"bootstrapServers": "kafka:9092", "secretRef": {"name": "kafka-auth"}})
    assert referenced_secrets(app) == [("kafka-auth", None, "spec.kafka.secretRef")]
    why = secrets_missing("shop", (MissingSecret("pg", "uri", "spec.sinks[1].postgres.secretRef"),
                                   MissingSecret("kafka-auth", None, "spec.kafka.secretRef")))
    assert why.reason == "SecretMissing"
    assert 'Secret "pg" has no key "uri" (spec.sinks[1].postgres.secretRef)' in why.message
    assert 'Secret "kafka-auth" not found (spec.kafka.secretRef)' in why.message
    assert "kubectl -n shop create secret generic pg --from-literal=uri=" in why.message
    assert secrets_missing("shop", ()) is None


def test_the_config_maps_the_driver_mounts_are_named_with_the_field_that_names_them():
    app = make_app(userCode={"configMaps": ["enrich", "rules"]}, sources=[
        {"name": "orders", "topic": "orders", "format": "protobuf",
         "schema": {"id": "string", "amount": "double", "customer": "string"},
         "protobuf": {"message": "shop.v1.Order", "descriptorSet": {"configMap": "shop-protos", "key": "shop.pb"}}}])
    assert referenced_config_maps(app) == [
        ("enrich", None, "spec.userCode.configMaps[0]"), ("rules", None, "spec.userCode.configMaps[1]"),
        ("shop-protos", "shop.pb", "spec.sources[0].protobuf.descriptorSet")]
    why = config_maps_missing("shop", (MissingConfigMap("shop-protos", "shop.pb", "spec.sources[0].protobuf.descriptorSet"),
                                       MissingConfigMap("enrich", None, "spec.userCode.configMaps[0]")))
    assert why.reason == "ConfigMapMissing"
    assert 'ConfigMap "shop-protos" has no key "shop.pb" (spec.sources[0].protobuf.descriptorSet)' in why.message
    assert 'ConfigMap "enrich" not found (spec.userCode.configMaps[0])' in why.message
    assert "kubectl -n shop create configmap shop-protos --from-file=shop.pb=<file>" in why.message
    assert config_maps_missing("shop", ()) is None and referenced_config_maps(make_app()) == []


def test_a_missing_config_map_holds_the_first_driver_back_until_it_is_there():
    obs = replace(world(pod="absent", children=False),
                  missing_config_maps=(MissingConfigMap("enrich", None, "spec.userCode.configMaps[0]"),))
    first = plan(obs, SETTINGS, Memory(), T0)
    assert first.driver is None and first.status["phase"] == "Pending"
    assert cond(first.status, "Ready") == ("False", "ConfigMapMissing")
    assert [e.reason for e in first.events] == ["ConfigMapMissing"]
    there = plan(replace(obs, status=first.status, missing_config_maps=()), SETTINGS, Memory(), T0)
    assert there.driver == "create" and "reason" not in there.status


def test_executors_not_running_are_counted_with_the_first_reason():
    why = executors_not_running(ExecutorPods(pending=2, why="Unschedulable: 0/3 nodes are available: 3 Insufficient cpu."))
    assert why.reason == "ExecutorsNotRunning" and "2 pending" in why.message and "Insufficient cpu" in why.message
    assert "a node autoscaler, if the cluster has one, adds it" in why.message and "spec.executor.memory" in why.message
    assert executors_not_running(ExecutorPods()) is None


@pytest.mark.parametrize("why, failed, todo", [
    ("ImagePullBackOff: Back-off pulling image", 0, "check spec.image and spec.imagePullSecrets"),
    ("Error: exit code 1", 1, "kubectl logs"),
])
def test_what_to_do_about_executors_follows_why_they_do_not_run(why, failed, todo):
    found = executors_not_running(ExecutorPods(pending=1 - failed, failed=failed, why=why))
    assert todo in found.message and "spec.executor.memory" not in found.message


def test_a_missing_secret_holds_the_first_driver_back_and_is_told_once():
    obs = replace(world(pod="absent", children=False),
                  missing_secrets=(MissingSecret("pg", None, "spec.sinks[0].postgres.secretRef"),))
    first = plan(obs, SETTINGS, Memory(), T0)
    assert first.driver is None and first.status["phase"] == "Pending"
    assert first.status["reason"] == "SecretMissing" and 'Secret "pg" not found' in first.status["message"]
    assert cond(first.status, "Ready") == ("False", "SecretMissing")
    assert [e.reason for e in first.events] == ["SecretMissing"]
    assert first.requeue is not None and first.requeue.total_seconds() <= 10  # looked at again soon
    again = plan(replace(obs, status=first.status), SETTINGS, Memory(), T0)
    assert not again.events and again.status == first.status  # one event per new reason
    there = plan(replace(obs, status=first.status, missing_secrets=()), SETTINGS, Memory(), T0)
    assert there.driver == "create" and "reason" not in there.status


def test_a_pending_driver_reason_reaches_condition_message_reason_and_one_event():
    pulling = PodObservation("pending", waiting="ErrImagePull", message="not found")
    obs = replace(world(pod="pending"), driver=Driver(pulling, 2))
    first = plan(obs, SETTINGS, Memory(), T0)
    assert first.status["phase"] == "Starting" and first.status["reason"] == "ImagePullFailed"
    assert cond(first.status, "Ready") == ("False", "ImagePullFailed")
    assert "image runtime:1 cannot be pulled (ErrImagePull: not found)" in first.status["message"]
    assert [e.reason for e in first.events] == ["ImagePullFailed"]
    assert first.requeue is not None and first.requeue.total_seconds() <= 10
    backoff = replace(obs, status=first.status, driver=Driver(replace(pulling, waiting="ImagePullBackOff"), 2))
    assert not plan(backoff, SETTINGS, Memory(), T0).events  # same reason: no second event


@pytest.mark.parametrize("not_ready_for, look", [(0, 10), (20, 10), (60, 20), (75, 25), (600, 30)])
def test_an_app_long_not_ready_is_looked_at_less_often_but_within_30_s(not_ready_for, look):
    pulling = PodObservation("pending", waiting="ErrImagePull", message="not found")
    obs = replace(world(pod="pending"), driver=Driver(pulling, 2))
    first = plan(obs, SETTINGS, Memory(), T0)
    later = T0 + timedelta(seconds=not_ready_for)
    again = plan(replace(obs, status=first.status), SETTINGS, Memory(), later)
    assert again.requeue == timedelta(seconds=look)


def test_running_driver_with_executors_not_running_is_degraded():
    obs = replace(world(), executor_pods=ExecutorPods(pending=1, why="Unschedulable: 0/3 nodes: Insufficient memory"))
    p = plan(obs, SETTINGS, Memory(), T0)
    assert cond(p.status, "Degraded") == ("True", "ExecutorsNotRunning") and p.status["reason"] == "ExecutorsNotRunning"
    assert p.status["phase"] == "Running" and "Insufficient memory" in p.status["message"]


def test_a_refused_change_shows_in_the_reason_column_while_the_driver_runs():
    p = plan(world({"state": {"store": "hdfs"}}, applied_overrides={}), SETTINGS, Memory(), T0)
    assert p.status["phase"] == "Running" and p.status["reason"] == "IncompatibleChange"
    assert p.status["message"].startswith("change refused: spec.state.store")
    assert "reason" not in plan(world(), SETTINGS, Memory(), T0).status  # all well: the column is empty


def test_a_driver_no_node_is_labelled_for_names_its_node_selector():
    app = make_app(driver={"nodeSelector": {"karpenter.sh/capacity-type": "on-demand", "pool": "streaming"}})
    said = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    why = pending_driver(app, replace(PENDING, unschedulable=said), None, IMAGE)
    assert why.reason == "Unschedulable"
    assert "spec.driver.nodeSelector (karpenter.sh/capacity-type=on-demand, pool=streaming)" in why.message
