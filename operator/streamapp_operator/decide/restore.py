"""Where a new state generation starts from: spec.state.restoreFrom resolved to a location. Pure.

The spec names a snapshot, never a location: the location is formed here, under the base of the app
that took the snapshot. This app's own: its object-store location, else its volume's mount in the
driver. Another StreamApp's of the same namespace (restoreFrom.app, the blue/green path): its
object-store location; a volume of another app cannot be mounted in this app's driver, so such an app,
or one that does not exist, keeps the driver from starting, and status says why. The restoring driver
reads the other app's object store with this app's S3 settings and credentials.

What it resolved to is recorded in status.state.restoreFrom with the generation it is for: a later
driver of the same generation (after a failure, say) gets the same location without the other app
being read again, which may be gone by then (the blue/green recipe deletes it). The runtime restores
only into a generation that is still empty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from streamapp_api import StreamApp, contract
from streamapp_api.checkpoint import S3_LOCATION_PATTERN, SNAPSHOTS, snapshot_location
from streamapp_api.spec import RestoreFrom

from .world import RestoreSource

REASON = "RestoreSourceUnavailable"


@dataclass(frozen=True)
class Restore:
    location: str | None = None  # the driver's ENV_RESTORE_FROM (None: none)
    record: dict[str, Any] | None = None  # status.state.restoreFrom
    problem: str | None = None  # why no driver may start: restoreFrom.app names no app to restore from
    restore_id: str | None = None  # the driver's ENV_RESTORE_ID: a rollback replaces its generation's checkpoint


NO_RESTORE = Restore()


def _key(app: StreamApp, wanted: RestoreFrom) -> dict[str, Any]:
    key: dict[str, Any] = {"snapshot": wanted.snapshot}
    if wanted.app is not None and wanted.app != app.metadata.name:
        key["app"] = wanted.app
    if app.spec.state.reset_nonce is not None:
        key["resetNonce"] = app.spec.state.reset_nonce
    return key


def _well_formed(location: object, snapshot: str) -> bool:
    """A location this module could have formed for ``snapshot`` (status is the operator's, but is read
    back as untrusted input)."""
    if not isinstance(location, str) or not location.endswith(f"/{SNAPSHOTS}/{snapshot}"):
        return False
    if ".." in location.split("/") or any(c.isspace() for c in location):
        return False
    return bool(re.match(S3_LOCATION_PATTERN, location)) or location.startswith(contract.CHECKPOINT_MOUNT + "/")


def _recorded(app: StreamApp, wanted: RestoreFrom, recorded: object) -> dict[str, Any] | None:
    """status.state.restoreFrom when it is this generation's resolution of this restoreFrom."""
    if not isinstance(recorded, dict):
        return None
    key = _key(app, wanted)
    if {k: v for k, v in recorded.items() if k != "location"} != key:
        return None
    return recorded if _well_formed(recorded.get("location"), key["snapshot"]) else None


def other_app(app: StreamApp, recorded: object) -> str | None:
    """The app to read before a driver starts: another app's snapshot, not resolved for this generation yet."""
    wanted = app.spec.state.restore_from
    if wanted is None or wanted.app is None or wanted.app == app.metadata.name or _recorded(app, wanted, recorded):
        return None
    return wanted.app


def resolve(app: StreamApp, recorded: object, source: RestoreSource | None) -> Restore:
    """``recorded``: status.state.restoreFrom as it is; ``source``: the other app as read (None: not read,
    as while a driver runs)."""
    wanted = app.spec.state.restore_from
    if wanted is None:
        return NO_RESTORE
    kept = _recorded(app, wanted, recorded)
    if kept is not None:
        return Restore(kept["location"], kept)
    key = _key(app, wanted)
    if "app" not in key:
        checkpoint = app.spec.state.checkpoint
        return _at(key, snapshot_location(checkpoint.location or contract.CHECKPOINT_MOUNT, wanted.snapshot))
    if source is None or source.app != key["app"]:
        return NO_RESTORE
    where = f"spec.state.restoreFrom.app: StreamApp {source.app!r}"
    if not source.found:
        return Restore(problem=f"{where} not found in this namespace: the driver is not started until it exists "
                               "(restoreFrom names an app of the same namespace)")
    if source.invalid:
        return Restore(problem=f"{where} is invalid (its status says why), so where its snapshots are is not known: "
                               "the driver is not started until it is valid")
    if source.location is None or not re.match(S3_LOCATION_PATTERN, source.location):
        return Restore(problem=f"{where} keeps its checkpoint on a volume, which this app's driver cannot mount: "
                               "restore from an app whose checkpoint is in an object store "
                               "(spec.state.checkpoint.location), or from a snapshot of this app")
    return _at(key, snapshot_location(source.location, wanted.snapshot))


def _at(key: dict[str, Any], location: str) -> Restore:
    return Restore(location, {**key, "location": location})
