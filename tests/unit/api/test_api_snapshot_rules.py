"""The snapshot fields' rules: restoreFrom changes only with resetNonce (an update check, the twin of
State's CEL transition rule) and snapshots.every at least 1m (the twin of its CEL rule). The CEL rules
themselves on the API server: tests/integration/test_api_server.py (tests/manifests/invalid) and
tests/operator/test_operator_snapshots.py."""

from __future__ import annotations

import pytest

from streamapp_api import validate
from streamapp_api.crd import crd
from streamapp_api.rules import check_change

from streamapp_testkit.operator_apps import manifest

pytestmark = pytest.mark.unit
SNAP = {"snapshot": "before-upgrade"}
OTHER = {"snapshot": "before-upgrade", "app": "blue"}


@pytest.mark.parametrize("old, new, refused", [
    # set, changed or moved to another app without a new resetNonce: refused
    ({}, {"restoreFrom": SNAP}, True),
    ({"resetNonce": "1"}, {"resetNonce": "1", "restoreFrom": SNAP}, True),
    ({"resetNonce": "1", "restoreFrom": SNAP}, {"resetNonce": "1", "restoreFrom": OTHER}, True),
    ({"restoreFrom": SNAP}, {"restoreFrom": {"snapshot": "later"}}, True),
    # with a new state generation: admitted (a nonce set, changed or removed)
    ({}, {"resetNonce": "2", "restoreFrom": SNAP}, False),
    ({"resetNonce": "1"}, {"resetNonce": "2", "restoreFrom": OTHER}, False),
    ({"resetNonce": "1", "restoreFrom": SNAP}, {"restoreFrom": OTHER}, False),
    # left as it was, or removed alone: admitted
    ({"restoreFrom": SNAP}, {"restoreFrom": SNAP, "snapshotNonce": "x"}, False),
    ({"resetNonce": "1", "restoreFrom": SNAP}, {"resetNonce": "1"}, False),
    ({}, {}, False),
    # what is not a spec is judged elsewhere (the schema): no crash here
    (None, {"restoreFrom": SNAP}, True),
    ({"restoreFrom": SNAP}, "not a spec", False),
])
def test_restore_from_changes_only_with_reset_nonce(old, new, refused):
    old_spec = {"state": old} if isinstance(old, dict) else old
    new_spec = {"state": new} if isinstance(new, dict) else new
    issues = check_change(old_spec, new_spec)
    assert [i.path for i in issues] == (["spec.state.restoreFrom"] if refused else [])
    if refused:
        assert "resetNonce" in issues[0].message


@pytest.mark.parametrize("every, refused", [
    ("30s", True), ("59s", True), ("59999ms", True), ("1m", False), ("60s", False), ("6h", False), ("1d", False),
])
def test_snapshots_every_is_at_least_a_minute(every, refused):
    issues = validate(manifest(state={"snapshots": {"every": every, "keep": 2}}))
    found = [str(i) for i in issues if i.path == "spec.state.snapshots.every"]
    assert bool(found) == refused, found
    if refused:
        assert "at least 1m" in found[0]


def test_the_cel_twins_are_in_the_crd():
    state = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["state"]
    (transition,) = state["x-kubernetes-validations"]
    assert "oldSelf.restoreFrom" in transition["rule"] and transition["fieldPath"] == ".restoreFrom"
    (every,) = state["properties"]["snapshots"]["x-kubernetes-validations"]
    assert every["rule"].endswith(">= 60000") and every["fieldPath"] == ".every"
