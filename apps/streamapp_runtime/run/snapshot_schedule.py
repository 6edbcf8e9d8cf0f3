"""Which snapshot a running driver takes next, and which periodic ones it deletes. Pure.

The ask comes from the operator (the driver pod's ``contract.ANN_SNAPSHOT``, JSON) or, in a local run,
from the manifest (``spec.state.snapshotNonce`` and ``snapshots``):

- a nonce the app has no complete snapshot of is taken once every query committed a batch after the
  nonce was seen (or after ``IDLE_WAIT`` without: an idle query's last committed batch is its state
  now). The operator's ask before a change that restarts the driver (``checkpoint.pre_change_snapshot_name``)
  is taken at once, at the last committed batch: the operator holds the change back until it is, and a
  restore of it replays what came after from the source anyway. A driver that restarts finds the
  snapshot there and does not take it again;
- ``every``: a periodic snapshot after the first batch committed ``every`` seconds after the newest
  periodic one (after the driver's start when there is none: a restart keeps the schedule);
- a snapshot that failed is tried again after the next committed batch, ``MAX_TRIES`` times in all:
  then a nonce is given up (until a new one), the periodic ones wait a whole ``every``;
- after each, the periodic snapshots and those the operator asks for before a change that restarts
  the driver (``checkpoint.pre_change_snapshot_name``) beyond ``keep`` are deleted, oldest first by
  the time their names hold; never the newest pre-change one (a rollback restores it), nor a nonce
  named otherwise.
"""

from __future__ import annotations

import calendar
import json
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from streamapp_api.base import NAME_PATTERN
from streamapp_api.checkpoint import periodic_snapshot_name
from streamapp_api.durations import parse_duration
from streamapp_api.spec import SNAPSHOT_EVERY_MIN_SECONDS

MAX_TRIES = 3
IDLE_WAIT = 60.0  # seconds an asked nonce waits for a commit before the last committed batch is taken
PERIODIC = "every"  # the key of the periodic snapshots' failures (each has a name of its own)
_PERIODIC_NAME = re.compile(r"^every-(\d{8}-\d{6})$")
_PRE_CHANGE_NAME = re.compile(r"^pre-\d+-(\d{8}-\d{6})$")
_NAME = re.compile(NAME_PATTERN)


@dataclass(frozen=True)
class Ask:
    """What the driver is asked for: a named snapshot, periodic ones and how many of those to keep."""

    nonce: str | None = None
    every: float | None = None  # seconds
    keep: int = 3


@dataclass(frozen=True)
class Commits:
    """When the app's queries last committed a batch."""

    newest: float | None = None  # any query's last commit (None: none since the driver started)
    every_query: float | None = None  # the oldest of each query's last commit (None: one has committed none)

    @staticmethod
    def of(last: Mapping[str, float], queries: Iterable[str]) -> Commits:
        """From each query's last commit time."""
        times = [last.get(query) for query in queries]
        seen = [t for t in times if t is not None]
        return Commits(max(seen, default=None), min(seen) if seen and len(seen) == len(times) else None)


@dataclass(frozen=True)
class Tries:
    """A snapshot that failed: how often in a row, and when last."""

    count: int
    at: float


def parse_ask(text: str | None) -> Ask | None:
    """The ask annotated on the driver pod (None: none). ValueError, naming what, for one that is not:
    the nonce becomes a folder's name, so it is held to the API's pattern here too."""
    if not text or not text.strip():
        return None
    found = json.loads(text)
    if not isinstance(found, dict):
        raise ValueError(f"snapshot ask {text[:100]!r}: not a JSON object")
    nonce, every, keep = found.get("nonce"), found.get("every"), found.get("keep", 3)
    if nonce is not None and not (isinstance(nonce, str) and _NAME.match(nonce)):
        raise ValueError(f"snapshot ask: nonce {str(nonce)[:100]!r} is not a snapshot name ({NAME_PATTERN})")
    if every is not None and (isinstance(every, bool) or not isinstance(every, int | float)
                              or every < SNAPSHOT_EVERY_MIN_SECONDS):
        raise ValueError(f"snapshot ask: every {str(every)[:100]!r} is not a number of seconds of at least "
                         f"{SNAPSHOT_EVERY_MIN_SECONDS} (spec.state.snapshots.every's minimum)")
    if isinstance(keep, bool) or not isinstance(keep, int) or not 1 <= keep <= 100:
        raise ValueError(f"snapshot ask: keep {str(keep)[:100]!r} is not a count from 1 to 100")
    return Ask(nonce, None if every is None else float(every), keep)


def ask_of_spec(state) -> Ask | None:
    """The ask of a local run, from the manifest's ``spec.state`` (None: it asks for no snapshot)."""
    schedule = state.snapshots
    if state.snapshot_nonce is None and schedule is None:
        return None
    every = parse_duration(schedule.every).total_seconds() if schedule is not None else None
    return Ask(state.snapshot_nonce, every, schedule.keep if schedule is not None else 3)


def periodic_time(name: str) -> float | None:
    """The time a periodic snapshot's name holds (``checkpoint.periodic_snapshot_name``); None for
    any other name."""
    return _name_time(_PERIODIC_NAME.match(name))


def pre_change_time(name: str) -> float | None:
    """The time a pre-change snapshot's name holds (``checkpoint.pre_change_snapshot_name``); None for
    any other name."""
    return _name_time(_PRE_CHANGE_NAME.match(name))


def _name_time(match: re.Match[str] | None) -> float | None:
    if match is None:
        return None
    try:
        return float(calendar.timegm(time.strptime(match.group(1), "%Y%m%d-%H%M%S")))
    except ValueError:
        return None


def due(ask: Ask, complete: frozenset[str], now: float, commits: Commits, nonce_seen: float,
        periodic_from: float, failed: Mapping[str, Tries]) -> str | None:
    """The name of the snapshot to take now, or None.

    ``complete``: the snapshots of the app that have their ``_snapshot.json``; ``commits``: when its
    queries last committed a batch; ``nonce_seen``:
    when this driver first saw the asked nonce; ``periodic_from``: the driver's start (the periodic
    snapshots' reference while there is none); ``failed``: the
    failures in a row, by nonce and under ``PERIODIC``."""
    last_commit = commits.newest

    def committed_after(moment: float, by_every_query: bool = False) -> bool:
        at = commits.every_query if by_every_query else last_commit
        return at is not None and at > moment

    nonce = ask.nonce
    if nonce is not None and nonce not in complete:
        tries = failed.get(nonce)
        if tries is None or tries.count < MAX_TRIES:
            after = nonce_seen if tries is None else tries.at
            at_once = tries is None and pre_change_time(nonce) is not None
            if at_once or committed_after(after, by_every_query=True) or now - after >= IDLE_WAIT:
                return nonce
    if ask.every is None or last_commit is None:
        return None
    newest = max((t for t in map(periodic_time, complete) if t is not None), default=None)
    since = newest if newest is not None else periodic_from  # a restarted driver keeps the schedule
    tries = failed.get(PERIODIC)
    if tries is not None:
        if tries.count >= MAX_TRIES:
            since = max(since, tries.at)  # given up for now: a whole period after the last try
        elif not committed_after(tries.at):
            return None
    if last_commit < since + ask.every:
        return None
    name = periodic_snapshot_name(now)
    return None if name in complete else name


def expired(complete: Iterable[str], incomplete: Iterable[str], keep: int, keep_also: str | None = None) -> list[str]:
    """The snapshots retention deletes, oldest first: of the periodic and pre-change ones, the complete
    ones beyond the newest ``keep`` (but never the newest pre-change one) and those whose copy did not
    finish. Never another nonce's, nor ``keep_also``, the nonce asked now."""
    def by_time(names: Iterable[str]) -> list[str]:
        timed = ((retained_time(n), n) for n in names if n != keep_also)
        return [n for t, n in sorted((t, n) for t, n in timed if t is not None)]

    done = by_time(complete)
    newest_pre = [n for n in done if pre_change_time(n) is not None][-1:]
    return by_time([*incomplete, *(set(done[:max(0, len(done) - keep)]) - set(newest_pre))])


def retained_time(name: str) -> float | None:
    """The time a periodic or pre-change snapshot's name holds (those retention counts); None for any
    other name."""
    at = periodic_time(name)
    return at if at is not None else pre_change_time(name)
