"""The files the runtime reads and writes itself under a checkpoint root: its record of the shuffle
partitions, the driver's owner marker (``fence``) and the commit log `streamapp state` reads. Spark
reaches the rest of the checkpoint on its own. Locations are strings, joined with
``streamapp_api.contract.join`` (never pathlib, which folds ``s3a://`` into ``s3a:/``).

A local path or ``file:`` URI is read with the os module; any other scheme (``s3a://``) through the
active SparkSession's Hadoop FileSystem (``spark_compat``), i.e. with the very settings and credentials
Spark uses for the checkpoint. That needs a session: a command that reads an object-store checkpoint
starts Spark first.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

from streamapp_api.contract import is_local, join


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

    # The active session is per thread (the JVM's), and a thread Spark or py4j started may have none:
    # the dead-letter writer, called from such a thread, once failed every try of a whole run on S3
    # (CI of 9a9febc). The default session is the same one, the runtime's only session.
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


__all__ = ["UnsupportedLocation", "is_local", "join", "local_path", "names", "read_text", "write_text"]
