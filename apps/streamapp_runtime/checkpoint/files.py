"""The files the runtime reads and writes itself under a checkpoint root: its record (``record``), the
driver's owner marker (``fence``), the commit logs `streamapp state` and the dead-letter writer read,
and a copy of a committed batch or a snapshot (``copying``). Spark reaches the rest of the checkpoint on its own.
Locations are strings, joined with ``streamapp_api.checkpoint.join`` (never pathlib, which folds
``s3a://`` into ``s3a:/``).

A local path or ``file:`` URI is read with the os module; any other scheme (``s3a://``) through the
active SparkSession's Hadoop FileSystem (``spark_compat``), i.e. with the very settings and credentials
Spark uses for the checkpoint. That needs a session: a command that reads an object-store checkpoint
starts Spark first.
"""

from __future__ import annotations

import os
import shutil
from urllib.parse import urlparse

from streamapp_api.checkpoint import is_local, join


class UnsupportedLocation(ValueError):
    """A checkpoint location this module cannot read or write now; the message names it."""


def local_path(location: str) -> str:
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return parsed.path if parsed.scheme else location
    raise UnsupportedLocation(f"checkpoint {location!r} is not a local path")


def _spark(location: str):
    from streamapp_runtime import spark_compat

    spark = spark_compat.running_session()  # the runtime's only session, whichever thread asks
    if spark is None:
        raise UnsupportedLocation(f"checkpoint {location!r}: an object-store location is read through Spark's "
                                  "Hadoop FileSystem, and no SparkSession is running")
    return spark, spark_compat


def read_text(location: str) -> str | None:
    """The file's text, or None when there is none."""
    if not is_local(location):
        spark, compat = _spark(location)
        return compat.fs_read_text(spark, location)
    path = local_path(location)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read()


def write_text(location: str, text: str) -> None:
    """Replace the file at once (a reader never sees half of it)."""
    if not is_local(location):
        spark, compat = _spark(location)
        compat.fs_write_text(spark, location, text)
        return
    path = local_path(location)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def names(location: str) -> list[str]:
    """The entries of a folder (none when it does not exist)."""
    if not is_local(location):
        spark, compat = _spark(location)
        return compat.fs_names(spark, location)
    path = local_path(location)
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def delete_tree(location: str) -> bool:
    """Delete a folder and everything under it, or a file; False when nothing was there."""
    if not is_local(location):
        spark, compat = _spark(location)
        return compat.fs_delete_tree(spark, location)
    path = local_path(location)
    if not os.path.exists(path):
        return False
    if os.path.isdir(path):
        shutil.rmtree(path)
    else:
        os.remove(path)
    return True


def tree_bytes(location: str) -> int:
    """The bytes of every file under a folder (0 when it does not exist)."""
    if not is_local(location):
        spark, compat = _spark(location)
        return compat.fs_tree_bytes(spark, location)
    total = 0
    for folder, _, found in os.walk(local_path(location)):
        total += sum(os.path.getsize(os.path.join(folder, name)) for name in found)
    return total


def entries(location: str) -> list[tuple[str, bool]]:
    """The entries of a folder, each with whether it is a folder (none when it does not exist)."""
    if not is_local(location):
        spark, compat = _spark(location)
        return compat.fs_entries(spark, location)
    path = local_path(location)
    if not os.path.isdir(path):
        return []
    with os.scandir(path) as found:
        return sorted((entry.name, entry.is_dir()) for entry in found)


def copy_file(source: str, target: str) -> None:
    """Copy one file as it is (a state store's files are binary), making the target's folder; between
    a volume and an object store either way too. FileNotFoundError when the source is gone (Spark
    purged it meanwhile)."""
    source_path = local_path(source) if is_local(source) else source
    target_path = local_path(target) if is_local(target) else target
    if is_local(source) and not os.path.exists(source_path):
        raise FileNotFoundError(2, "No such file", source)
    if is_local(target):
        os.makedirs(os.path.dirname(target_path) or ".", exist_ok=True)
        if is_local(source):
            shutil.copyfile(source_path, target_path)
            return
    spark, compat = _spark(target if is_local(source) else source)
    compat.fs_copy_file(spark, source_path, target_path)


__all__ = ["UnsupportedLocation", "copy_file", "delete_tree", "entries", "is_local", "join", "local_path", "names", "read_text",
           "tree_bytes", "write_text"]
