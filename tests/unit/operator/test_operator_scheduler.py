"""scheduler.Reconciler on a real event loop, with the reconcile faked: when it looks at an app again
(the timers), when the periodic look is cheap, how triggers coalesce, how long the children are taken
as last seen, its one retry of a failed reconcile, and its life from kopf's startup to its cleanup."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from streamapp_operator.decide.world import Kafka, Settings
from streamapp_operator.kubeapi import ApiError
from streamapp_operator.reconcile import Caches
from streamapp_operator.scheduler import CHILDREN_EVERY, ERROR_RETRY, FULL_EVERY, Reconciler, _App, pack, unpack

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


def _failing_run(monkeypatch, error: Exception, resync: float) -> tuple[float, bool]:
    """A reconcile that raises: (seconds until the look it leaves behind, whether that look is periodic)."""
    from streamapp_operator import scheduler

    def fails(*args, **kwargs):
        raise error

    monkeypatch.setattr(scheduler, "reconcile", fails)

    async def scenario() -> tuple[float, bool]:
        reconciler = Reconciler(Settings(default_image="runtime"), resync=resync)
        reconciler.kube, reconciler.caches = object(), Caches()  # nothing to connect to
        reconciler.pool = ThreadPoolExecutor(1)
        try:
            await reconciler.run(*KEY)  # raises nothing: the scheduler is the one retry
            app = reconciler.apps[KEY]
            left = app.timer.when() - asyncio.get_running_loop().time()
            return round(left, 1), app.periodic
        finally:
            await reconciler.close()

    return asyncio.run(scenario())


@pytest.mark.parametrize(("error", "resync", "expected"), [
    (ApiError(500, "Internal Server Error"), 30, (ERROR_RETRY, False)),  # the API server: again soon, a full look
    (RuntimeError("a bug"), 30, (ERROR_RETRY, False)),  # anything else alike
    (ApiError(409, "Conflict"), 4, (4, False)),  # never later than the periodic look would come
])
def test_a_failed_reconcile_is_retried_by_the_scheduler_alone(monkeypatch, error, resync, expected):
    assert _failing_run(monkeypatch, error, resync) == expected


def test_a_periodic_look_that_cannot_read_the_partition_counts_is_a_full_one():
    class Unreachable:
        def observe(self, **kwargs):
            raise OSError("no route to the brokers")

    async def scenario() -> bool:
        reconciler = Reconciler(Settings(default_image="runtime"), resync=30)
        reconciler.kube, reconciler.caches, reconciler.pool = object(), Caches(), ThreadPoolExecutor(1)
        app = _App(probe=Unreachable(), kafka=Kafka(partitions=4), known=pack({}),
                   known_at=asyncio.get_running_loop().time())
        try:
            return await reconciler._nothing_new(app)
        finally:
            await reconciler.close()

    assert asyncio.run(scenario()) is False


def test_the_reconciler_is_built_at_startup_from_the_memo_and_closed_at_cleanup():
    from streamapp_operator import handlers

    async def scenario() -> tuple[Reconciler, Settings, float]:
        settings = Settings(default_image="runtime:2")
        memo = handlers.operator_memo(settings, resync=7)
        await handlers.start_reconciler(memo=memo)
        built = memo[handlers.RECONCILER]
        await handlers.stop_reconciler(memo=memo)
        return built, settings, built.resync

    built, settings, resync = asyncio.run(scenario())
    assert isinstance(built, Reconciler) and built.settings is settings and resync == 7


class _Probe:
    """Partition counts as the cache would give them now."""

    def __init__(self, kafka: Kafka):
        self.kafka = kafka

    def observe(self, **kwargs) -> Kafka:
        return self.kafka


SAME, MORE = Kafka(partitions=4), Kafka(partitions=8)


@pytest.mark.parametrize(("app", "children_age", "cheap"), [
    (dict(probe=_Probe(SAME), kafka=SAME, known=pack({})), 0, True),  # nothing new: the look ends at the counts
    (dict(probe=_Probe(MORE), kafka=SAME, known=pack({})), 0, False),  # partitions added: reconcile
    (dict(probe=None, kafka=SAME, known=pack({})), 0, False),  # no way to read the counts again
    (dict(probe=_Probe(SAME), kafka=Kafka(error="down"), known=pack({})), 0, False),  # Kafka failed last time
    (dict(probe=_Probe(SAME), kafka=SAME, known=None), 0, False),  # children to be read afresh
    (dict(probe=_Probe(SAME), kafka=SAME, known=pack({})), 30 * FULL_EVERY, False),  # a full reconcile is due
    (dict(probe=_Probe(SAME), kafka=SAME, known=pack({}), waiting=True), 0, False),  # a reconcile is on its way
    (dict(probe=_Probe(SAME), kafka=SAME, known=pack({}), due=0.0), 0, False),  # the moment the plan named has come
])
def test_the_periodic_look_is_cheap_only_when_nothing_can_be_new(app, children_age, cheap):
    async def scenario() -> bool:
        reconciler = Reconciler(Settings(default_image="runtime"), resync=30)
        reconciler.kube, reconciler.caches, reconciler.pool = object(), Caches(), ThreadPoolExecutor(1)
        state = _App(known_at=asyncio.get_running_loop().time() - children_age, **app)
        try:
            return await reconciler._nothing_new(state)
        finally:
            await reconciler.close()

    assert asyncio.run(scenario()) is cheap


def _reconciles(monkeypatch, scenario_steps) -> list[dict | None]:
    """Run ``scenario_steps(reconciler, release)`` against a reconcile that waits for ``release``;
    return the ``known`` children each reconcile was handed."""
    from streamapp_operator import scheduler
    from streamapp_operator.decide.world import Plan
    from streamapp_operator.reconcile import Outcome

    handed: list[dict | None] = []

    async def scenario() -> list[dict | None]:
        release = asyncio.Event()
        loop = asyncio.get_running_loop()

        def reconcile(kube, namespace, name, settings, memory, caches=None, known=None, created=None):
            handed.append(known)
            asyncio.run_coroutine_threadsafe(release.wait(), loop).result()
            return Outcome(Plan(status={}), children={"ConfigMap/app": {}})

        monkeypatch.setattr(scheduler, "reconcile", reconcile)
        reconciler = Reconciler(Settings(default_image="runtime"), resync=30)
        reconciler.kube, reconciler.caches, reconciler.pool = object(), Caches(), ThreadPoolExecutor(2)
        try:
            await scenario_steps(reconciler, release)
        finally:
            await reconciler.close()
        return handed

    return asyncio.run(scenario())


def test_triggers_while_a_reconcile_runs_coalesce_into_one_that_waits(monkeypatch):
    async def steps(reconciler: Reconciler, release: asyncio.Event) -> None:
        first = asyncio.ensure_future(reconciler.run(*KEY))
        await asyncio.sleep(0.05)  # the first reconcile runs
        later = [asyncio.ensure_future(reconciler.run(*KEY)) for _ in range(3)]  # one waits, two are dropped
        await asyncio.sleep(0.05)
        release.set()
        await asyncio.gather(first, *later)

    assert len(_reconciles(monkeypatch, steps)) == 2


def test_the_children_are_taken_as_last_seen_until_children_every_resyncs_have_passed(monkeypatch):
    async def steps(reconciler: Reconciler, release: asyncio.Event) -> None:
        release.set()
        await reconciler.run(*KEY)  # reads everything
        await reconciler.run(*KEY)  # within CHILDREN_EVERY resyncs: the children as seen
        reconciler.apps[KEY].known_at -= 30 * CHILDREN_EVERY
        await reconciler.run(*KEY)  # too old: read afresh

    assert _reconciles(monkeypatch, steps) == [None, {"ConfigMap/app": {}}, None]


def test_the_children_kept_between_reconciles_come_back_as_they_were():
    children = {"ConfigMap/app": {"metadata": {"name": "app", "labels": {"a": "b"}}, "data": {"app.yaml": "x: 1\n" * 500}},
                "Service/app-ui": {"spec": {"ports": [{"port": 4040}]}}}
    packed = pack(children)
    assert unpack(packed) == children and len(packed) < len(str(children)) / 5
    assert pack(None) is None and unpack(None) is None


@pytest.mark.parametrize(("namespaces", "scan"), [
    ([], False),  # the whole cluster: every namespace is served without a list of them
    (["streamapp-system"], False), (["apps-a", "apps-b"], False),  # the chart's exact names
    (["sa-*"], True), (["apps-a", "team-?"], True), (["!kube-system"], True), (["a,b"], True),  # kopf's patterns
])
def test_only_namespace_patterns_make_the_operator_scan_namespaces_and_crds(namespaces, scan):
    from streamapp_operator import handlers

    assert handlers.needs_scanning(namespaces) is scan


@pytest.mark.parametrize(("asked", "due", "expected"), [
    (None, None, (27.0, 30.0, True, None)),  # nothing asked: the periodic look, cheap
    (timedelta(seconds=10), None, (10.0, 10.0, False, None)),  # a backoff: a full look then
    (timedelta(minutes=2), None, (27.0, 30.0, False, None)),  # asked beyond a resync: the resync is a full look
    # the end of a health window minutes on: the resyncs until then stay cheap, the moment is kept as due
    (None, timedelta(minutes=5), (27.0, 30.0, True, 300.0)),
    (timedelta(seconds=10), timedelta(seconds=4), (4.0, 4.0, False, 4.0)),  # due first: a full look then
])
def test_a_moment_the_plan_names_as_due_leaves_the_resyncs_before_it_cheap(monkeypatch, asked, due, expected):
    from streamapp_operator import scheduler
    from streamapp_operator.decide.world import Plan
    from streamapp_operator.reconcile import Outcome

    monkeypatch.setattr(scheduler, "reconcile", lambda *args, **kwargs: Outcome(Plan(status={}, requeue=asked, due=due)))

    async def scenario() -> tuple[float, bool, float | None]:
        reconciler = Reconciler(Settings(default_image="runtime"), resync=30)
        reconciler.kube, reconciler.caches, reconciler.pool = object(), Caches(), ThreadPoolExecutor(1)
        try:
            await reconciler.run(*KEY)
            app, now = reconciler.apps[KEY], asyncio.get_running_loop().time()
            return app.timer.when() - now, app.periodic, None if app.due is None else round(app.due - now)
        finally:
            await reconciler.close()

    low, high, periodic, due_in = expected
    left, got_periodic, got_due = asyncio.run(scenario())
    assert low - 0.1 <= left <= high and got_periodic is periodic and got_due == due_in


@pytest.mark.parametrize(("due_in", "expected"), [
    (None, True),  # nothing due: the periodic look
    (300.0, True),  # due long after the next resync: the periodic look first
    (12.0, False),  # due before the next resync: a full look when it is due
])
def test_after_a_cheap_look_the_next_is_the_plans_if_it_is_due_first(due_in, expected):
    async def scenario() -> tuple[bool, float]:
        reconciler = Reconciler(Settings(default_image="runtime"), resync=30)
        loop = asyncio.get_running_loop()
        app = reconciler.apps[KEY] = _App(due=None if due_in is None else loop.time() + due_in)
        reconciler._next_periodic(*KEY, app)
        left = app.timer.when() - loop.time()
        app.timer.cancel()
        return app.periodic, left

    periodic, left = asyncio.run(scenario())
    assert periodic is expected and (left <= 30 if expected else abs(left - due_in) < 0.5)


def test_a_reconcile_replaces_the_looks_asked_for_before_it_with_its_own_plans(monkeypatch):
    """A backoff's full look asked for by an earlier plan, then a reconcile (a pod event) whose plan asks
    for nothing: the next look is the cheap periodic one, not the earlier plan's full look."""
    from streamapp_operator import scheduler
    from streamapp_operator.decide.world import Plan
    from streamapp_operator.reconcile import Outcome

    monkeypatch.setattr(scheduler, "reconcile", lambda *args, **kwargs: Outcome(Plan(status={})))

    async def scenario() -> tuple[float, bool]:
        reconciler = Reconciler(Settings(default_image="runtime"), resync=30)
        reconciler.kube, reconciler.caches, reconciler.pool = object(), Caches(), ThreadPoolExecutor(1)
        app = reconciler.apps[KEY] = _App()
        reconciler.requeue(*KEY, 2.0)  # an earlier plan's backoff
        try:
            await reconciler.run(*KEY)
            return app.timer.when() - asyncio.get_running_loop().time(), app.periodic
        finally:
            await reconciler.close()

    left, periodic = asyncio.run(scenario())
    assert left > 20 and periodic
