"""decide.plan: whole reconcile decisions from hand-built observations (no cluster)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from streamapp_api import Issue, Policy, contract
from streamapp_api.contract import parse_properties
from streamapp_operator import names
from streamapp_operator.decide.plan import plan
from streamapp_operator.decide.restarts import PodObservation
from streamapp_operator.decide.scaling_memory import PendingScale
from streamapp_operator.decide.world import Applied, Driver, Kafka, Memory, Observed, Progress, Settings
from streamapp_operator.render import Launch, render_children

from streamapp_testkit.operator_apps import app as make_app

pytestmark = pytest.mark.unit
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
SETTINGS = Settings(default_image="runtime:1", scale_debounce=timedelta(seconds=60))
UID = "uid-1"


def world(spec_overrides=None, *, applied_overrides=None, executors=2, pod="running", status=None,
          partitions=3, kafka_error=None, children=True, generation=1, ready=True) -> Observed:
    """An app whose children exist (rendered with ``applied_overrides`` and ``executors``) and a driver."""
    app = make_app(**(spec_overrides or {}))
    applied_app = make_app(**(applied_overrides if applied_overrides is not None else (spec_overrides or {})))
    launch = Launch(executors, "runtime:1")
    kids = {f"{o['kind']}/{o['metadata']['name']}": o for o in render_children(applied_app, UID, launch)} if children else {}
    seen = PodObservation(pod, ready=pod == "running" and ready)
    driver = Driver(seen, executors, uid="pod-uid") if pod != "absent" else Driver(PodObservation("absent"))
    if status is None:
        status = {"driverPod": names.driver_pod("orders")} if pod != "absent" else {}
    return Observed(
        name="orders", namespace="shop", uid=UID, generation=generation, status=status, app=app,
        children=kids, applied=Applied(applied_app.spec, executors) if children else None, driver=driver,
        kafka=Kafka(error=kafka_error) if kafka_error else Kafka(partitions=partitions),
    )


def cond(status: dict, kind: str) -> tuple[str, str]:
    entry = next(c for c in status["conditions"] if c["type"] == kind)
    return entry["status"], entry["reason"]


def test_first_start_creates_every_child_then_the_driver():
    p = plan(world(pod="absent", children=False), SETTINGS, Memory(), T0)
    assert [o["kind"] for o in p.create] == ["ServiceAccount", "Role", "RoleBinding", "PersistentVolumeClaim",
                                              "Secret", "ConfigMap", "Service", "Service", "PodDisruptionBudget"]
    assert "data" not in p.create[4]  # the key is made when it is created (act/), never rendered
    assert p.driver == "create" and p.driver_pod["metadata"]["name"] == "orders-driver"
    assert p.driver_pod["metadata"]["annotations"][names.ANN_EXECUTORS] == "2"  # ceil(3 / 2 cores)
    assert p.status["phase"] == "Starting" and p.status["driverPod"] == "orders-driver"
    assert p.status["desiredExecutors"] == 2 and "lastRestart" not in p.status
    assert not p.status_first
    assert [e.reason for e in p.events] == ["DriverCreated"]


def test_invalid_spec_creates_nothing_and_names_the_field():
    obs = replace(world(pod="absent", children=False), app=None,
                  issues=(Issue("spec.sinks[0].from", "unknown source or stream 'nope'"),))
    p = plan(obs, SETTINGS, Memory(), T0)
    assert (p.create, p.patch, p.driver) == ((), (), None)
    assert p.status["phase"] == "Invalid"
    assert cond(p.status, "SpecValid") == ("False", "Invalid")
    assert "spec.sinks[0].from" in p.status["message"]
    assert [e.reason for e in p.events] == ["InvalidSpec"]


def test_a_converged_app_needs_nothing_and_its_status_is_stable():
    first = plan(world(), SETTINGS, Memory(), T0)
    assert (first.create, first.patch, first.driver) == ((), (), None)
    assert first.status["phase"] == "Running" and first.status["executors"] == 2
    second = plan(world(status=first.status), SETTINGS, first.memory, T0 + timedelta(seconds=30))
    assert second.status == first.status


def test_failed_driver_is_counted_recorded_first_kept_during_the_backoff_then_cleared():
    dead = Driver(PodObservation("failed", exit_code=1, reason="Error",
                                 message="PipelineError: AnalysisException: [UNRESOLVED_COLUMN] `usr` cannot be "
                                         "resolved\nat Filter ..."), 2)
    obs = replace(world(pod="failed"), driver=dead)
    p = plan(obs, SETTINGS, Memory(), T0)
    assert p.status_first and p.driver is None and p.restarted  # the failed pod stays, to be read
    assert p.status["restarts"] == 1 and p.status["phase"] == "Restarting" and "driverPod" not in p.status
    assert p.status["lastRestart"] == {"time": "2026-01-01T00:00:00Z", "reason": "DriverFailed", "exitCode": 1,
                                       "message": dead.pod.message}
    assert p.requeue == timedelta(seconds=10)
    assert cond(p.status, "Degraded") == ("True", "DriverFailed")
    assert cond(p.status, "Ready") == ("False", "PipelineError") and p.status["reason"] == "PipelineError"
    assert "`usr` cannot be resolved" in p.status["message"]
    assert [(e.reason, "`usr`" in e.message) for e in p.events] == [("DriverFailed", True)]
    # during the backoff the dead pod is kept and still explains itself; then it is cleared
    during = plan(replace(obs, status=p.status), SETTINGS, Memory(), T0 + timedelta(seconds=4))
    assert during.driver is None and during.requeue == timedelta(seconds=6) and not during.events
    assert during.status["reason"] == "PipelineError" and "`usr`" in during.status["message"]
    due = plan(replace(obs, status=during.status), SETTINGS, Memory(), T0 + timedelta(seconds=10))
    assert due.driver == "delete_now" and not due.restarted


def test_a_driver_that_refused_its_app_is_not_restarted_and_the_field_is_named():
    said = ("Refused: spec.streams[0].steps[1].filter: function reflect() is refused on this cluster (Spark's "
            "parser reads a call the admission check did not see)")
    obs = replace(world(pod="failed"), driver=Driver(PodObservation("failed", exit_code=2, reason="Error", message=said), 2))
    p = plan(obs, SETTINGS, Memory(), T0)
    assert p.driver is None and not p.restarted and p.status["phase"] == "Failed"
    assert cond(p.status, "Ready") == ("False", "Refused") and cond(p.status, "Degraded") == ("True", "Refused")
    assert "spec.streams[0].steps[1].filter: function reflect() is refused" in p.status["message"]
    assert [e.reason for e in p.events] == ["GaveUp"] and "not restarted" in p.events[0].message
    again = plan(replace(obs, status=p.status), SETTINGS, Memory(), T0 + timedelta(minutes=10))
    assert again.driver is None and again.status["phase"] == "Failed" and not again.events


def test_the_driver_is_told_the_policys_refused_functions():
    settings = replace(SETTINGS, policy=Policy.from_mapping({"functions": {"refuse": ["java_method", "Upper"]}}))
    p = plan(world(pod="absent", children=False), settings, Memory(), T0)
    config = next(o for o in p.create if o["kind"] == "ConfigMap")
    props = parse_properties(config["data"][contract.SPARK_PROPERTIES_FILE])
    assert props[contract.REFUSED_FUNCTIONS_CONF] == "java_method,upper"
    default = next(o for o in plan(world(pod="absent", children=False), SETTINGS, Memory(), T0).create
                   if o["kind"] == "ConfigMap")
    assert parse_properties(default["data"][contract.SPARK_PROPERTIES_FILE])[contract.REFUSED_FUNCTIONS_CONF] == \
        "java_method,reflect,try_reflect"


@pytest.mark.parametrize("pod, last_restart", [
    ("absent", {"time": "2026-01-01T00:00:00Z", "reason": "DriverDeleted"}),  # no exit code known
    (PodObservation("failed", reason="NodeLost"), {"time": "2026-01-01T00:00:00Z", "reason": "NodeLost"}),
])
def test_lost_driver_is_recorded_with_its_cause(pod, last_restart):
    obs = world(pod="absent", status={"driverPod": "orders-driver", "phase": "Running"})
    if not isinstance(pod, str):
        obs = replace(obs, driver=Driver(pod, 2))
    p = plan(obs, SETTINGS, Memory(), T0)
    assert p.restarted and p.status["restarts"] == 1 and p.status["lastRestart"] == last_restart


@pytest.mark.parametrize("spec, applied, reason", [
    ({"executors": 4, "scaling": {"rescale": "restart"}}, {}, "Rescale"),
    # (no snapshot before these: a Ready driver would be kept until it reports one, test_operator_upgrade.py)
    ({"image": "streamapp/runtime:2", "upgrade": {"snapshot": False}}, {}, "SpecChange"),
    ({"shufflePartitions": 12, "state": {"resetNonce": "2"}, "upgrade": {"snapshot": False}}, {}, "SpecChange"),
])
def test_planned_restart_is_recorded_but_not_counted(spec, applied, reason):
    p = plan(world(spec, applied_overrides=applied), SETTINGS, Memory(), T0)
    assert p.driver == "delete" and not p.restarted and p.status.get("restarts", 0) == 0
    assert p.status["lastRestart"] == {"time": "2026-01-01T00:00:00Z", "reason": reason}
    # no backoff after a planned restart, even with failures counted before it
    gone = plan(world(spec, applied_overrides=applied, pod="absent", status={**p.status, "restarts": 2}),
                SETTINGS, Memory(), T0 + timedelta(seconds=1))
    assert gone.driver == "create" and gone.status["lastRestart"] == p.status["lastRestart"]


def test_after_the_backoff_a_new_driver_is_created_on_the_same_claim():
    status = {"restarts": 1, "lastRestart": {"time": "2026-01-01T00:00:00Z", "reason": "DriverFailed", "exitCode": 1},
              "phase": "Restarting"}
    waiting = plan(world(pod="absent", status=status), SETTINGS, Memory(), T0 + timedelta(seconds=4))
    assert waiting.driver is None and waiting.requeue == timedelta(seconds=6)
    ready = plan(world(pod="absent", status=status), SETTINGS, Memory(), T0 + timedelta(seconds=10))
    assert ready.driver == "create"
    volumes = {v["name"]: v for v in ready.driver_pod["spec"]["volumes"]}
    assert volumes["checkpoint"]["persistentVolumeClaim"]["claimName"] == "orders-checkpoint"
    assert ready.status["restarts"] == 1 and ready.status["phase"] == "Starting"
    assert ready.status["lastRestart"] == status["lastRestart"]  # kept until the next restart


def test_terminating_driver_is_waited_for_never_replaced():
    p = plan(world(pod="terminating", status={}), SETTINGS, Memory(), T0)
    assert p.driver is None and p.requeue is not None


def test_kafka_unreachable_leaves_the_running_driver_alone():
    p = plan(world(kafka_error="Kafka at kafka:9092 unreachable"), SETTINGS, Memory(), T0)
    assert p.driver is None and p.patch == ()
    assert cond(p.status, "Degraded") == ("True", "KafkaUnreachable")
    assert [e.reason for e in p.events] == ["KafkaUnreachable"]
    assert p.requeue == timedelta(seconds=5)
    again = plan(world(kafka_error="down"), SETTINGS, p.memory, T0)
    assert again.requeue == timedelta(seconds=10)  # backing off


def test_kafka_unreachable_on_first_start_waits():
    p = plan(world(pod="absent", children=False, kafka_error="down"), SETTINGS, Memory(), T0)
    assert p.driver is None
    assert cond(p.status, "Ready") == ("False", "WaitingForKafka")
    assert "ConfigMap" not in [o["kind"] for o in p.create]


def test_a_missing_input_topic_sizes_no_first_driver_and_keeps_a_running_one():
    missing = Kafka(partitions=0, missing_topics=("orders",))
    first = plan(replace(world(pod="absent", children=False), kafka=missing), SETTINGS, Memory(), T0)
    assert first.driver is None and first.requeue == timedelta(seconds=5)
    ready = next(c for c in first.status["conditions"] if c["type"] == "Ready")
    assert (ready["reason"], ready["message"]) == (
        "WaitingForKafka", "topics not found: orders; the first driver is sized from their partitions")
    running = plan(replace(world(executors=2), kafka=missing), SETTINGS, Memory(), T0)
    assert running.driver is None and not running.restarted  # no rescale to the topics that remain
    assert running.status["executors"] == 2


def test_the_scale_pending_event_says_the_running_driver_is_rescaled_in_place_by_default():
    p = plan(world(partitions=8), SETTINGS, Memory(), T0)
    assert [e.reason for e in p.events] == ["ScalePending"]
    assert p.events[0].message.endswith("(running 2); rescaling the running driver in place once that holds for 60s")
    assert cond(p.status, "Progressing") == ("True", "ScalePending")


def test_partition_growth_is_debounced_then_restarts_with_more_executors():
    restart = {"scaling": {"rescale": "restart"}}
    p = plan(world(restart, partitions=8), SETTINGS, Memory(), T0)
    assert p.driver is None and p.memory.pending_scale == PendingScale(4, T0)
    assert cond(p.status, "Progressing") == ("True", "ScalePending")
    assert [e.reason for e in p.events] == ["ScalePending"]
    assert p.events[0].message.endswith("(running 2); restarting the driver with them once that holds for 60s")
    assert p.requeue == timedelta(seconds=60)  # looks again when the window ends, not at the next resync
    waiting = plan(world(restart, partitions=8), SETTINGS, p.memory, T0 + timedelta(seconds=30))
    assert waiting.driver is None and waiting.events == ()  # one event per decision, not per look
    later = plan(world(restart, partitions=8), SETTINGS, p.memory, T0 + timedelta(seconds=60))
    assert later.driver == "delete" and later.status_first and later.status["phase"] == "Restarting"
    assert p.status["desiredExecutors"] == 4 and p.status["executors"] == 2  # desired, while the old count runs
    assert later.status["lastRestart"]["reason"] == "Rescale"


def test_planned_replacement_after_the_old_driver_is_gone_writes_config_then_creates():
    obs = world({"executors": 4}, applied_overrides={}, pod="absent", status={"phase": "Restarting"})
    p = plan(obs, SETTINGS, Memory(), T0)
    assert p.driver == "create" and not p.restarted
    assert [o["kind"] for o in p.patch] == ["ConfigMap"]
    assert "spark.executor.instances=4" in p.patch[0]["data"]["spark.properties"]


def test_kubectl_scale_with_rescale_restart_restarts_at_once():
    p = plan(world({"executors": 4, "scaling": {"rescale": "restart"}}, applied_overrides={}), SETTINGS, Memory(), T0)
    assert p.driver == "delete" and "rescale from 2 to 4" in p.status["message"] + str(p.events)


def test_incompatible_change_is_refused_and_the_driver_kept():
    changed = {"shufflePartitions": 12}
    p = plan(world(changed, applied_overrides={}), SETTINGS, Memory(), T0)
    assert p.driver is None and p.patch == ()
    assert cond(p.status, "SpecValid") == ("False", "IncompatibleChange")
    assert "spec.shufflePartitions" in p.status["message"]


@pytest.mark.parametrize("changed, says, never", [
    ({"shufflePartitions": 12}, "Set spec.state.resetNonce", "kubectl delete pvc"),
    # a claim's class cannot change and a reset keeps the claim: the message must not send the user to the nonce
    ({"state": {"resetNonce": "2", "checkpoint": {"storageClassName": "fast"}}}, "kubectl delete pvc", "resetNonce"),
    ({"state": {"checkpoint": {"accessModes": ["ReadWriteOncePod"]}}}, "kubectl delete pvc", "resetNonce"),
])
def test_a_refusal_says_what_would_be_accepted(changed, says, never):
    p = plan(world(changed, applied_overrides={}), SETTINGS, Memory(), T0)
    assert cond(p.status, "SpecValid") == ("False", "IncompatibleChange")
    assert says in p.status["message"] and never not in p.status["message"]


def test_reset_is_a_restart_into_a_fresh_checkpoint_path():
    changed = {"shufflePartitions": 12, "state": {"resetNonce": "2"}, "upgrade": {"snapshot": False}}
    p = plan(world(changed, applied_overrides={}), SETTINGS, Memory(), T0)
    assert p.driver == "delete"
    gone = plan(world(changed, applied_overrides={}, pod="absent", status={}), SETTINGS, Memory(), T0)
    env = {e["name"]: e.get("value") for e in gone.driver_pod["spec"]["containers"][0]["env"]}
    assert env["STREAMAPP_CHECKPOINT_DIR"] == "/var/lib/streamapp/checkpoint/gen-2"
    assert "shufflePartitions: 12" in gone.patch[0]["data"]["streamapp.yaml"]
    assert "spark.sql.shuffle.partitions" not in gone.patch[0]["data"]["spark.properties"], "the runtime decides it"


def test_suspend_stops_gracefully_and_resume_starts_again():
    p = plan(world({"suspend": True}, applied_overrides={}), SETTINGS, Memory(), T0)
    assert p.driver == "delete" and p.status_first and p.status["phase"] == "Suspended"
    idle = plan(world({"suspend": True}, applied_overrides={}, pod="absent", status=p.status), SETTINGS, Memory(), T0)
    assert idle.driver is None and idle.status["phase"] == "Suspended" and idle.requeue is None
    back = plan(world({}, applied_overrides={"suspend": True}, pod="absent", status=p.status), SETTINGS, Memory(), T0)
    assert back.driver == "create" and not back.restarted


def test_retention_change_converges_the_claim_owner_reference():
    p = plan(world({"state": {"retainOnDelete": False}}, applied_overrides={}), SETTINGS, Memory(), T0)
    claims = [o for o in p.patch if o["kind"] == "PersistentVolumeClaim"]
    assert claims and claims[0]["metadata"]["ownerReferences"][0]["uid"] == UID
    assert p.driver is None  # no effect on the running app


def test_gave_up_stays_failed_until_the_spec_changes():
    status = {"phase": "Failed", "restarts": 3, "observedGeneration": 1}
    overrides = {"restartPolicy": {"maxRestarts": 3}}
    stuck = plan(world(overrides, pod="absent", status=status), SETTINGS, Memory(), T0)
    assert stuck.driver is None and stuck.status["phase"] == "Failed"
    retried = plan(world(overrides, pod="absent", status=status, generation=2), SETTINGS, Memory(), T0)
    assert retried.driver == "create" and retried.status["restarts"] == 0


def test_driver_progress_lands_in_status():
    from streamapp_operator.decide.world import Progress

    progress = Progress(lag=12, last_batch=T0, sink_lag=(("counts-out", 12),), sink_last_batch=(("counts-out", T0),),
                        sink_transactions=(("counts-out", 40),), sink_skipped=(("counts-out", 2),))
    p = plan(replace(world(), progress=progress), SETTINGS, Memory(), T0)
    assert p.status["lag"] == 12
    assert p.status["sinks"] == [{"name": "counts-out", "lag": 12, "lastProgressTime": "2026-01-01T00:00:00Z",
                                  "transactions": 40, "partitionsSkipped": 2}]


@pytest.mark.parametrize("pod, ready, before, phase, reason", [
    ("pending", False, "Starting", "Starting", "DriverPending"),  # created, not running yet
    ("running", False, "Starting", "Starting", "DriverNotReady"),  # running, /healthz not answering yet
    ("running", True, "Starting", "Running", "DriverReady"),
    ("running", True, "Running", "Running", "DriverReady"),
    ("running", False, "Running", "Running", "DriverNotReady"),  # was Ready, queries unhealthy now: still Running
])
def test_driver_is_starting_until_ready_then_running(pod, ready, before, phase, reason):
    status = {"driverPod": "orders-driver", "phase": before}
    p = plan(world(pod=pod, ready=ready, status=status), SETTINGS, Memory(), T0)
    assert p.driver is None and p.status["phase"] == phase
    assert cond(p.status, "Ready") == ("True" if reason == "DriverReady" else "False", reason)


@pytest.mark.parametrize("pod, reported, before, nonce, expected", [
    ("running", 5, {}, None, 5),                                   # what the driver's checkpoint uses
    ("running", 5, {"shufflePartitions": 3}, None, 5),            # the driver wins over an older figure
    ("absent", None, {"shufflePartitions": 3}, None, 3),          # no driver: the last figure, same state
    ("absent", None, {"shufflePartitions": 3, "resetNonce": "1"}, "2", None),  # a reset: not known yet
    ("running", None, {}, None, None),                            # never reported: not guessed
])
def test_status_reports_the_shuffle_partitions_the_driver_reports(pod, reported, before, nonce, expected):
    spec = {"state": {"resetNonce": nonce}} if nonce else {}
    obs = world(spec, applied_overrides=spec, pod=pod, status={"state": before, "driverPod": "orders-driver"})
    obs = replace(obs, progress=Progress(shuffle_partitions=reported))
    state = plan(obs, SETTINGS, Memory(), T0).status["state"]
    assert state.get("shufflePartitions") == expected


def test_a_count_set_by_kubectl_scale_says_how_to_follow_the_partitions_again():
    p = plan(world({"executors": 3}), SETTINGS, Memory(), T0)
    assert p.status["scaling"]["mode"] == "manual"
    assert "remove spec.executors to follow the partitions again" in p.status["scaling"]["reason"]
