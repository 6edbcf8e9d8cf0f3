"""Leader election's pure parts and the reconciler's gate: a replica that does not lead keeps the apps
it hears of and acts on none; once it leads it reconciles each; app events that change nothing the user
wrote (the operator's own status) are dropped."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from streamapp_operator.decide.world import Settings
from streamapp_operator.leader import LeaseTimes, parse_lease
from streamapp_operator.scheduler import Reconciler, essence

pytestmark = pytest.mark.unit
TOO_SHORT = "the lease duration must be longer than the renew deadline and a retry period (else two replicas may act at once)"


@pytest.mark.parametrize(("times", "problems"), [
    (LeaseTimes(), []),  # client-go's 15 / 10 / 2
    (LeaseTimes(5, 3, 1), []),
    (LeaseTimes(4, 3, 1), [TOO_SHORT]),  # the leader may learn it lost the Lease just as another takes it
    (LeaseTimes(10, 10, 2), [TOO_SHORT]),
    (LeaseTimes(15, 2, 2), ["the renew deadline must be longer than 1.2 retry periods"]),
    (LeaseTimes(15, 10, 0), ["the retry period must be at least 1 s"]),
])
def test_lease_times_that_could_let_two_replicas_act_are_refused(times, problems):
    assert times.problems() == problems


@pytest.mark.parametrize("value", ["ops", "ops/", "/lease", "ops/a/b"])
def test_the_lease_is_named_namespace_slash_name(value):
    with pytest.raises(ValueError, match="NAMESPACE/NAME"):
        parse_lease(value)
    assert parse_lease("ops/streamapp-operator") == ("ops", "streamapp-operator")


def app(generation=1, status=None, annotations=None) -> dict:
    meta = {"name": "a", "namespace": "ns", "generation": generation, "annotations": annotations or {}}
    return {"metadata": meta, "spec": {}, **({"status": status} if status else {})}


def test_only_what_the_user_writes_is_the_essence():
    assert essence(app()) == essence(app(status={"phase": "Running"}))
    assert essence(app()) != essence(app(generation=2))
    assert essence(app()) != essence(app(annotations={"streamapp.io/pause-reconciliation": "true"}))


def _events(monkeypatch, leading: bool, *events: tuple[str | None, dict], lead: bool = False) -> list[tuple[str, dict | None]]:
    """Feed app events to a reconciler whose reconcile is recorded, not run: (app, created body) per reconcile."""
    from streamapp_operator import scheduler
    from streamapp_operator.decide.world import Plan
    from streamapp_operator.reconcile import Caches, Outcome

    runs: list[tuple[str, dict | None]] = []

    def reconcile(kube, namespace, name, settings, memory, caches=None, known=None, created=None):
        runs.append((name, created))
        return Outcome(Plan(status={}), children={})

    monkeypatch.setattr(scheduler, "reconcile", reconcile)

    async def scenario() -> None:
        reconciler = Reconciler(Settings(default_image="runtime"), leading=leading)
        reconciler.kube, reconciler.caches, reconciler.pool = object(), Caches(), ThreadPoolExecutor(1)
        try:
            for event_type, body in events:
                await reconciler.app_event("ns", body["metadata"]["name"], event_type, body)
            if lead:
                reconciler.lead()
                await asyncio.sleep(0.3)  # the looks it asks for (0.1 s)
        finally:
            await reconciler.close()

    asyncio.run(scenario())
    return runs


def test_a_follower_acts_on_nothing_and_reconciles_every_app_it_knows_once_it_leads(monkeypatch):
    listed, modified = app(status={"phase": "Running"}), app(generation=2)
    assert _events(monkeypatch, False, (None, listed), ("MODIFIED", modified)) == []
    assert _events(monkeypatch, False, (None, listed), ("MODIFIED", modified), lead=True) == [("a", None)]
    assert _events(monkeypatch, False, (None, listed), ("DELETED", listed), lead=True) == []  # forgotten


def test_the_operators_own_status_writes_ask_for_nothing(monkeypatch):
    new = app()
    assert _events(monkeypatch, True, ("ADDED", new), ("MODIFIED", app(status={"phase": "Starting"})),
                   ("MODIFIED", app(generation=2, status={"phase": "Starting"}))) == [("a", new), ("a", None)]
