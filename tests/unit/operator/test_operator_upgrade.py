"""A spec change that restarts the driver: the snapshot asked before it, the watch after it, the last
stable spec and the rollback (decide/upgrade.py), through the whole decision (decide/plan.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from streamapp_api import contract
from streamapp_operator import names
from streamapp_operator.decide.plan import plan
from streamapp_operator.decide.restarts import PodObservation
from streamapp_operator.decide.upgrade import spec_json, stable_spec
from streamapp_operator.decide.world import Applied, Driver, Kafka, Memory, Observed, Progress, Settings, SnapshotFailed, SnapshotTaken
from streamapp_operator.observe.kube import stable_app
from streamapp_operator.render import Launch, render_children

from streamapp_testkit.operator_apps import app as make_app, manifest

pytestmark = pytest.mark.unit
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NOW = T0 + timedelta(hours=1)
SEC, MIN = timedelta(seconds=1), timedelta(minutes=1)
SETTINGS = Settings(default_image="runtime:1")
OLD = make_app(image="runtime:1")  # the stable spec, generation 1
NEW = {"image": "runtime:2"}  # a change that restarts the driver
READY = PodObservation("running", running_since=T0, ready=True)
ANSWERING = Progress(read_at=NOW, executors=2)


def stable_status(generation: int = 1, **more) -> dict:
    return {"driverPod": names.driver_pod("orders"), "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "reason": "DriverReady",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "upgrade": {"lastStableGeneration": generation, "lastStableSpec": spec_json(OLD.spec)}, **more}


def world(*, generation: int = 2, pod: PodObservation = READY, seen: Progress = ANSWERING, status: dict | None = None,
          applied=OLD, stable=OLD, **new) -> Observed:
    app = make_app(**{"image": "runtime:1", **new})
    kids = {f"{o['kind']}/{o['metadata']['name']}": o for o in render_children(applied, "uid-1", Launch(2, "runtime:1"))}
    return Observed(name="orders", namespace="shop", uid="uid-1", generation=generation,
                    status=stable_status() if status is None else status, app=app, children=kids,
                    applied=Applied(applied.spec, 2), driver=Driver(pod, 2, uid="pod-uid"), kafka=Kafka(partitions=3),
                    progress=seen, stable_app=stable)


def taken(name: str) -> Progress:
    return replace(ANSWERING, snapshot=SnapshotTaken(name, NOW, "/checkpoint/snapshots/" + name, 10, ()))


def reasons(p) -> list[str]:
    return [e.reason for e in p.events]


# --- the snapshot before the restart ----------------------------------------------------------------

def test_a_ready_driver_is_asked_for_a_snapshot_and_kept_until_it_reports_it():
    first = plan(world(**NEW), SETTINGS, Memory(), NOW)
    name = "pre-2-20260101-010000"
    assert first.driver is None and first.requeue <= 5 * SEC
    assert json.loads(first.driver_patch["metadata"]["annotations"][names.ANN_SNAPSHOT])["nonce"] == name
    assert first.driver_patch["metadata"]["uid"] == "pod-uid"  # a successor pod is never patched
    assert first.status["upgrade"]["preSnapshot"] == {"name": name, "askedAt": "2026-01-01T01:00:00Z"}
    progressing = next(c for c in first.status["conditions"] if c["type"] == "Progressing")
    assert progressing["reason"] == "SnapshotBeforeRestart" and name in progressing["message"]
    assert "SnapshotRequested" in reasons(first)
    assert first.status["upgrade"]["lastStableGeneration"] == 1  # the Ready driver runs generation 1's spec

    asked = world(status=first.status, **NEW)
    later = plan(asked, SETTINGS, Memory(), NOW + 10 * SEC)
    assert later.driver is None and "SnapshotRequested" not in reasons(later)  # asked once, still waiting
    assert later.status["upgrade"]["preSnapshot"]["name"] == name  # the name does not move with the clock

    done = plan(replace(asked, progress=taken(name)), SETTINGS, Memory(), NOW + 20 * SEC)
    assert done.driver == "delete" and done.status["lastRestart"]["reason"] == "SpecChange"
    assert done.status["upgrade"]["watching"] == {"generation": 2, "startedAt": "2026-01-01T01:00:20Z", "snapshot": name}
    assert "preSnapshot" not in done.status["upgrade"]

    # the window runs from the new driver's creation: the old one's graceful stop took a minute
    gone = replace(asked, driver=Driver(PodObservation("absent")), status={**done.status, "conditions": []})
    created = plan(gone, SETTINGS, Memory(), NOW + 80 * SEC)
    assert created.driver == "create"
    assert created.status["upgrade"]["watching"] == {"generation": 2, "startedAt": "2026-01-01T01:01:20Z", "snapshot": name}


@pytest.mark.parametrize("case, obs, why", [
    ("metrics silent", world(seen=Progress(unanswered=True), **NEW), "metrics do not answer"),
    ("not ready", world(pod=PodObservation("running", running_since=T0, ready=False), **NEW), "not Ready"),
    ("failed", world(seen=replace(ANSWERING, snapshot_failure=SnapshotFailed("pre-2-20260101-010000", NOW, "disk full")),
                     **NEW), "it failed: disk full"),
    ("waited too long", world(status={**stable_status(), "upgrade": {
        **stable_status()["upgrade"], "preSnapshot": {"name": "pre-2-20260101-005400", "askedAt": "2026-01-01T00:54:00Z"}}},
        **NEW), "not taken within 5m00s"),
])
def test_the_restart_goes_ahead_without_the_snapshot_when_waiting_is_pointless(case, obs, why):
    p = plan(obs, SETTINGS, Memory(), NOW)
    assert p.driver == "delete", case
    [skipped] = [e for e in p.events if e.reason == "SnapshotSkipped"]
    assert skipped.type == "Warning" and why in skipped.message
    assert "snapshot" not in p.status["upgrade"]["watching"]


def test_a_driver_whose_metrics_are_not_read_yet_is_waited_for():
    # a driver Ready a moment ago: the operator reads its metrics within half a resync
    p = plan(world(seen=Progress(), **NEW), SETTINGS, Memory(), NOW)
    assert p.driver is None and p.driver_patch is not None and "SnapshotSkipped" not in reasons(p)


def test_without_upgrade_snapshot_the_driver_restarts_at_once():
    p = plan(world(**NEW, upgrade={"snapshot": False}), SETTINGS, Memory(), NOW)
    assert p.driver == "delete" and not {"SnapshotSkipped", "SnapshotRequested"} & set(reasons(p))


def test_a_change_that_does_not_restart_asks_no_snapshot():
    p = plan(world(restartPolicy={"maxRestarts": 4}), SETTINGS, Memory(), NOW)
    assert p.driver is None and p.driver_patch is None and "preSnapshot" not in p.status["upgrade"]


# --- the watch and the stable spec -------------------------------------------------------------------

def watched(started: datetime, snapshot: str | None = "pre-2-20260101-010000", **more) -> dict:
    watching = {"generation": 2, "startedAt": started.strftime("%Y-%m-%dT%H:%M:%SZ")}
    if snapshot:
        watching["snapshot"] = snapshot
    upgrade = {**stable_status()["upgrade"], "watching": watching}
    return {**stable_status(), "upgrade": upgrade, **more}


def ready_since(status: dict, since: datetime) -> dict:
    ready = {"type": "Ready", "status": "True", "reason": "DriverReady",
             "lastTransitionTime": since.strftime("%Y-%m-%dT%H:%M:%SZ")}
    return {**status, "conditions": [ready]}


def test_the_changed_spec_becomes_stable_after_the_health_window():
    new = make_app(image="runtime:2")
    status = ready_since(watched(NOW), NOW + MIN)
    early = plan(world(status=status, applied=new, **NEW), SETTINGS, Memory(), NOW + 5 * MIN)
    assert early.status["upgrade"]["lastStableGeneration"] == 1 and "watching" in early.status["upgrade"]
    # judged when the window ends, not at the next resync; the resyncs before it need read nothing
    assert early.due == MIN + SEC and early.requeue is None
    p = plan(world(status=status, applied=new, **NEW), SETTINGS, Memory(), NOW + 6 * MIN + SEC)
    assert p.status["upgrade"]["lastStableGeneration"] == 2 and "watching" not in p.status["upgrade"]
    assert stable_spec(p.status).image == "runtime:2"


def test_an_app_never_watched_records_its_spec_as_stable_once_ready_for_the_window():
    status = {k: v for k, v in stable_status().items() if k != "upgrade"}
    p = plan(world(generation=1, status=status), SETTINGS, Memory(), NOW)
    assert p.status["upgrade"]["lastStableGeneration"] == 1 and stable_spec(p.status) == OLD.spec


def test_a_first_driver_of_a_spec_other_than_the_stable_one_is_watched():
    status = {**stable_status(), "driverPod": None, "phase": "Pending", "conditions": []}
    p = plan(world(pod=PodObservation("absent"), applied=make_app(image="runtime:2"), status=status, **NEW),
             SETTINGS, Memory(), NOW)
    assert p.driver == "create" and p.status["upgrade"]["watching"] == {"generation": 2, "startedAt": "2026-01-01T01:00:00Z"}


# --- rollback --------------------------------------------------------------------------------------

FAILED = PodObservation("failed", exit_code=1, message="PipelineError: column nope not found")
ROLLBACK = {"upgrade": {"rollback": True}}


def test_a_change_whose_driver_fails_is_rolled_back_to_the_stable_spec_and_its_snapshot():
    failing = world(pod=FAILED, status=watched(NOW), applied=make_app(image="runtime:2"), seen=Progress(), **NEW, **ROLLBACK)
    p = plan(failing, SETTINGS, Memory(), NOW + MIN)
    rollback = p.status["upgrade"]["rollback"]
    assert rollback["generation"] == 2 and rollback["toGeneration"] == 1
    assert rollback["snapshot"] == "pre-2-20260101-010000" and "column nope not found" in rollback["reason"]
    assert json.loads(rollback["failedSpec"])["image"] == "runtime:2"
    cond = next(c for c in p.status["conditions"] if c["type"] == "RolledBack")
    assert cond["status"] == "True" and "generation 1" in cond["message"]
    assert "RolledBack" in reasons(p) and p.status["lastRestart"]["reason"] == "RolledBack"
    assert p.status["restarts"] == 0 and p.driver == "delete_now"  # no backoff: the failed pod goes now

    gone = replace(failing, driver=Driver(PodObservation("absent")), status=p.status)
    started = plan(gone, SETTINGS, Memory(), NOW + MIN + SEC)
    assert started.driver == "create"
    pod = started.driver_pod["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in pod["env"]}
    assert pod["image"] == "runtime:1"  # the stable spec
    assert env[contract.ENV_RESTORE_FROM] == f"{contract.CHECKPOINT_MOUNT}/snapshots/pre-2-20260101-010000"
    assert env[contract.ENV_RESTORE_ID] == "rollback-2"
    assert "watching" not in started.status["upgrade"]  # a rollback is not a change to watch
    assert started.status["upgrade"]["rollback"] == rollback

    running = replace(gone, driver=Driver(READY, 2, uid="pod-2"), applied=Applied(OLD.spec, 2), status=started.status)
    kept = plan(running, SETTINGS, Memory(), NOW + 2 * MIN)
    assert kept.driver is None and kept.driver_patch is None  # runs the stable spec; the applied one stays refused


def test_a_driver_not_ready_within_the_window_is_rolled_back():
    slow = world(pod=PodObservation("running", running_since=NOW, ready=False), status=watched(NOW),
                 applied=make_app(image="runtime:2"), **NEW, **ROLLBACK)
    assert plan(slow, SETTINGS, Memory(), NOW + 4 * MIN).status["upgrade"].get("rollback") is None
    # running but not Ready when the window ends: a minute more, to get Ready or to exit with its own reason
    late = plan(slow, SETTINGS, Memory(), NOW + 5 * MIN + SEC)
    assert late.status["upgrade"].get("rollback") is None and late.requeue <= MIN
    p = plan(slow, SETTINGS, Memory(), NOW + 6 * MIN + SEC)
    assert p.driver == "delete" and "not Ready within healthWindow (5m00s)" in p.status["upgrade"]["rollback"]["reason"]
    assert not {"SnapshotRequested", "SnapshotSkipped"} & set(reasons(p))  # the failed spec's state is not kept


@pytest.mark.parametrize("waiting, at_once", [("ErrImageNeverPull", True), ("InvalidImageName", True),
                                               ("ImagePullBackOff", False), ("ErrImagePull", False),
                                               ("CreateContainerConfigError", False)])
def test_a_driver_whose_image_the_node_cannot_have_is_rolled_back_without_waiting_for_the_window(waiting, at_once):
    """An image absent with imagePullPolicy Never, or a name that is no image's, never starts: no reason to wait
    the window. A failed pull may succeed on a retry and a missing Secret may be created: those get the window."""
    stuck = world(pod=PodObservation("pending", waiting=waiting, message="image not present"), status=watched(NOW),
                  applied=make_app(image="runtime:2"), **NEW, **ROLLBACK)
    rollback = plan(stuck, SETTINGS, Memory(), NOW + 10 * SEC).status["upgrade"].get("rollback")
    if at_once:
        assert f"its driver cannot start ({waiting}: image not present)" in rollback["reason"], rollback
    else:
        assert rollback is None
        late = plan(stuck, SETTINGS, Memory(), NOW + 5 * MIN + SEC).status["upgrade"]["rollback"]
        assert "not Ready within healthWindow (5m00s)" in late["reason"], late


def test_a_driver_that_fails_in_the_late_minute_is_rolled_back_with_its_own_reason():
    """A driver whose query failed is not Ready while its Spark session closes: when the window ends then,
    the reason of the rollback is the failure its exit gives, not the window."""
    stopping = world(pod=PodObservation("running", running_since=NOW, ready=False), status=watched(NOW),
                     applied=make_app(image="runtime:2"), **NEW, **ROLLBACK)
    assert plan(stopping, SETTINGS, Memory(), NOW + 5 * MIN + 10 * SEC).status["upgrade"].get("rollback") is None
    exited = replace(stopping, driver=Driver(FAILED, 2, uid="pod-uid"))
    p = plan(exited, SETTINGS, Memory(), NOW + 5 * MIN + 20 * SEC)
    assert "column nope not found" in p.status["upgrade"]["rollback"]["reason"]


def test_a_failed_reset_goes_back_to_the_stable_generation_without_a_restore():
    failing = world(pod=FAILED, status=watched(NOW), applied=make_app(image="runtime:1", state={"resetNonce": "b"}),
                    state={"resetNonce": "b"}, **ROLLBACK)
    p = plan(failing, SETTINGS, Memory(), NOW + MIN)
    assert "snapshot" not in p.status["upgrade"]["rollback"]
    gone = replace(failing, driver=Driver(PodObservation("absent")), status=p.status)
    env = {e["name"]: e.get("value") for e in plan(gone, SETTINGS, Memory(), NOW + 2 * MIN).driver_pod["spec"]["containers"][0]["env"]}
    assert contract.ENV_RESTORE_FROM not in env and env[contract.ENV_CHECKPOINT_DIR] == names.checkpoint_dir(None, None)


def test_without_rollback_a_failed_change_is_restarted_as_any_failure():
    p = plan(world(pod=FAILED, status=watched(NOW), applied=make_app(image="runtime:2"), **NEW), SETTINGS, Memory(),
             NOW + MIN)
    assert "rollback" not in p.status["upgrade"] and p.restarted and p.status["lastRestart"]["reason"] == "DriverFailed"


def test_no_rollback_without_a_stable_spec_that_passes_the_checks():
    p = plan(world(pod=FAILED, status=watched(NOW), applied=make_app(image="runtime:2"), stable=None, **NEW, **ROLLBACK),
             SETTINGS, Memory(), NOW + MIN)
    assert "rollback" not in p.status["upgrade"] and p.status["lastRestart"]["reason"] == "DriverFailed"


def test_a_newer_spec_after_a_rollback_is_tried():
    rolled = {**stable_status(), "upgrade": {**stable_status()["upgrade"], "rollback": {
        "generation": 2, "toGeneration": 1, "time": "2026-01-01T01:01:00Z", "reason": "r", "failedSpec": "{}"}}}
    p = plan(world(generation=3, status=rolled, image="runtime:3", **ROLLBACK), SETTINGS, Memory(), NOW)
    assert p.driver is None and p.driver_patch is not None  # the snapshot before the restart for runtime:3
    cond = next(c for c in p.status["conditions"] if c["type"] == "RolledBack")
    assert (cond["status"], cond["reason"]) == ("False", "NewerSpec")


@pytest.mark.parametrize("stored", ["not json", json.dumps({"image": "x"}), json.dumps([1]), None])
def test_a_stable_spec_that_is_not_one_is_not_run(stored):
    body = {**manifest(), "metadata": {"name": "orders", "namespace": "shop", "uid": "u", "generation": 2},
            "status": {"upgrade": {"lastStableSpec": stored}}}
    assert stable_app(body) is None


def test_the_stable_spec_in_status_is_checked_like_a_spec():
    body = {**manifest(), "metadata": {"name": "orders", "namespace": "shop", "uid": "u", "generation": 2},
            "status": {"upgrade": {"lastStableSpec": spec_json(OLD.spec)}}}
    assert stable_app(body).spec == OLD.spec
    bad = json.loads(spec_json(OLD.spec))
    bad["sparkConf"] = {"spark.executor.instances": "500"}  # refused in a spec, so refused here
    body["status"]["upgrade"]["lastStableSpec"] = json.dumps(bad)
    assert stable_app(body) is None
