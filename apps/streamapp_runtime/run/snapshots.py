"""Snapshots taken by the running driver: a named one when the operator (or a local run's manifest)
asks with a new nonce, periodic ones, and the retention of those and of the operator's pre-change ones
(``snapshot_schedule`` decides what is due). A thread of its own looks every ``POLL_SECONDS``: it reads the ask (the driver pod's
``contract.ANN_SNAPSHOT`` through ``own_pod``, else the manifest), and when a snapshot is due copies
the generation's checkpoint, each query at its last committed batch (``checkpoint.copying``, as
``streamapp snapshot`` does; ``_snapshot.json`` last), to ``<base>/snapshots/<name>``. One at a time;
nothing is paused. The last snapshot is reported in the metrics (``contract.METRIC_SNAPSHOT_*``),
which the operator copies into status; a failure too, and it never stops the driver. So are all the
snapshots kept (``contract.METRIC_SNAPSHOT_KEPT*``): those found at the first look, read once, and
those taken since, less those retention deleted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from streamapp_api import contract
from streamapp_api.checkpoint import SNAPSHOTS, join, snapshot_location

from streamapp_runtime.checkpoint import files
from streamapp_runtime.checkpoint.copying import Copied, Refused, copy_committed, snapshot_record
from streamapp_runtime.run import own_pod, rescale
from streamapp_runtime.run.metrics import Metrics
from streamapp_runtime.run.poller import Poller
from streamapp_runtime.run.snapshot_schedule import (
    PERIODIC, Ask, Commits, Tries, ask_of_spec, due, expired, parse_ask, retained_time,
)

log = logging.getLogger("streamapp.runtime")

POLL_SECONDS = 5.0
REASON_LIMIT = 200  # characters of a failure's first line in its metric's label


class Snapshotter(Poller):
    """Takes the snapshots the ask makes due, from a thread of its own (``look`` once, for tests)."""

    thread_name = "streamapp-snapshots"

    def __init__(self, ask: Callable[[], Ask | None], root: str, base: str, commits: Callable[[], Commits],
                 metrics: Metrics, poll: float = POLL_SECONDS, every: float | None = None,
                 clock: Callable[[], float] = time.time):
        """``every``: seconds between periodic snapshots in place of the ask's (tests: the API's
        minimum is a minute)."""
        super().__init__(poll)
        self.ask, self.root, self.base, self.commits = ask, root, base, commits
        self.metrics, self.every, self.clock = metrics, every, clock
        self.started_at = clock()
        self.nonce: tuple[str, float] | None = None  # the nonce asked, and when this driver first saw it
        self.existing: dict[str, bool] | None = None  # snapshot name -> complete; read at the first look
        self.kept: dict[str, Copied] = {}  # the complete ones, with what their _snapshot.json records
        self.failed: dict[str, Tries] = {}

    def look(self) -> str | None:
        """Read the ask, take the snapshot due if any (and delete the periodic and pre-change ones beyond
        ``keep``): the name of the one it tried (taken or failed), else None. Never raises."""
        try:
            ask = self.ask()
        except (OSError, ValueError) as exc:  # the API out of reach, a bad annotation
            self._warn(f"cannot read the snapshot ask from the driver pod: {exc}")
            return None
        if ask is None and self.existing is not None:
            return None
        if ask is not None and self.every is not None and ask.every is not None:
            ask = Ask(ask.nonce, self.every, ask.keep)
        now = self.clock()
        if ask is not None and ask.nonce is not None and (self.nonce is None or self.nonce[0] != ask.nonce):
            self.nonce = (ask.nonce, now)
        try:
            if self.existing is None:
                self.existing = self._observe()
            if ask is None:
                return None
            complete = frozenset(name for name, done in self.existing.items() if done)
            name = due(ask, complete, now, self.commits(), self.nonce[1] if self.nonce else now,
                       self.started_at, self.failed)
        except Exception as exc:  # noqa: BLE001 - a store out of reach: look again at the next poll
            self._warn(f"cannot list the snapshots under {join(self.base, SNAPSHOTS)}: {first_line(exc)}")
            return None
        if name is None:
            return None
        if self._take(name, periodic=name != ask.nonce):
            self._retain(ask)
        return name

    def _observe(self) -> dict[str, bool]:
        """The app's snapshots, each with whether its copy finished (one read of each); the complete
        ones reported as kept."""
        folder = join(self.base, SNAPSHOTS)
        found = {name: _record(join(folder, name)) for name, is_folder in files.entries(folder) if is_folder}
        self.kept = {name: record for name, record in found.items() if record is not None}
        self._report_kept()
        return {name: record is not None for name, record in found.items()}

    def _report_kept(self) -> None:
        self.metrics.snapshots_kept({name: (record.taken_at or retained_time(name), record.size_bytes, record.batches)
                                     for name, record in self.kept.items()})

    def _take(self, name: str, periodic: bool) -> bool:
        location = snapshot_location(self.base, name)
        key = PERIODIC if periodic else name
        started = time.monotonic()
        try:
            if self.existing is not None and name in self.existing:  # an unfinished copy of that name
                files.delete_tree(location)
            self.existing = {**(self.existing or {}), name: False}
            copied = copy_committed(self.root, location, clock=self.clock)
        except Exception as exc:  # noqa: BLE001 - a store refusing, a file purged meanwhile: tried again later
            tries = self.failed.get(key)
            self.failed[key] = Tries((tries.count if tries else 0) + 1, self.clock())
            reason = first_line(exc)[:REASON_LIMIT]
            log.warning("snapshot %s failed (try %d): %s", name, self.failed[key].count, reason)
            self.metrics.snapshot_failed_at(name, reason, self.clock())
            return False
        elapsed = time.monotonic() - started
        self.existing[name] = True
        self.kept[name] = copied
        self.failed.pop(key, None)
        shown = {query: batch for query, batch in sorted(copied.batches.items())}
        size = copied.size_bytes or 0
        log.info("snapshot %s: %d queries at batches %s, %.1f MB in %.1f s -> %s",
                 name, len(shown), shown, size / 1e6, elapsed, location)
        self.metrics.snapshot_taken(name, location, copied.taken_at or self.clock(), size, copied.batches)
        self._report_kept()
        return True

    def _retain(self, ask: Ask) -> None:
        existing = self.existing or {}
        complete = [name for name, done in existing.items() if done]
        incomplete = [name for name, done in existing.items() if not done]
        for name in expired(complete, incomplete, ask.keep, keep_also=ask.nonce):
            try:
                files.delete_tree(snapshot_location(self.base, name))
            except Exception as exc:  # noqa: BLE001 - deleted at the next snapshot's retention then
                self._warn(f"cannot delete snapshot {name}: {first_line(exc)}")
                continue
            existing.pop(name, None)
            self.kept.pop(name, None)
            log.info("snapshot %s deleted (snapshots.keep %d)", name, ask.keep)
        self._report_kept()


def _record(location: str) -> Copied | None:
    """What a snapshot's _snapshot.json records (None: its copy did not finish)."""
    try:
        return snapshot_record(location)
    except Refused:
        return None


def first_line(exc: BaseException) -> str:
    """A failure in one line (a JVM error's first line, without its stack)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def for_driver(app, pod: own_pod.OwnPod | None, root: str, base: str, commits: Callable[[], Commits],
               metrics: Metrics) -> Snapshotter | None:
    """A started Snapshotter: following the ask on the driver pod (the rescaler's reading of it when
    fresh), or in a local run the manifest's (None when it asks for no snapshot)."""
    if pod is not None:
        log.info("snapshots: following %s on pod %s/%s", contract.ANN_SNAPSHOT, pod.namespace, pod.name)
        shared_age = rescale.POLL_SECONDS * 1.5
        return Snapshotter(lambda: parse_ask(pod.annotations(max_age=shared_age).get(contract.ANN_SNAPSHOT)), root,
                           base, commits, metrics).start()
    ask = ask_of_spec(app.spec.state)
    if ask is None:
        return None
    log.info("snapshots: %s under %s", _described(ask), join(base, SNAPSHOTS))
    return Snapshotter(lambda: ask, root, base, commits, metrics).start()


def _described(ask: Ask) -> str:
    parts = [f"{ask.nonce!r} after each query's next committed batch"] if ask.nonce else []
    if ask.every is not None:
        parts.append(f"one every {ask.every:.0f}s, the last {ask.keep} kept")
    return ", ".join(parts)
