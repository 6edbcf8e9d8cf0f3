"""When the scheduler looks at an app again: the timers of scheduler.Reconciler, on a real event loop."""

from __future__ import annotations

import asyncio

import pytest

from streamapp_operator.decide.world import Settings
from streamapp_operator.scheduler import Reconciler, _App

pytestmark = pytest.mark.unit
KEY = ("ns", "app")


def _timers(*requests: tuple[float, bool]) -> tuple[float, bool]:
    """Apply requeue requests (delay, periodic) in order: (seconds until the timer, whether it is the periodic look)."""

    async def scenario() -> tuple[float, bool]:
        reconciler = Reconciler(Settings(default_image="runtime"), resync=30)
        app = reconciler.apps[KEY] = _App()
        for delay, periodic in requests:
            reconciler.requeue(*KEY, delay, periodic=periodic)
        loop = asyncio.get_running_loop()
        left = app.timer.when() - loop.time()
        app.timer.cancel()
        return round(left, 1), app.periodic

    return asyncio.run(scenario())


@pytest.mark.parametrize(("requests", "expected"), [
    # the periodic look comes first, then a restart backoff is asked for: the earlier timer stays,
    # and it is a full reconcile (else it would end at the partition counts and the restart waits)
    ([(0.5, True), (1.0, False)], (0.5, False)),
    # a backoff first, then the periodic look later: the backoff's timer stays, full
    ([(1.0, False), (27.0, True)], (1.0, False)),
    # the periodic look alone stays cheap
    ([(27.0, True)], (27.0, True)),
    # an asked-for look earlier than the periodic one replaces it
    ([(27.0, True), (2.0, False)], (2.0, False)),
    # a later periodic request never turns an asked-for look cheap
    ([(2.0, False), (1.0, True)], (1.0, False)),
])
def test_an_asked_for_look_is_never_cut_short_by_the_periodic_one(requests, expected):
    assert _timers(*requests) == expected
