"""``streamapp.json`` in the checkpoint root: what the runtime decided at the checkpoint's first run and
must keep deciding the same way (the shuffle partitions, the state function), and the app's name."""

from __future__ import annotations

import json

from streamapp_api.checkpoint import join

from streamapp_runtime.checkpoint import files

RECORD_FILE = "streamapp.json"


class UnreadableRecord(ValueError):
    """The record exists but is not JSON; the message names it."""


def read_record(root: str) -> dict:
    """The record of the checkpoint at ``root``; empty when it has none (a new checkpoint)."""
    location = join(root, RECORD_FILE)
    text = files.read_text(location)
    if text is None:
        return {}
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UnreadableRecord(f"{location}: unreadable ({exc}); it records the shuffle partitions and the state "
                               "function of this checkpoint") from exc


def write_record(root: str, data: dict) -> None:
    files.write_text(join(root, RECORD_FILE), json.dumps(data, indent=2, sort_keys=True) + "\n")
