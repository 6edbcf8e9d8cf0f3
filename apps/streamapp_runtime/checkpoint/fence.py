"""Never two drivers on one checkpoint: an owner marker in the checkpoint root.

The operator's fence is the driver pod's fixed name: the API server holds one pod of that name, so a
new driver exists only once the old pod is gone. That is not enough on its own: a pod force-deleted
from a partitioned node keeps running there, and with an object store (or a ReadWriteMany volume) no
detach stops it writing. So each driver also writes ``_owner.json`` (its id: the pod's UID, else
host:pid; and when it started) into the checkpoint root before its queries start, and reads it back
every few seconds while they run: a driver that finds another owner there stops its queries at once
and exits 1. The newest driver always wins: the operator starts a new one only once the old pod is
deleted, so the latest writer is the legitimate one.

A driver taking over from one that did not release the marker (killed, lost) lets ``takeover_wait``
(twice the check interval) pass between writing its marker and its first write to the checkpoint, so
that the old one, if it still runs and reaches the checkpoint, has seen the marker and stopped. When
another driver holds the marker, it is taken as early as the checkpoint can be reached (``claim``:
before Spark starts, for a local checkpoint) and the wait ends before the first write (``settle``),
so that the wait passes while the driver starts rather than after. A checkpoint nobody holds gets
its marker at ``settle``, after the app's checks: a refused app writes nothing. What remains: an old driver that cannot reach the
checkpoint cannot write to it either; one whose reads of the marker fail keeps running (see ``lost``),
as its writes to the checkpoint fail alike.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from streamapp_api import contract

from streamapp_runtime.checkpoint import files as checkpoint_files

log = logging.getLogger("streamapp.runtime")
OWNER_FILE = "_owner.json"


def owner_id(environ: dict[str, str]) -> str:
    """The pod's UID in a driver pod (the operator passes it), else this host and process."""
    return environ.get(contract.ENV_POD_UID) or f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class Fence:
    root: str
    owner: str
    interval: float = 5.0
    clock: Callable[[], float] = time.monotonic
    _last_check: float = field(default=0.0)
    _claimed: bool = field(default=False)
    _takeover_due: float | None = field(default=None)  # clock() when a predecessor has had its time

    @property
    def location(self) -> str:
        return checkpoint_files.join(self.root, OWNER_FILE)

    @property
    def takeover_wait(self) -> float:
        return 2 * self.interval

    def read(self) -> dict:
        text = checkpoint_files.read_text(self.location)
        try:
            return json.loads(text) if text else {}
        except ValueError:
            return {}

    def claim(self) -> None:
        """Write this driver's marker, once; a predecessor that did not release it gets ``takeover_wait``
        from now to see the takeover (``settle`` waits out what is left of it)."""
        if self._claimed:
            return
        before = self.read()
        self._write(released=False)
        self._claimed = True
        if self._another_holds(before):
            log.info("checkpoint %s was held by %s (not released): giving it %.0fs to see the takeover",
                     self.root, before.get("owner"), self.takeover_wait)
            self._takeover_due = self.clock() + self.takeover_wait
        self._last_check = self.clock()

    def held_by_another(self) -> bool:
        """Whether another driver's marker is there, not released: one that may still run, and whose
        time to stop is worth starting early (a checkpoint nobody holds is claimed when first written)."""
        return self._another_holds(self.read())

    def _another_holds(self, marker: dict) -> bool:
        return marker.get("owner") not in (None, self.owner) and not marker.get("released")

    def settle(self, sleep=time.sleep) -> None:
        """Claim if not yet; wait until a predecessor has had ``takeover_wait`` to stop; FencedOut when
        another driver took the checkpoint meanwhile."""
        self.claim()
        if self._takeover_due is not None:
            left = self._takeover_due - self.clock()
            if left > 0:
                sleep(left)
            self._takeover_due = None
            if self.read().get("owner") != self.owner:
                raise FencedOut(f"checkpoint {self.root} was taken over by {self.read().get('owner')} while starting")
        self._last_check = self.clock()

    def take(self, sleep=time.sleep) -> None:
        """Write this driver's marker (again: a restore deletes the checkpoint with it) and settle."""
        self._claimed = False
        self.settle(sleep)

    def lost(self) -> str | None:
        """Why this driver no longer owns the checkpoint (checked every ``interval``), else None."""
        if self.clock() - self._last_check < self.interval:
            return None
        self._last_check = self.clock()
        try:
            holder = self.read().get("owner")
        except Exception as exc:  # noqa: BLE001 - cannot tell: keep running; Spark's own writes fail alike
            log.warning("cannot read the checkpoint's owner marker %s: %s", self.location, exc)
            return None
        if holder != self.owner:
            return f"another driver ({holder}) owns checkpoint {self.root} now"
        return None

    def release(self) -> None:
        """On a clean stop: the next driver need not wait."""
        try:
            if self.read().get("owner") == self.owner:
                self._write(released=True)
        except Exception as exc:  # noqa: BLE001 - the next driver then waits takeover_wait
            log.warning("could not release the checkpoint's owner marker: %s", exc)

    def _write(self, released: bool) -> None:
        checkpoint_files.write_text(self.location, json.dumps({
            "owner": self.owner, "since": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "released": released}) + "\n")


class FencedOut(RuntimeError):
    """Another driver owns the checkpoint."""
