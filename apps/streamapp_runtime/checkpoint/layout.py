"""What Spark keeps in one query's checkpoint folder, and which batch of it is committed. Pure.

- ``metadata``: the query's id; ``sources/<n>/0``: each source's initial offsets.
- ``offsets/<b>``: what batch ``b`` reads, written before it runs; ``commits/<b>``: written once its
  output and state are committed. The last batch with both is the committed one; a restart reads
  ``offsets/<b>`` and ``offsets/<b-1>`` and resumes after ``b``.
- ``state/<operator>/<partition>/``: state store versions, version ``b+1`` written by batch ``b``:
  ``<v>.delta`` and ``<v>.snapshot`` (HDFS-backed store); ``<v>.zip``, ``<v>.changelog`` and their
  ``<v>_<id>`` forms (RocksDB), which refer to shared ``SSTs/*.sst`` files. Operator and schema
  metadata (``_metadata/``, ``_stateSchema/``) are versioned by batch too.

Spark writes each file whole (a temporary file renamed, or one object-store upload) and never changes
it; it deletes only versions older than the last ``spark.sql.streaming.minBatchesToRetain`` batches.
"""

from __future__ import annotations

import re

SOURCES = "sources"
OFFSETS = "offsets"
COMMITS = "commits"
STATE = "state"
LOGS = (OFFSETS, COMMITS)

_VERSION = re.compile(r"^\.?(\d+)(?=$|[._])")  # 12, 12.delta, 12_<id>.zip, and a checksum's .12.crc


def version_of(name: str) -> int | None:
    """The batch or state version a file's name starts with; None for one that has none (an SST)."""
    match = _VERSION.match(name)
    return int(match.group(1)) if match else None


def is_temporary(name: str) -> bool:
    """A file Spark is still writing (renamed into place once whole), or the checksum Hadoop's local
    file system writes beside it (``..2.<uuid>.tmp.crc``)."""
    return name.endswith((".tmp", ".tmp.crc"))


def last_committed(commits: list[str]) -> int | None:
    """The last committed batch from the names in ``commits/``; None before the first commit."""
    done = [int(name) for name in commits if name.isdigit()]
    return max(done) if done else None


def belongs_to(folder: str, name: str, batch: int) -> bool:
    """Whether the file ``name`` in the query's top folder ``folder`` (offsets, commits, state, ...) is
    part of the checkpoint as of committed batch ``batch``: the logs up to it, the state versions up to
    the one it wrote (``batch + 1``), and every file that carries no version."""
    if is_temporary(name):
        return False
    version = version_of(name)
    if version is None:
        return True
    if folder in LOGS:
        return version <= batch
    return folder != STATE or version <= batch + 1
