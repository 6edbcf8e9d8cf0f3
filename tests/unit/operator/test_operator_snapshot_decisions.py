"""Snapshots and restore, the operator's side: the ask on the driver pod (decide/snapshot.py), the
driver's report into status, restoreFrom resolved to a location (decide/restore.py), then whole
reconciles (no cluster; on the API server: tests/operator/test_operator_snapshots.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest

from streamapp_api import contract
from streamapp_operator import names
from streamapp_operator.decide.plan import plan
from streamapp_operator.decide.restore import NO_RESTORE, other_app, resolve
from streamapp_operator.decide.snapshot import ask_change, snapshot_status
from streamapp_operator.decide.world import (
    Driver, KeptSnapshot, Memory, Progress, RestoreSource, SnapshotFailed, SnapshotTaken,
)
from streamapp_operator.observe.metrics import parse

from streamapp_testkit.operator_apps import app as make_app
from test_operator_plan import SETTINGS, T0, cond, world

pytestmark = pytest.mark.unit
S3 = {"checkpoint": {"location": "s3a://ckpt/shop/orders"}}
BASE = "s3a://ckpt/shop/orders"


def ask(nonce=None, every=None, keep=3) -> str:
    return json.dumps({"nonce": nonce, "every": every, "keep": keep}, separators=(",", ":"))


@pytest.mark.parametrize("state, on_pod, written, events", [
    ({}, None, "unchanged", []),
    # a new nonce: asked of the running driver, with an event naming it
    ({"snapshotNonce": "before-upgrade"}, None, ask("before-upgrade"), ["SnapshotRequested"]),
    ({"snapshotNonce": "second"}, ask("first"), ask("second"), ["SnapshotRequested"]),
    ({"snapshotNonce": "first"}, ask("first"), "unchanged", []),
    ({"snapshotNonce": "first"}, '{"keep":3, "every":null, "nonce":"first"}', "unchanged", []),  # same, spelt otherwise
    # a schedule: its period in seconds and the retention; a new schedule alone asks for no snapshot now
    ({"snapshots": {"every": "6h", "keep": 4}}, None, ask(None, 21600, 4), []),
    ({"snapshotNonce": "first", "snapshots": {"every": "1m"}}, ask("first"), ask("first", 60, 3), []),
    # nothing asked any more: the annotation goes; one that is no JSON is written again
    ({}, ask("first"), None, []),
    ({"snapshotNonce": "first"}, "{not json", ask("first"), ["SnapshotRequested"]),
])
def test_the_ask_on_the_running_driver(state, on_pod, written, events):
    change = ask_change(make_app(state=state).spec.state, on_pod)
    if written == "unchanged":
        assert change is None
        return
    assert change is not None
    assert (json.loads(change.value) if change.value else None) == (json.loads(written) if written else None)
    assert [e.reason for e in change.events] == events


TAKEN = SnapshotTaken("before-upgrade", T0, "s3a://ckpt/shop/orders/snapshots/before-upgrade", 2048,
                      (("counts", 41), ("totals", 40)))
LAST = {"name": "before-upgrade", "takenAt": "2026-01-01T00:00:00Z",
        "location": "s3a://ckpt/shop/orders/snapshots/before-upgrade", "sizeBytes": 2048,
        "batches": {"counts": 41, "totals": 40}}
FAILED = SnapshotFailed("every-20260101-000100", T0 + timedelta(minutes=1), "java.io.IOException: no space left")
FAILURE = {"name": "every-20260101-000100", "time": "2026-01-01T00:01:00Z", "reason": "java.io.IOException: no space left"}


@pytest.mark.parametrize("reported, before, last, failure, events", [
    # nothing reported (no driver, or one restarted since): status as it was
    (Progress(), {}, None, None, []),
    (Progress(), {"lastSnapshot": LAST}, LAST, None, []),
    # a new snapshot: into status, one event; the same one read again: no second event
    (Progress(snapshot=TAKEN), {}, LAST, None, ["SnapshotTaken"]),
    (Progress(snapshot=TAKEN), {"lastSnapshot": LAST}, LAST, None, []),
    # a failure after it: a warning, once, and the last snapshot stays
    (Progress(snapshot=TAKEN, snapshot_failure=FAILED), {"lastSnapshot": LAST}, LAST, FAILURE, ["SnapshotFailed"]),
    (Progress(snapshot=TAKEN, snapshot_failure=FAILED), {"lastSnapshot": LAST, "lastSnapshotFailure": FAILURE},
     LAST, FAILURE, []),
    # a later snapshot ends the failure (also one the driver still reports, of another name)
    (Progress(snapshot=replace(TAKEN, taken_at=T0 + timedelta(minutes=2)), snapshot_failure=FAILED),
     {"lastSnapshot": LAST, "lastSnapshotFailure": FAILURE},
     {**LAST, "takenAt": "2026-01-01T00:02:00Z"}, None, ["SnapshotTaken"]),
])
def test_the_drivers_report_lands_in_status_with_one_event_each(reported, before, last, failure, events):
    found = snapshot_status(reported, before, BASE)
    assert (found.last, found.failure) == (last, failure)
    assert [e.reason for e in found.events] == events


def test_the_snapshot_event_says_what_a_user_checks():
    (event,) = snapshot_status(Progress(snapshot=TAKEN), {}, BASE).events
    assert event.type == "Normal"
    assert event.message == ("snapshot before-upgrade taken: at batch counts 41, totals 40, 2048 bytes, "
                             "in s3a://ckpt/shop/orders/snapshots/before-upgrade")
    (warning,) = snapshot_status(Progress(snapshot_failure=FAILED), {}, BASE).events
    assert warning.type == "Warning" and "no space left" in warning.message


def test_the_drivers_snapshot_metrics_are_read():
    text = "\n".join([
        f"# TYPE {contract.METRIC_SNAPSHOT_TIME} gauge",
        f'{contract.METRIC_SNAPSHOT_TIME}{{app="orders",snapshot="old",location="s3a://b/old"}} 1000',
        f'{contract.METRIC_SNAPSHOT_TIME}{{app="orders",snapshot="new",location="s3a://b/new"}} 1767225600',
        f"# TYPE {contract.METRIC_SNAPSHOT_BYTES} gauge",
        f'{contract.METRIC_SNAPSHOT_BYTES}{{app="orders",snapshot="new"}} 2048',
        f'{contract.METRIC_SNAPSHOT_BYTES}{{app="orders",snapshot="old"}} 7',
        f"# TYPE {contract.METRIC_SNAPSHOT_BATCH} gauge",
        f'{contract.METRIC_SNAPSHOT_BATCH}{{app="orders",snapshot="new",query="counts"}} 41',
        f'{contract.METRIC_SNAPSHOT_BATCH}{{app="orders",snapshot="new",query="totals"}} NaN',
        f"# TYPE {contract.METRIC_SNAPSHOT_FAILED} gauge",
        f'{contract.METRIC_SNAPSHOT_FAILED}{{app="orders",snapshot="x",reason="boom"}} 1767225660',
        "",
    ])
    progress = parse(text)
    assert progress.snapshot == SnapshotTaken("new", T0, "s3a://b/new", 2048, (("counts", 41),))
    assert progress.snapshot_failure == SnapshotFailed("x", T0 + timedelta(minutes=1), "boom")
    assert parse("").snapshot is None and parse("").snapshot_failure is None


def test_every_snapshot_kept_is_listed_newest_first_and_kept_while_no_driver_reports():
    kept = (KeptSnapshot("every-20260101-000000", T0, 10, (("counts", 3),)),
            KeptSnapshot("before-upgrade", T0 + timedelta(minutes=5), 20, (("counts", 7),)),
            KeptSnapshot("copied-by-hand"))  # no recorded time nor size: last
    listed = snapshot_status(Progress(snapshots_kept=kept), {}, BASE).kept
    assert listed == [
        {"name": "before-upgrade", "location": f"{BASE}/snapshots/before-upgrade", "takenAt": "2026-01-01T00:05:00Z",
         "sizeBytes": 20, "batches": {"counts": 7}},
        {"name": "every-20260101-000000", "location": f"{BASE}/snapshots/every-20260101-000000",
         "takenAt": "2026-01-01T00:00:00Z", "sizeBytes": 10, "batches": {"counts": 3}},
        {"name": "copied-by-hand", "location": f"{BASE}/snapshots/copied-by-hand"}]
    assert snapshot_status(Progress(), {"snapshots": listed}, BASE).kept == listed  # no driver: as they were
    assert snapshot_status(Progress(snapshots_kept=()), {"snapshots": listed}, BASE).kept == []  # all deleted
    many = tuple(KeptSnapshot(f"s{i}", T0 + timedelta(seconds=i)) for i in range(150))
    newest = snapshot_status(Progress(snapshots_kept=many), {}, BASE).kept
    assert len(newest) == 100 and newest[0]["name"] == "s149" and newest[-1]["name"] == "s50"


def test_the_drivers_list_of_kept_snapshots_is_read_once_it_has_listed_them():
    lines = [f"# TYPE {contract.METRIC_SNAPSHOTS_KEPT} gauge", f"# TYPE {contract.METRIC_SNAPSHOT_KEPT} gauge"]
    assert parse("\n".join([*lines, f'{contract.METRIC_SNAPSHOTS_KEPT}{{app="orders"}} -1', ""])).snapshots_kept is None
    assert parse("").snapshots_kept is None  # a runtime that does not say
    assert parse("\n".join([*lines, f'{contract.METRIC_SNAPSHOTS_KEPT}{{app="orders"}} 0', ""])).snapshots_kept == ()
    text = "\n".join([
        *lines, f'{contract.METRIC_SNAPSHOTS_KEPT}{{app="orders"}} 2',
        f'{contract.METRIC_SNAPSHOT_KEPT}{{app="orders",snapshot="a"}} 1767225600',
        f'{contract.METRIC_SNAPSHOT_KEPT}{{app="orders",snapshot="old"}} 0',
        f"# TYPE {contract.METRIC_SNAPSHOT_KEPT_BYTES} gauge",
        f'{contract.METRIC_SNAPSHOT_KEPT_BYTES}{{app="orders",snapshot="a"}} 2048',
        f'{contract.METRIC_SNAPSHOT_KEPT_BYTES}{{app="orders",snapshot="old"}} -1',
        f"# TYPE {contract.METRIC_SNAPSHOT_KEPT_BATCH} gauge",
        f'{contract.METRIC_SNAPSHOT_KEPT_BATCH}{{app="orders",snapshot="a",query="counts"}} 41',
        f'{contract.METRIC_SNAPSHOT_KEPT_BATCH}{{app="orders",snapshot="a",query="fresh"}} -1',
        f'{contract.METRIC_SNAPSHOT_KEPT_BATCH}{{app="orders",snapshot="gone",query="counts"}} 9', ""])
    assert parse(text).snapshots_kept == (KeptSnapshot("a", T0, 2048, (("counts", 41),)), KeptSnapshot("old"))


OWN = {"restoreFrom": {"snapshot": "s1"}, "resetNonce": "2"}
BLUE = {"restoreFrom": {"snapshot": "s1", "app": "blue"}, "resetNonce": "2"}
FOUND = RestoreSource("blue", found=True, location="s3a://ckpt/shop/blue")


@pytest.mark.parametrize("state, recorded, source, location, problem", [
    ({}, None, None, None, None),
    # this app's own snapshot: under its location, else under its volume's mount in the driver
    ({**OWN, **S3}, None, None, "s3a://ckpt/shop/orders/snapshots/s1", None),
    (OWN, None, None, f"{contract.CHECKPOINT_MOUNT}/snapshots/s1", None),
    ({"restoreFrom": {"snapshot": "s1", "app": "orders"}}, None, None, f"{contract.CHECKPOINT_MOUNT}/snapshots/s1", None),
    # another app's: under its object-store location
    (BLUE, None, FOUND, "s3a://ckpt/shop/blue/snapshots/s1", None),
    (BLUE, None, RestoreSource("blue", found=False), None, "spec.state.restoreFrom.app: StreamApp 'blue' not found"),
    (BLUE, None, RestoreSource("blue", found=True), None, "keeps its checkpoint on a volume"),
    (BLUE, None, RestoreSource("blue", found=True, invalid=True), None, "'blue' is invalid"),
    (BLUE, None, RestoreSource("blue", found=True, location="/etc"), None, "keeps its checkpoint on a volume"),
    (BLUE, None, None, None, None),  # not read (a driver runs): nothing to start
    # this generation's resolution, recorded in status: used without the other app (it may be gone)
    (BLUE, {"snapshot": "s1", "app": "blue", "resetNonce": "2", "location": "s3a://ckpt/shop/blue/snapshots/s1"},
     RestoreSource("blue", found=False), "s3a://ckpt/shop/blue/snapshots/s1", None),
    # ... but not one of another generation, nor a location this code could not have formed
    (BLUE, {"snapshot": "s1", "app": "blue", "resetNonce": "1", "location": "s3a://ckpt/shop/blue/snapshots/s1"},
     RestoreSource("blue", found=False), None, "not found"),
    (BLUE, {"snapshot": "s1", "app": "blue", "resetNonce": "2", "location": "s3a://other/x/../snapshots/s1"},
     FOUND, "s3a://ckpt/shop/blue/snapshots/s1", None),
    (BLUE, {"snapshot": "s1", "app": "blue", "resetNonce": "2", "location": "s3a://ckpt/secret"},
     FOUND, "s3a://ckpt/shop/blue/snapshots/s1", None),
])
def test_restore_from_is_resolved_to_a_location_our_code_forms(state, recorded, source, location, problem):
    app = make_app(state=state)
    found = resolve(app, recorded, source)
    assert found.location == location
    assert (problem in found.problem) if problem else found.problem is None
    if location:
        assert found.record is not None and found.record["location"] == location
    if not state:
        assert found == NO_RESTORE


def test_only_another_apps_unresolved_restore_is_read():
    assert other_app(make_app(state=BLUE), None) == "blue"
    assert other_app(make_app(state=OWN), None) is None
    assert other_app(make_app(), None) is None
    recorded = {"snapshot": "s1", "app": "blue", "resetNonce": "2", "location": "s3a://ckpt/shop/blue/snapshots/s1"}
    assert other_app(make_app(state=BLUE), recorded) is None


def _env(pod: dict) -> dict:
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}


def test_a_new_snapshot_nonce_is_patched_onto_the_running_driver_without_a_restart():
    obs = world({"state": {"snapshotNonce": "before-upgrade"}}, applied_overrides={})
    p = plan(obs, SETTINGS, Memory(), T0)
    assert p.driver is None and not p.status_first, "no restart"
    assert p.driver_patch["metadata"] == {"name": "orders-driver", "namespace": "shop", "uid": "pod-uid",
                                          "annotations": {names.ANN_SNAPSHOT: ask("before-upgrade")}}
    assert [e.reason for e in p.events] == ["SnapshotRequested"]
    assert [o["kind"] for o in p.patch] == ["ConfigMap"]  # the record of what the driver runs follows
    # once the pod carries it: nothing more
    asked = replace(obs, driver=replace(obs.driver, snapshot_ask=ask("before-upgrade")))
    assert plan(asked, SETTINGS, Memory(), T0).driver_patch is None


def test_a_snapshot_ask_and_a_rescale_in_place_go_in_one_patch():
    obs = world({"executors": 4, "state": {"snapshotNonce": "s1"}}, applied_overrides={"executors": 2})
    annotations = plan(obs, SETTINGS, Memory(), T0).driver_patch["metadata"]["annotations"]
    assert annotations[names.ANN_EXECUTORS] == "4" and annotations[names.ANN_SNAPSHOT] == ask("s1")


def test_a_new_driver_carries_the_ask_and_the_restore_location():
    p = plan(world({"state": {**OWN, **S3, "snapshots": {"every": "1h", "keep": 2}}}, pod="absent", children=False),
             SETTINGS, Memory(), T0)
    assert p.driver == "create"
    assert p.driver_pod["metadata"]["annotations"][names.ANN_SNAPSHOT] == ask(None, 3600, 2)
    assert _env(p.driver_pod)[contract.ENV_RESTORE_FROM] == "s3a://ckpt/shop/orders/snapshots/s1"
    assert p.status["state"]["restoreFrom"] == {"snapshot": "s1", "resetNonce": "2",
                                                "location": "s3a://ckpt/shop/orders/snapshots/s1"}
    plain = plan(world(pod="absent", children=False), SETTINGS, Memory(), T0).driver_pod
    assert names.ANN_SNAPSHOT not in plain["metadata"]["annotations"] and contract.ENV_RESTORE_FROM not in _env(plain)


@pytest.mark.parametrize("source, says", [
    (RestoreSource("blue", found=False), "StreamApp 'blue' not found"),
    (RestoreSource("blue", found=True), "keeps its checkpoint on a volume"),
])
def test_no_driver_starts_from_an_app_that_cannot_be_restored_from(source, says):
    obs = replace(world({"state": BLUE}, pod="absent", children=False), restore_source=source)
    p = plan(obs, SETTINGS, Memory(), T0)
    assert p.driver is None and p.driver_pod is None
    assert p.status["phase"] == "Pending" and p.status["reason"] == "RestoreSourceUnavailable"
    assert cond(p.status, "Ready") == ("False", "RestoreSourceUnavailable")
    assert "spec.state.restoreFrom.app" in p.status["message"] and says in p.status["message"]
    assert [(e.type, e.reason) for e in p.events] == [("Warning", "RestoreSourceUnavailable")]
    assert p.requeue is not None, "looked at again: the app may be created"
    # the next reconcile says it once only
    again = plan(replace(obs, status=p.status), SETTINGS, Memory(), T0 + timedelta(seconds=10))
    assert again.driver is None and [e.reason for e in again.events] == []
    # found: the driver starts, restoring from the other app's snapshot
    found = plan(replace(obs, restore_source=FOUND), SETTINGS, Memory(), T0)
    assert _env(found.driver_pod)[contract.ENV_RESTORE_FROM] == "s3a://ckpt/shop/blue/snapshots/s1"


def test_the_last_snapshot_reaches_status_once_with_its_event():
    obs = replace(world(), progress=Progress(snapshot=TAKEN))
    p = plan(obs, SETTINGS, Memory(), T0)
    assert p.status["state"]["lastSnapshot"] == LAST
    assert [e.reason for e in p.events] == ["SnapshotTaken"]
    again = plan(replace(obs, status=p.status), SETTINGS, Memory(), T0)
    assert again.status["state"]["lastSnapshot"] == LAST and again.events == ()
    # a restarted driver reports none yet: the last one stays
    gone = plan(replace(obs, status=p.status, progress=Progress(), driver=Driver(obs.driver.pod, 2, uid="new")),
                SETTINGS, Memory(), T0)
    assert gone.status["state"]["lastSnapshot"] == LAST
