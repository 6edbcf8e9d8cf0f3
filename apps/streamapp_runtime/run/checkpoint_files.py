"""The files the runtime reads and writes itself under a checkpoint root: its record of the shuffle
partitions, and the commit log `streamapp state` reads. Spark reaches the rest of the checkpoint on its
own. Locations are strings, joined with ``streamapp_api.contract.join`` (never pathlib, which folds
``s3a://`` into ``s3a:/``). Only local paths and ``file:`` URIs are read here so far: another scheme
is refused by name, so that an object-store checkpoint cannot be half supported by accident.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

from streamapp_api.contract import join


class UnsupportedLocation(ValueError):
    """A checkpoint location this module cannot read or write yet; the message names it."""


def local_path(location: str) -> str:
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return parsed.path if parsed.scheme else location
    raise UnsupportedLocation(f"checkpoint {location!r}: the runtime reads and writes only local paths and file: "
                              f"URIs itself so far, not {parsed.scheme}:")


def read_text(location: str) -> str | None:
    """The file's text, or None when there is none."""
    path = local_path(location)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read()


def write_text(location: str, text: str) -> None:
    """Replace the file at once (a reader never sees half of it)."""
    path = local_path(location)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def names(location: str) -> list[str]:
    """The entries of a folder (none when it does not exist)."""
    path = local_path(location)
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


__all__ = ["UnsupportedLocation", "join", "local_path", "names", "read_text", "write_text"]
