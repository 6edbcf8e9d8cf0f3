"""The driver's snapshot thread, one look at a time, and its restore of a new generation at start, on
checkpoints in local folders as Spark leaves them (no Spark needed to copy one): what it takes,
reports, retries, deletes and restores."""

from __future__ import annotations

import json

import pytest
from prometheus_client import generate_latest

from streamapp_api import contract

from streamapp_runtime.run.metrics import Metrics
from streamapp_runtime.run.snapshot_schedule import MAX_TRIES, Ask, Commits
from streamapp_runtime.run.snapshots import Snapshotter

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def committed_batches(root, batches: int) -> None:
    """A query checkpoint ``counts`` with ``batches`` committed batches, as Spark writes it."""
    (root / "counts" / "offsets").mkdir(parents=True, exist_ok=True)
    (root / "counts" / "commits").mkdir(parents=True, exist_ok=True)
    (root / "counts" / "metadata").write_text('{"id": "q"}')
    (root / "streamapp.json").write_text('{"shufflePartitions": 2}\n')
    for b in range(batches):
        (root / "counts" / "offsets" / str(b)).write_text(f"offsets {b}")
        (root / "counts" / "commits" / str(b)).write_text(f"commit {b}")


def series(metrics: Metrics, name: str) -> list[str]:
    return [line for line in generate_latest(metrics.registry).decode().splitlines() if line.startswith(name + "{")]


def test_a_nonce_then_periodic_snapshots_the_oldest_beyond_keep_deleted(tmp_path):
    root, base = tmp_path / "gen-0", tmp_path
    committed_batches(root, 3)
    clock, commit = Clock(1_800_000_000.0), {"at": None}
    metrics = Metrics("clicks", {}, {})
    ask = Ask(nonce="before-upgrade", every=3600.0, keep=2)
    snapshotter = Snapshotter(lambda: ask, str(root), str(base), lambda: Commits(commit["at"], commit["at"]), metrics, clock=clock)

    assert snapshotter.look() is None  # no batch committed since the nonce was seen
    commit["at"] = clock.now = clock.now + 5
    assert snapshotter.look() == "before-upgrade"
    taken = json.loads((base / "snapshots" / "before-upgrade" / "_snapshot.json").read_text())
    assert taken["batches"] == {"counts": 2} and taken["takenAt"] == clock.now
    assert series(metrics, contract.METRIC_SNAPSHOT_BATCH) == [
        f'{contract.METRIC_SNAPSHOT_BATCH}{{app="clicks",query="counts",snapshot="before-upgrade"}} 2.0']
    assert snapshotter.look() is None  # taken: not again

    periodic = []
    for hour in range(1, 5):
        committed_batches(root, 3 + hour)
        commit["at"] = clock.now = 1_800_000_000.0 + 3600 * hour + 10
        periodic.append(snapshotter.look())
    assert all(name and name.startswith("every-") for name in periodic)
    assert sorted(p.name for p in (base / "snapshots").iterdir()) == sorted(["before-upgrade", *periodic[-2:]])
    newest_bytes = float(sum(f.stat().st_size for f in (base / "snapshots" / periodic[-1]).rglob("*")
                             if f.is_file() and f.name != "_snapshot.json"))
    assert series(metrics, contract.METRIC_SNAPSHOT_BYTES) == [
        f'{contract.METRIC_SNAPSHOT_BYTES}{{app="clicks",snapshot="{periodic[-1]}"}} {newest_bytes}']
    # every snapshot kept, and only those: the nonce's and the newest two periodic ones
    kept = {line.split('snapshot="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
            for line in series(metrics, contract.METRIC_SNAPSHOT_KEPT)}
    assert kept == {"before-upgrade": 1_800_000_005.0, periodic[-2]: 1_800_000_000.0 + 3 * 3600 + 10,
                    periodic[-1]: clock.now}
    assert f'{contract.METRIC_SNAPSHOT_KEPT_BYTES}{{app="clicks",snapshot="{periodic[-1]}"}} {newest_bytes}' \
        in series(metrics, contract.METRIC_SNAPSHOT_KEPT_BYTES)
    assert f'{contract.METRIC_SNAPSHOT_KEPT_BATCH}{{app="clicks",query="counts",snapshot="before-upgrade"}} 2.0' \
        in series(metrics, contract.METRIC_SNAPSHOT_KEPT_BATCH)

    # a restarted driver: the nonce is there, complete; the schedule goes on from the newest; it reports
    # the snapshots it finds as kept, with what their _snapshot.json records, before any is asked of it
    fresh = Metrics("clicks", {}, {})
    idle = Snapshotter(lambda: None, str(root), str(base), lambda: Commits(None, None), fresh, clock=clock)
    assert idle.look() is None
    assert series(fresh, contract.METRIC_SNAPSHOT_KEPT) == series(metrics, contract.METRIC_SNAPSHOT_KEPT)
    assert series(fresh, contract.METRIC_SNAPSHOT_KEPT_BATCH) == series(metrics, contract.METRIC_SNAPSHOT_KEPT_BATCH)
    again = Snapshotter(lambda: ask, str(root), str(base), lambda: Commits(commit["at"], commit["at"]), metrics, clock=clock)
    commit["at"] = clock.now = clock.now + 60
    assert again.look() is None


def test_a_failure_is_reported_retried_after_the_next_commit_then_given_up(tmp_path):
    root, base = tmp_path / "gen-0", tmp_path
    committed_batches(root, 1)
    (base / "snapshots").write_text("not a folder")  # every copy under it fails
    clock, commit = Clock(1_800_000_000.0), {"at": 1_800_000_001.0}
    metrics = Metrics("clicks", {}, {})
    snapshotter = Snapshotter(lambda: Ask(nonce="n1"), str(root), str(base), lambda: Commits(commit["at"], commit["at"]), metrics,
                              clock=clock)

    tried = 0
    for second in range(2, 12):
        clock.now = 1_800_000_000.0 + second
        if snapshotter.look():
            tried += 1
        assert snapshotter.look() is None  # no commit since the failure: not again yet
        commit["at"] = clock.now
    assert tried == MAX_TRIES
    [failed] = series(metrics, contract.METRIC_SNAPSHOT_FAILED)
    assert failed.startswith(f'{contract.METRIC_SNAPSHOT_FAILED}{{app="clicks",reason="') and 'snapshot="n1"' in failed

    (base / "snapshots").unlink()  # the store is back: a new nonce is taken, and the failure's series is gone
    later = Snapshotter(lambda: Ask(nonce="n1"), str(root), str(base), lambda: Commits(commit["at"], commit["at"]), metrics, clock=clock)
    clock.now += 1
    assert later.look() is None  # this driver saw the nonce now: it waits for a commit
    commit["at"] = clock.now = clock.now + 1
    assert later.look() == "n1"
    assert (base / "snapshots" / "n1" / "_snapshot.json").exists()
    assert series(metrics, contract.METRIC_SNAPSHOT_FAILED) == []


def manifest(restore_from: dict | None):
    from streamapp_api import load
    from streamapp_testkit.manifests import click_sessions_manifest

    doc = click_sessions_manifest("clicks", "summaries", "sessions", name="clicks")
    doc["spec"]["sinks"][0]["name"] = "counts"  # the query of the checkpoints made here: a restore finds it so
    if restore_from is not None:
        doc["spec"]["state"]["restoreFrom"] = restore_from
    return load(doc)


def test_a_new_generation_is_restored_once_and_a_half_restored_one_again(tmp_path):
    from streamapp_runtime.checkpoint.copying import copy_committed
    from streamapp_runtime.checkpoint.fence import Fence
    from streamapp_runtime.run import restoring

    base = tmp_path
    committed_batches(base / "gen-0", 4)
    copy_committed(str(base / "gen-0"), str(base / "snapshots" / "s1"))
    the_app, root = manifest({"snapshot": "s1"}), base / "gen-1"
    fence = Fence(str(root), "driver-1")
    fence.take()

    restoring.at_start(the_app, str(root), str(base), {}, fence)
    assert sorted(p.name for p in root.iterdir()) == ["_owner.json", contract.RESTORED_FILE, "counts", "streamapp.json"]
    assert sorted(p.name for p in (root / "counts" / "commits").iterdir()) == ["0", "1", "2", "3"]
    assert json.loads((root / contract.RESTORED_FILE).read_text()) == {"from": f"{base}/snapshots/s1", "id": None}

    (root / "counts" / "commits" / "4").write_text("commit 4")  # it ran on: a second start leaves it
    restoring.at_start(the_app, str(root), str(base), {}, fence)
    assert (root / "counts" / "commits" / "4").exists()

    (root / restoring.RESTORING_FILE).write_text("{}")  # a restore cut short: done again, whole
    restoring.at_start(the_app, str(root), str(base), {}, fence)
    assert not (root / "counts" / "commits" / "4").exists() and not (root / restoring.RESTORING_FILE).exists()
    assert fence.read()["owner"] == "driver-1"

    empty, second = base / "gen-2", Fence(str(base / "gen-2"), "driver-2")
    second.take()
    with pytest.raises(restoring.RestoreRefused, match=rf"^spec\.state\.restoreFrom: {base}/snapshots/s2: no snapshot there$"):
        restoring.at_start(manifest({"snapshot": "s2"}), str(empty), str(base), {}, second)
    (base / "snapshots" / "s3" / "counts").mkdir(parents=True)  # a copy that did not finish
    with pytest.raises(restoring.RestoreRefused, match=rf"^spec\.state\.restoreFrom: {base}/snapshots/s3: no _snapshot.json"):
        restoring.at_start(manifest({"snapshot": "s3"}), str(empty), str(base), {}, second)
    assert sorted(p.name for p in empty.iterdir()) == ["_owner.json"]  # nothing restored


def test_a_rollback_replaces_the_generations_checkpoint_once_per_restore_id(tmp_path, caplog):
    from streamapp_runtime.checkpoint.copying import copy_committed, snapshot_batches
    from streamapp_runtime.checkpoint.fence import Fence
    from streamapp_runtime.run import restoring

    base, root = tmp_path, tmp_path / "gen-0"
    committed_batches(root, 3)
    pre = str(base / "snapshots" / "pre-7-20261127-060000")
    copy_committed(str(root), pre)
    committed_batches(root, 6)  # the failed version ran on
    fence = Fence(str(root), "driver-1")
    fence.take()
    rollback = {contract.ENV_RESTORE_FROM: pre, contract.ENV_RESTORE_ID: "rollback-7"}
    no_restore_from = manifest(None)  # the operator names the snapshot in the environment

    restoring.at_start(no_restore_from, str(root), str(base), rollback, fence)
    assert sorted(p.name for p in (root / "counts" / "commits").iterdir()) == ["0", "1", "2"]
    assert json.loads((root / contract.RESTORED_FILE).read_text()) == {"from": pre, "id": "rollback-7"}
    assert fence.read()["owner"] == "driver-1"
    assert any(r.getMessage() == f"restore id rollback-7: replacing checkpoint {root} with snapshot {pre}"
               for r in caplog.records)

    (root / "counts" / "commits" / "3").write_text("commit 3")  # the rolled-back app ran on: a restart keeps it
    restoring.at_start(no_restore_from, str(root), str(base), rollback, fence)
    assert (root / "counts" / "commits" / "3").exists()

    # a snapshot of it holds no restore record: a restore from one writes its own
    copy_committed(str(root), str(base / "snapshots" / "later"))
    assert not (base / "snapshots" / "later" / contract.RESTORED_FILE).exists()
    assert snapshot_batches(str(base / "snapshots" / "later")) == {"counts": 3}

    # another rollback (another id) replaces it again; a missing snapshot leaves it as it is
    with pytest.raises(restoring.RestoreRefused, match="no snapshot there"):
        restoring.at_start(no_restore_from, str(root), str(base),
                           {**rollback, contract.ENV_RESTORE_FROM: str(base / "snapshots" / "gone"),
                            contract.ENV_RESTORE_ID: "rollback-8"}, fence)
    assert (root / "counts" / "commits" / "3").exists()
    restoring.at_start(no_restore_from, str(root), str(base), {**rollback, contract.ENV_RESTORE_ID: "rollback-8"}, fence)
    assert not (root / "counts" / "commits" / "3").exists()
    assert json.loads((root / contract.RESTORED_FILE).read_text())["id"] == "rollback-8"


def test_a_refused_restore_is_the_drivers_last_word_as_a_refusal():
    from streamapp_runtime.run import restoring, termination

    said = termination.refused([restoring.RestoreRefused("spec.state.restoreFrom: s3a://b/a/snapshots/s1: no snapshot there")])
    assert said == f"{contract.REFUSED_REASON}: spec.state.restoreFrom: s3a://b/a/snapshots/s1: no snapshot there"
