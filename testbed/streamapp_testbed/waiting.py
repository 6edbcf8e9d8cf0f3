"""The one way to wait for something to happen (tests, the demo, the benchmarks): poll a check until it
answers with a truthy value.

A check answers "not yet" with a falsy value: False, None, an empty list, or `NotYet(reason)` when it
can say why (the reason shows in the timeout's message). A string is an answer like any other: a
non-empty one means done.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class NotYet:
    """A check's "not yet", with the reason: falsy, so `wait_for` keeps polling."""

    def __init__(self, reason: str):
        self.reason = reason

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"NotYet({self.reason!r})"


def wait_for(what: str, check: Callable[[], T], timeout: float = 60, every: float = 0.3) -> T:
    """Call `check` every `every` seconds until it returns something truthy, and return that.

    Falsy answers and exceptions (raised or returned) mean not yet. After `timeout` seconds,
    TimeoutError names `what` and the last answer.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            last = check()
        except Exception as exc:  # noqa: BLE001 - not there yet
            last = exc
        if last and not isinstance(last, Exception):
            return last  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}; last saw: {last!r}")
        time.sleep(every)
