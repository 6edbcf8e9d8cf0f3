"""Read back what the parquet and delta sinks wrote, without Spark: their logs replayed in plain
Python, the data files read with pyarrow. A table is read as its log says (Spark's _spark_metadata
for parquet, _delta_log for Delta), so a file a killed batch left behind but never committed is not
counted, as no reader of the log would count it.

``TableFiles`` reads a folder's files on a local path or on the test bed's S3 server.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote

import pyarrow.parquet as pq


def utc(value: datetime | str) -> datetime:
    """A timestamp as an aware UTC datetime: Spark writes INT96, which pyarrow reads without a zone, and a
    partition value is text in the session's zone (the runtime's is UTC)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.astimezone(timezone.utc) if value.tzinfo else value.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class TableFiles:
    """The files of one table: ``root`` a local folder, or s3a://bucket/prefix with ``store`` the
    test bed's ObjectStore."""

    root: str
    store: object | None = None

    def _split(self) -> tuple[str, str]:
        bucket, _, prefix = self.root.removeprefix("s3a://").partition("/")
        return bucket, prefix.strip("/")

    def names(self, folder: str) -> list[str]:
        """The file names directly in ``folder`` (relative to the root)."""
        if self.store is None:
            path = Path(self.root) / folder
            return sorted(p.name for p in path.iterdir() if p.is_file()) if path.is_dir() else []
        bucket, prefix = self._split()
        under = f"{prefix}/{folder}".strip("/")
        return sorted(k.removeprefix(under + "/") for k in self.store.objects(bucket, under)
                      if "/" not in k.removeprefix(under + "/"))

    def read(self, relative: str) -> bytes:
        if self.store is None:
            return (Path(self.root) / relative).read_bytes()
        bucket, prefix = self._split()
        return self.store.content(bucket, f"{prefix}/{relative}")

    def relative(self, uri: str) -> str:
        """A path as a log writes it (file:/..., s3a://...) relative to the root."""
        root = self.root if self.store is not None else Path(self.root).resolve().as_posix()
        path = unquote(uri).removeprefix("file:").removeprefix("//")
        if path.startswith(("/", "s3a:")):
            tail = path.split(root.rstrip("/").removeprefix("s3a://") + "/", 1)
            assert len(tail) == 2, f"{uri} is not under the table {self.root}"
            return tail[1]
        return path


def _partition_values(relative: str) -> dict[str, str]:
    """column=value folders of a data file's path (Spark escapes values as in a URI)."""
    return dict(unquote(part).split("=", 1) for part in relative.split("/")[:-1] if "=" in part)


def _rows(files: TableFiles, relative: str, partitions: dict[str, str]) -> list[dict]:
    table = pq.read_table(io.BytesIO(files.read(relative)))
    return [{**row, **partitions} for row in table.to_pylist()]


def _batch(name: str) -> int | None:
    head = name.split(".", 1)[0]
    return int(head) if head.isdigit() and name in (head, f"{head}.compact") else None


def parquet_rows(files: TableFiles) -> list[dict]:
    """Every row of a Spark file-sink folder, read through its _spark_metadata log (the newest compact
    file, then each batch after it); partition columns as strings, with the folder they came from."""
    logged = sorted((b, n) for n in files.names("_spark_metadata") if (b := _batch(n)) is not None)
    compact = max((b for b, n in logged if n.endswith(".compact")), default=-1)
    paths: dict[str, None] = {}
    for batch, name in logged:
        if batch < compact:
            continue
        lines = files.read(f"_spark_metadata/{name}").decode().splitlines()
        assert lines[0] == "v1", f"_spark_metadata/{name}: log version {lines[0]}"
        for entry in map(json.loads, lines[1:]):
            if entry["action"] == "add":
                paths[entry["path"]] = None
            else:
                paths.pop(entry["path"], None)
    rows = []
    for uri in paths:
        relative = files.relative(uri)
        rows += _rows(files, relative, _partition_values(relative))
    return rows


@dataclass(frozen=True)
class DeltaLog:
    """A Delta table as its JSON commits say: the live data files and every commit's app transaction."""

    files: dict[str, dict[str, str]]  # relative path -> partition values
    transactions: list[tuple[str, int]]  # (appId, version) of each commit that carried one
    operations: list[str]  # each commit's operation (STREAMING UPDATE, MERGE, WRITE)


def delta_log(files: TableFiles) -> DeltaLog:
    """Replay _delta_log/<version>.json from 0 (the sinks here never clean the log up)."""
    commits = sorted((int(n.split(".")[0]), n) for n in files.names("_delta_log")
                     if n.endswith(".json") and n.split(".")[0].isdigit())
    assert [v for v, _ in commits] == list(range(len(commits))), f"commits missing from the log: {commits}"
    live: dict[str, dict[str, str]] = {}
    transactions, operations = [], []
    for _, name in commits:
        for action in map(json.loads, files.read(f"_delta_log/{name}").decode().splitlines()):
            if "add" in action:
                # A deletion vector would hide rows of a file: this reader (and the sinks) use none.
                assert not action["add"].get("deletionVector"), f"{name}: a deletion vector"
                live[unquote(action["add"]["path"])] = action["add"].get("partitionValues") or {}
            elif "remove" in action:
                live.pop(unquote(action["remove"]["path"]), None)
            elif "txn" in action:
                transactions.append((action["txn"]["appId"], int(action["txn"]["version"])))
            elif "commitInfo" in action:
                operations.append(action["commitInfo"].get("operation", ""))
    return DeltaLog(live, transactions, operations)


def delta_rows(files: TableFiles) -> list[dict]:
    """Every row of the table's current version; partition columns as strings."""
    return [row for path, partitions in delta_log(files).files.items() for row in _rows(files, path, partitions)]
