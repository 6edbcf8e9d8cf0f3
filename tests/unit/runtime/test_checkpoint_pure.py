"""Pure parts of checkpoint handling in the runtime: where the root is (a path or an s3a:// URI, joined as
a string, never through pathlib), and the owner marker that fences out an older driver (checkpoint/fence.py),
here on a local folder; tests/runtime/test_restart.py runs the same fence between two real drivers on S3."""

from __future__ import annotations

import json

import pytest

from streamapp_api import checkpoint, contract
from streamapp_runtime.checkpoint import fence
from streamapp_runtime.checkpoint import files as checkpoint_files
from streamapp_runtime.run import settings

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("base, nonce, root", [
    ("s3a://ckpt/apps/ns/app", None, "s3a://ckpt/apps/ns/app/gen-0"),
    ("s3a://ckpt/apps/ns/app/", "r1", "s3a://ckpt/apps/ns/app/gen-r1"),
    ("s3a://ckpt", None, "s3a://ckpt/gen-0"),
    ("/checkpoint", "2", "/checkpoint/gen-2"),
    ("file:///data/app", None, "file:///data/app/gen-0"),
])
def test_the_root_of_a_state_generation_keeps_the_scheme(base, nonce, root):
    assert checkpoint.checkpoint_root(base, nonce) == root
    assert checkpoint.query_checkpoint(root, "sessions") == f"{root}/sessions"
    assert fence.Fence(root, "me").location == f"{root}/_owner.json"


@pytest.mark.parametrize("location, local", [
    ("/checkpoint/gen-0", True), ("relative/dir", True), ("file:///checkpoint", True),
    ("s3a://ckpt/app", False), ("hdfs://nn/app", False),
])
def test_local_locations_are_paths_and_file_uris(location, local):
    assert checkpoint.is_local(location) is local


def test_the_runtime_finds_its_root_flag_first_then_the_pod_then_the_apps_location(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pod = {contract.ENV_CHECKPOINT_DIR: "/checkpoint/gen-0"}
    assert settings.checkpoint_root("/mine", pod, "app", "s3a://ckpt/app", "1") == "/mine"
    assert settings.checkpoint_root(None, pod, "app", "s3a://ckpt/app", "1") == "/checkpoint/gen-0"
    assert settings.checkpoint_root(None, {}, "app", "s3a://ckpt/app", "1") == "s3a://ckpt/app/gen-1"
    assert settings.checkpoint_root(None, {}, "app") == str(tmp_path / ".streamapp" / "checkpoints" / "app")


def test_an_object_store_location_is_never_read_as_a_path():
    with pytest.raises(checkpoint_files.UnsupportedLocation, match="not a local path"):
        checkpoint_files.local_path("s3a://ckpt/app/gen-0/streamapp.json")
    assert checkpoint_files.local_path("file:///ckpt/x.json") == "/ckpt/x.json"
    with pytest.raises(ValueError, match="one path segment"):
        checkpoint.join("s3a://ckpt/app", "a/b")


def test_the_owner_is_the_pods_uid_else_host_and_process():
    assert fence.owner_id({contract.ENV_POD_UID: "0b5c-uid"}) == "0b5c-uid"
    assert fence.owner_id({}).rsplit(":", 1)[1].isdigit()


def _marker(root) -> dict:
    return json.loads((root / fence.OWNER_FILE).read_text())


def test_a_first_driver_takes_the_checkpoint_without_waiting_and_releases_it(tmp_path):
    waits: list[float] = []
    first = fence.Fence(str(tmp_path), "a", interval=0)
    first.take(sleep=waits.append)
    assert waits == [] and _marker(tmp_path)["owner"] == "a" and not _marker(tmp_path)["released"]
    assert first.lost() is None
    first.release()
    assert _marker(tmp_path)["released"]

    second = fence.Fence(str(tmp_path), "b", interval=0)
    second.take(sleep=waits.append)
    assert waits == [], "a released checkpoint is taken at once"


def test_a_successor_waits_for_an_unreleased_owner_which_then_finds_itself_fenced_out(tmp_path):
    old = fence.Fence(str(tmp_path), "old", interval=0)
    old.take()
    waits: list[float] = []
    new = fence.Fence(str(tmp_path), "new", interval=5)
    new.take(sleep=waits.append)  # the old one was killed or lost: it never released
    assert waits == [pytest.approx(10, abs=1)] and _marker(tmp_path)["owner"] == "new"
    assert old.lost() == f"another driver (new) owns checkpoint {tmp_path} now"
    old.release()
    assert (_marker(tmp_path)["owner"], _marker(tmp_path)["released"]) == ("new", False), "only the owner releases"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_successors_wait_counts_from_its_claim_so_it_passes_while_the_driver_starts(tmp_path):
    fence.Fence(str(tmp_path), "killed").take()
    clock, waits = FakeClock(), []
    new = fence.Fence(str(tmp_path), "new", interval=5, clock=clock)
    new.claim()  # before Spark starts
    assert _marker(tmp_path)["owner"] == "new", "the old driver can see the takeover from now on"
    clock.now += 7  # Spark starting, the expressions checked
    new.settle(sleep=lambda s: (waits.append(s), clock.sleep(s)))
    assert waits == [3], "only what is left of the 10s"
    new.settle(sleep=waits.append)
    new.claim()
    assert waits == [3], "claimed and settled once"
    late = fence.Fence(str(tmp_path), "late", interval=5, clock=clock)
    late.claim()
    clock.now += 30  # a slow start: the predecessor has had its time
    late.settle(sleep=waits.append)
    assert waits == [3]


def test_only_a_checkpoint_another_driver_holds_is_worth_claiming_early(tmp_path):
    mine = fence.Fence(str(tmp_path), "me")
    assert not mine.held_by_another(), "nobody's: claimed when first written, after the app's checks"
    fence.Fence(str(tmp_path), "killed").take()
    assert mine.held_by_another()
    released = fence.Fence(str(tmp_path), "stopped")
    released.take(sleep=lambda _: None)
    released.release()
    assert not mine.held_by_another(), "a clean stop released it: no wait to overlap"


def test_a_driver_taken_over_while_it_waits_does_not_start(tmp_path):
    fence.Fence(str(tmp_path), "old").take()
    newer = fence.Fence(str(tmp_path), "newer")
    starting = fence.Fence(str(tmp_path), "starting")
    with pytest.raises(fence.FencedOut, match="taken over by newer"):
        starting.take(sleep=lambda _: newer.take(sleep=lambda _: None))


def test_ownership_is_checked_once_an_interval(tmp_path):
    mine = fence.Fence(str(tmp_path), "me", interval=3600)
    mine.take()
    fence.Fence(str(tmp_path), "other").take(sleep=lambda _: None)
    assert mine.lost() is None, "read again only after the interval"
    mine.interval = 0
    assert "another driver (other)" in mine.lost()


def test_a_marker_that_cannot_be_read_keeps_the_driver_running_one_not_naming_it_stops_it(tmp_path):
    mine = fence.Fence(str(tmp_path), "me", interval=0)
    mine.take()
    marker = tmp_path / fence.OWNER_FILE
    marker.unlink()
    marker.mkdir()  # reading fails (as an unreachable store would): Spark's own writes fail alike
    assert mine.lost() is None
    marker.rmdir()
    marker.write_text("{half")
    assert mine.read() == {} and "another driver (None)" in mine.lost()
