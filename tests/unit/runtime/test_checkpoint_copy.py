"""The checkpoint's home (streamapp_runtime.checkpoint): which of Spark's files belong to a committed
batch, the runtime's record, a copy taken at each query's last committed batch while a newer batch
is half written, and its restore, on a local folder."""

from __future__ import annotations

import json
from dataclasses import replace
import uuid

import pytest

from streamapp_runtime.checkpoint import copying, layout, record
from streamapp_runtime.checkpoint.files import UnsupportedLocation

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name, version", [
    ("12", 12), ("12.delta", 12), ("3.snapshot", 3), ("4_1f0c.zip", 4), ("5.changelog", 5), (".2.crc", 2),
    ("metadata", None), ("a1b2.sst", None), ("_metadata", None),
])
def test_a_files_version_is_the_number_its_name_starts_with(name, version):
    assert layout.version_of(name) == version


def test_the_committed_batch_is_the_last_commit_and_its_state_version_the_next():
    assert layout.last_committed(["0", "1", "10", "2", ".10.crc"]) == 10
    assert layout.last_committed([]) is None
    assert layout.belongs_to("offsets", "3", 3) and not layout.belongs_to("offsets", "4", 3)
    assert layout.belongs_to("state", "4.delta", 3) and not layout.belongs_to("state", "5.delta", 3)
    assert layout.belongs_to("state", "x.sst", 3) and not layout.belongs_to("state", ".4.delta.tmp", 3)
    # a log file being written and its local checksum: neither has a version the copy could place
    assert not layout.belongs_to("offsets", ".2.47b79c11.tmp", 3)
    assert not layout.belongs_to("offsets", "..2.47b79c11-1e66-477e-830e-e80837c4f51d.tmp.crc", 3)


def _write(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _tree(root) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_a_copy_holds_each_query_at_its_last_committed_batch_and_nothing_newer(tmp_path):
    source, target = tmp_path / "gen-0", tmp_path / "snapshots" / "s1"
    _write(source, {
        "streamapp.json": '{"shufflePartitions": 4}\n', "_owner.json": '{"owner": "pod"}\n',
        "counts/metadata": "{}", "counts/sources/0/0": "v1\n{}",
        **{f"counts/offsets/{b}": f"offsets {b}" for b in range(4)},  # batch 3 is running
        **{f"counts/commits/{b}": f"commit {b}" for b in range(3)}, "counts/commits/.2.crc": "crc",
        "counts/state/0/0/2.delta": "d", "counts/state/0/0/3.delta": "d", "counts/state/0/0/4.delta": "running",
        "counts/state/0/0/3_ab.zip": "z", "counts/state/0/0/4_cd.zip": "running", "counts/state/0/0/SSTs/1-x.sst": "s",
        "counts/state/0/0/.4.delta.tmp": "half", "counts/state/0/_metadata/metadata": "m",
        "fresh/metadata": "{}", "fresh/offsets/0": "offsets 0", "fresh/sources/0/0": "v1\n{}",  # nothing committed yet
    })
    copied = copying.copy_committed(str(source), str(target))

    assert copied.batches == {"counts": 2, "fresh": None}
    assert _tree(target) == {
        "streamapp.json", copying.SNAPSHOT_FILE, "counts/metadata", "counts/sources/0/0",
        "counts/offsets/0", "counts/offsets/1", "counts/offsets/2",
        "counts/commits/0", "counts/commits/1", "counts/commits/2", "counts/commits/.2.crc",
        "counts/state/0/0/2.delta", "counts/state/0/0/3.delta", "counts/state/0/0/3_ab.zip",
        "counts/state/0/0/SSTs/1-x.sst", "counts/state/0/_metadata/metadata",
        "fresh/metadata", "fresh/sources/0/0",
    }
    assert copied.files == len(_tree(target)) - 1  # all but the snapshot marker, written last
    copied_bytes = sum(f.stat().st_size for f in target.rglob("*") if f.is_file() and f.name != copying.SNAPSHOT_FILE)
    marker = json.loads((target / copying.SNAPSHOT_FILE).read_text())
    assert marker == {"batches": {"counts": 2, "fresh": None}, "bytes": copied_bytes, "takenAt": copied.taken_at}
    assert copied.size_bytes == copied_bytes and copied.taken_at is not None
    assert copying.snapshot_record(str(target)) == replace(copied, files=0)  # as a later driver reads it back
    assert record.read_record(str(target)) == {"shufflePartitions": 4}
    assert (target / "counts/state/0/0/3_ab.zip").read_bytes() == b"z"

    with pytest.raises(ValueError, match="empty or new folder"):
        copying.copy_committed(str(source), str(target))


def test_a_file_purged_while_it_is_copied_fails_the_copy(tmp_path, monkeypatch):
    source = tmp_path / "gen-0"
    _write(source, {"q/commits/0": "c", "q/offsets/0": "o"})

    def gone(src: str, dst: str) -> None:
        raise FileNotFoundError(2, "No such file", src)

    monkeypatch.setattr(copying.files, "copy_file", gone)
    with pytest.raises(copying.CopyRaced, match="deleted while it was copied"):
        copying.copy_committed(str(source), str(tmp_path / "copy"))


def test_the_record_is_json_and_says_so_when_it_is_not(tmp_path):
    assert record.read_record(str(tmp_path)) == {}
    record.write_record(str(tmp_path), {"stateFunction": "transformWithState"})
    assert record.read_record(f"file://{tmp_path}") == {"stateFunction": "transformWithState"}
    (tmp_path / record.RECORD_FILE).write_text("{half")
    with pytest.raises(record.UnreadableRecord, match="streamapp.json: unreadable"):
        record.read_record(str(tmp_path))


def test_an_object_store_copy_needs_spark_and_says_so(monkeypatch):
    from streamapp_runtime import spark_compat

    # a whole test run may have started Spark in this process already: this is the process without it
    monkeypatch.setattr(spark_compat, "running_session", lambda: None)
    with pytest.raises(UnsupportedLocation, match="no SparkSession is running"):
        copying.files.copy_file("s3a://bucket/app/gen-0/q/metadata", "/tmp/x")


def test_a_restore_copies_a_complete_snapshot_into_an_empty_checkpoint_and_nothing_else(tmp_path):
    source, snapshot, target = tmp_path / "gen-0", tmp_path / "snap", tmp_path / "gen-1"
    _write(source, {"streamapp.json": "{}\n", "_owner.json": "{}", "q/metadata": '{"id":"first-run"}', "q/offsets/0": "o",
                    "q/offsets/1": "o", "q/commits/0": "c", "q/state/0/0/1.delta": "d", "q/state/0/0/2.delta": "running"})
    copying.copy_committed(str(source), str(snapshot))

    restored = copying.restore(str(snapshot), str(target))

    assert restored.batches == {"q": 0}
    # what a run resumes from; the snapshot's marker stays with the snapshot
    assert _tree(target) == {"streamapp.json", "q/metadata", "q/offsets/0", "q/commits/0", "q/state/0/0/1.delta"}
    assert restored.files == len(_tree(target))
    # a new query id: the sinks' ledgers must not skip the batches after the snapshot as written
    restored_id = json.loads((target / "q/metadata").read_text())["id"]
    assert restored_id != "first-run" and str(uuid.UUID(restored_id)) == restored_id
    with pytest.raises(copying.Refused, match=f"{target}: the checkpoint is not empty"):
        copying.restore(str(snapshot), str(target))


@pytest.mark.parametrize("marker, reason", [(None, "incomplete one"), ("{half", "unreadable")])
def test_a_snapshot_without_a_readable_marker_is_never_restored(tmp_path, marker, reason):
    snapshot = tmp_path / "snap"
    _write(snapshot, {"q/metadata": "{}", "q/commits/0": "c", **({copying.SNAPSHOT_FILE: marker} if marker else {})})
    with pytest.raises(copying.Refused, match=reason) as refused:
        copying.restore(str(snapshot), str(tmp_path / "gen-1"))
    assert str(snapshot) in str(refused.value)
    assert not (tmp_path / "gen-1").exists()
