"""The files the runtime reads and writes itself under a checkpoint root: its record (``record``), the
driver's owner marker (``fence``), the commit logs `streamapp state` and the dead-letter writer read,
and a copy of a committed batch (``copying``). Spark reaches the rest of the checkpoint on its own.
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
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    from streamapp_runtime import spark_compat

    # The active session is per thread (the JVM's), and a thread Spark or py4j started may have none
    # (the dead-letter writer runs on such a thread). The default session is the same one, the
    # runtime's only session.
    try:
        return SparkSession.active(), spark_compat
    except PySparkRuntimeError as exc:  # NO_ACTIVE_OR_DEFAULT_SESSION
        raise UnsupportedLocation(f"checkpoint {location!r}: an object-store location is read through Spark's "
                                  "Hadoop FileSystem, and no SparkSession is running") from exc


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
    """Delete a folder and everything under it; False when nothing was there."""
    if not is_local(location):
        spark, compat = _spark(location)
        return compat.fs_delete_tree(spark, location)
    path = local_path(location)
    if not os.path.exists(path):
        return False
    shutil.rmtree(path)
    return True


def is_folder(location: str) -> bool:
    """Whether the location is a folder (False when nothing is there)."""
    return os.path.isdir(_local_only(location, "listed as a tree"))


def copy_file(source: str, target: str) -> None:
    """Copy one file as it is (a state store's files are binary), making the target's folder.
    FileNotFoundError when the source is gone (Spark purged it meanwhile)."""
    target_path = _local_only(target, "copied")
    os.makedirs(os.path.dirname(target_path) or ".", exist_ok=True)
    shutil.copyfile(_local_only(source, "copied"), target_path)


def _local_only(location: str, what: str) -> str:
    # An object store is reached through Spark's Hadoop FileSystem (spark_compat), which has no
    # folder test or binary copy yet: until it has, a checkpoint there cannot be copied.
    if not is_local(location):
        raise UnsupportedLocation(f"checkpoint {location!r}: only a volume's checkpoint can be {what} for now")
    return local_path(location)


__all__ = ["UnsupportedLocation", "copy_file", "delete_tree", "is_folder", "is_local", "join", "local_path", "names", "read_text",
           "write_text"]
