"""How a running driver gets a new executor count: in place, by a restart, or by a restart after an
in-place rescale it did not apply (the fallback). Pure.

In place (spec.scaling.rescale inPlace, the default): the operator writes the count on the driver pod
(annotation streamapp.io/executors, with the time in streamapp.io/executors-asked-at); the runtime
reads it there and applies it through Spark's executor allocation, then reports the count applied
(metric streamapp_executors_target). A driver that answers without reporting one is a runtime older
than rescale in place: restarted with the count at once. A Ready driver that has not reported the
count ``timeout`` after it was asked (the API server out of its reach, a JVM that cannot allocate) is
restarted with it too. status.scaling.lastRescale records each rescale and how it was made.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from ..status import rfc3339
from ..world import Event

Action = Literal["none", "ask", "wait", "applied", "restart", "fallback"]
# How soon to look again while waiting, at the least (a deadline just passed is looked at promptly).
MIN_LOOK = timedelta(seconds=2)


@dataclass(frozen=True)
class RescaleInputs:
    in_place: bool  # spec.scaling.rescale
    wanted: int | None  # the count the driver should run (None: not known)
    asked: int | None  # the count on the driver pod: what it started with, or was asked for since
    asked_at: datetime | None  # when it was asked for in place (None: the count it started with)
    reported: int | None  # the count the driver reports applied (None: not reported)
    answers: bool  # the driver's metrics were read
    ready: bool  # the driver pod is Ready (its queries run)
    last: dict[str, Any] | None  # status.scaling.lastRescale as it is
    timeout: timedelta
    now: datetime


@dataclass(frozen=True)
class Rescale:
    action: Action
    message: str = ""
    to: int | None = None  # ask: the count to write on the pod
    record: dict[str, Any] | None = None  # the new status.scaling.lastRescale (None: as it is)
    events: tuple[Event, ...] = ()
    requeue: timedelta | None = None  # ask, wait: when to look again


NOTHING = Rescale("none")


def decide(i: RescaleInputs) -> Rescale:
    wanted, asked = i.wanted, i.asked
    if wanted is None or asked is None:
        return NOTHING
    if wanted != asked:
        return _change(i, wanted, asked)
    if i.asked_at is None:
        return NOTHING  # the count the driver started with: nothing in flight
    if i.reported == asked:
        return _applied(i, asked, i.asked_at)
    return _waiting(i, asked, i.asked_at)


def _change(i: RescaleInputs, wanted: int, asked: int) -> Rescale:
    before = i.reported if i.reported is not None else asked
    if not i.in_place:
        why = f"rescale from {before} to {wanted} executors"
        return Rescale("restart", why, record=_record(before, wanted, "Restart", i.now, f"{why} (scaling.rescale restart)"))
    if i.answers and i.reported is None:
        return _fallback(i, wanted, before, _too_old(wanted))
    why = f"{before} → {wanted} executors in place: asked the running driver"
    return Rescale("ask", why, to=wanted, record=_record(before, wanted, "InPlace", i.now, why),
                   events=(Event("Normal", "Rescaling", why),), requeue=i.timeout)


def _applied(i: RescaleInputs, asked: int, asked_at: datetime) -> Rescale:
    last = i.last or {}
    if last.get("method") != "InPlace" or last.get("to") != asked or last.get("appliedTime"):
        return NOTHING  # recorded already (or by an operator that lost the record: nothing to add)
    took = int((i.now - asked_at).total_seconds())
    why = f"{last.get('from')} → {asked} executors in place (the driver applied it within {took}s)"
    return Rescale("applied", why, record={**last, "appliedTime": rfc3339(i.now), "message": why},
                   events=(Event("Normal", "Rescaled", why),))


def _waiting(i: RescaleInputs, asked: int, asked_at: datetime) -> Rescale:
    """The driver was asked for ``asked`` executors (the count wanted) in place and has not reported it."""
    waited = i.now - asked_at
    if i.answers and i.reported is None:  # asked before its first answer: it turns out too old
        return _fallback(i, asked, asked if i.last is None else i.last.get("from", asked), _too_old(asked))
    has = "does not answer" if not i.answers else \
        ("reports no executor count" if i.reported is None else f"reports {i.reported}")
    if i.ready and waited >= i.timeout:
        before = i.reported if i.reported is not None else (i.last or {}).get("from", asked)
        why = (f"rescale to {asked} executors by a restart: the driver has not applied it in place within "
               f"{_seconds(i.timeout)} (it {has})")
        return _fallback(i, asked, before, why)
    why = (f"waiting for the driver to apply {asked} executors in place (asked {_seconds(waited)} ago; it {has}); "
           f"restarted with them if it has not within {_seconds(i.timeout)}")
    return Rescale("wait", why, requeue=max(i.timeout - waited, MIN_LOOK))


def _too_old(count: int) -> str:
    return (f"rescale to {count} executors by a restart: the driver reports no executor count applied (a runtime "
            "older than rescale in place)")


def _fallback(i: RescaleInputs, wanted: int, before: int, why: str) -> Rescale:
    return Rescale("fallback", why, record=_record(before, wanted, "Fallback", i.now, why),
                   events=(Event("Warning", "RescaleFallback", why),))


def _record(before: int, to: int, method: str, now: datetime, message: str) -> dict[str, Any]:
    return {"from": before, "to": to, "method": method, "time": rfc3339(now), "message": message[:1024]}


def _seconds(span: timedelta) -> str:
    return f"{int(span.total_seconds())}s"
