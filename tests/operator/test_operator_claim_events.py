"""The checkpoint claims' events, read the way the operator reads them while claims wait for a volume:
one list per namespace shared by every app's reconcile, each claim still told its own events. Real
API server and volume controller."""

from __future__ import annotations

import pytest

from streamapp_operator.observe.blockers import ClaimEvents, claim

from streamapp_testbed.waiting import wait_for
from streamapp_testkit.counting_kube import ListCounter

pytestmark = pytest.mark.integration


def _claim(name: str, storage_class: str | None) -> dict:
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": f"{name}-checkpoint"},
            "spec": spec}


def test_one_list_tells_each_waiting_claim_its_own_events(own_namespace):
    ns = own_namespace
    ns.apply(_claim("no-class", None))
    ns.apply(_claim("bad-class", "no-such-class"))
    kube = ListCounter(ns.kube.client, fan_out=1)
    wait_for("both claims' events", lambda: all(getattr(claim(kube, ns.namespace, app), "events", ())
                                                for app in ("no-class", "bad-class")))

    shared, kube.lists = ClaimEvents(max_age=60), 0
    no_class = claim(kube, ns.namespace, "no-class", shared)
    bad_class = claim(kube, ns.namespace, "bad-class", shared)
    assert kube.lists == 1  # the second app's reconcile shared the first one's list
    assert no_class.phase == bad_class.phase == "Pending"
    assert "no storage class is set" in no_class.events[0], no_class.events
    assert 'storageclass.storage.k8s.io "no-such-class" not found' in bad_class.events[0], bad_class.events
    assert all("no-such-class" not in e for e in no_class.events)

    stale = ClaimEvents(max_age=0)
    claim(kube, ns.namespace, "no-class", stale)
    claim(kube, ns.namespace, "bad-class", stale)
    assert kube.lists == 3  # older than max_age: listed again
