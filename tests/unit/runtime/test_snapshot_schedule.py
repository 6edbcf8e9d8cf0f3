"""Snapshots taken by a running driver, the pure parts: which one is due given the ask, the snapshots
there, the time and the last commit; which periodic ones retention deletes; the ask as the operator
annotates it; where the app's base is; what a restore at start does with the generation root."""

from __future__ import annotations

import calendar

import pytest

from streamapp_api import contract
from streamapp_api.checkpoint import periodic_snapshot_name, pre_change_snapshot_name
from streamapp_api.spec import RestoreFrom

from streamapp_runtime.run import restoring
from streamapp_runtime.run.settings import Settings, app_base, parent
from streamapp_runtime.run.snapshot_schedule import (
    IDLE_WAIT, MAX_TRIES, PERIODIC, Ask, Commits, Tries, due, expired, parse_ask, periodic_time, pre_change_time,
)

pytestmark = pytest.mark.unit

T0 = float(calendar.timegm((2026, 11, 27, 6, 0, 0)))  # the driver's start
NONCE = Ask(nonce="before-upgrade")
HOURLY = Ask(every=3600.0, keep=2)
BOTH = Ask(nonce="before-upgrade", every=3600.0, keep=2)
P0 = periodic_snapshot_name(T0 - 600)  # a periodic snapshot taken ten minutes before the start


@pytest.mark.parametrize("ask, complete, now, last_commit, failed, expected", [
    # a new nonce waits for a batch that commits after it was seen ...
    (NONCE, set(), T0 + 5, None, {}, None),
    (NONCE, set(), T0 + 5, T0 - 1, {}, None),
    (NONCE, set(), T0 + 5, T0 + 2, {}, "before-upgrade"),
    # ... or, an idle app, IDLE_WAIT: its last committed batch is its state now
    (NONCE, set(), T0 + IDLE_WAIT, T0 - 100, {}, "before-upgrade"),
    (NONCE, set(), T0 + IDLE_WAIT, None, {}, "before-upgrade"),
    # the operator's ask before a change: at once, at the last committed batch (none yet too)
    (Ask(nonce="pre-4-20261127-060000"), set(), T0 + 1, T0 - 100, {}, "pre-4-20261127-060000"),
    (Ask(nonce="pre-4-20261127-060000"), set(), T0 + 1, None, {}, "pre-4-20261127-060000"),
    # ... but once failed, as any nonce: after the next commit
    (Ask(nonce="pre-4-20261127-060000"), set(), T0 + 20, T0 + 10, {"pre-4-20261127-060000": Tries(1, T0 + 12)}, None),
    # taken already (a driver restarted after it): never again
    (NONCE, {"before-upgrade"}, T0 + 5, T0 + 2, {}, None),
    # failed: again after the next commit, MAX_TRIES in all
    (NONCE, set(), T0 + 20, T0 + 10, {"before-upgrade": Tries(1, T0 + 12)}, None),
    (NONCE, set(), T0 + 20, T0 + 15, {"before-upgrade": Tries(1, T0 + 12)}, "before-upgrade"),
    (NONCE, set(), T0 + 20, T0 + 15, {"before-upgrade": Tries(MAX_TRIES, T0 + 12)}, None),
    (NONCE, set(), T0 + 999, T0 + 998, {"before-upgrade": Tries(MAX_TRIES, T0 + 12)}, None),
    # periodic, none yet: the first batch committed `every` after the start
    (HOURLY, set(), T0 + 3599, T0 + 3599, {}, None),
    (HOURLY, set(), T0 + 3601, T0 + 3600, {}, periodic_snapshot_name(T0 + 3601)),
    # no batch committed since: no periodic snapshot (the state has not changed)
    (HOURLY, set(), T0 + 9999, None, {}, None),
    # a restarted driver keeps the schedule of the newest periodic snapshot there
    (HOURLY, {P0}, T0 + 3100, T0 + 3000, {}, periodic_snapshot_name(T0 + 3100)),
    (HOURLY, {P0, "before-upgrade"}, T0 + 100, T0 + 50, {}, None),
    # a periodic one that failed: again at the next commit; after MAX_TRIES a whole period later
    (HOURLY, set(), T0 + 3700, T0 + 3650, {PERIODIC: Tries(1, T0 + 3660)}, None),
    (HOURLY, set(), T0 + 3700, T0 + 3690, {PERIODIC: Tries(1, T0 + 3660)}, periodic_snapshot_name(T0 + 3700)),
    (HOURLY, set(), T0 + 3700, T0 + 3690, {PERIODIC: Tries(MAX_TRIES, T0 + 3660)}, None),
    (HOURLY, set(), T0 + 7300, T0 + 7270, {PERIODIC: Tries(MAX_TRIES, T0 + 3660)}, periodic_snapshot_name(T0 + 7300)),
    # the nonce first; the periodic one at a later look
    (BOTH, set(), T0 + 3601, T0 + 3600, {}, "before-upgrade"),
    (BOTH, {"before-upgrade"}, T0 + 3601, T0 + 3600, {}, periodic_snapshot_name(T0 + 3601)),
    # two in one second would have one name: the second waits
    (HOURLY, {periodic_snapshot_name(T0 + 3601)}, T0 + 3601, T0 + 3600, {}, None),
])
def test_what_is_due(ask, complete, now, last_commit, failed, expected):
    commits = Commits(last_commit, last_commit)
    assert due(ask, frozenset(complete), now, commits, nonce_seen=T0, periodic_from=T0, failed=failed) == expected


def test_a_nonce_waits_for_a_commit_of_every_query_after_it_was_seen():
    seen = T0 + 500
    assert due(NONCE, frozenset(), T0 + 510, Commits(T0 + 400, T0 + 400), seen, T0, {}) is None
    assert due(NONCE, frozenset(), T0 + 510, Commits(T0 + 505, T0 + 400), seen, T0, {}) is None
    assert due(NONCE, frozenset(), T0 + 510, Commits(T0 + 508, T0 + 505), seen, T0, {}) == "before-upgrade"
    # a nonce waiting for its commits does not hold up a periodic snapshot that is due
    assert due(BOTH, frozenset(), T0 + 3660, Commits(T0 + 3640, T0 + 3640), T0 + 3650, T0, {}) \
        == periodic_snapshot_name(T0 + 3660)


def test_when_the_queries_last_committed():
    assert Commits.of({}, ["a", "b"]) == Commits(None, None)
    assert Commits.of({"a": 5.0}, ["a", "b"]) == Commits(5.0, None)
    assert Commits.of({"a": 5.0, "b": 3.0}, ["a", "b"]) == Commits(5.0, 3.0)
    assert Commits.of({"a": 5.0, "another-apps": 9.0}, ["a"]) == Commits(5.0, 5.0)


def names(*minutes: int) -> list[str]:
    return [periodic_snapshot_name(T0 + 60 * m) for m in minutes]


def pres(*minute_generations: tuple[int, int]) -> list[str]:
    return [pre_change_snapshot_name(generation, T0 + 60 * m) for m, generation in minute_generations]


@pytest.mark.parametrize("complete, incomplete, keep, keep_also, expected", [
    (names(1, 2, 3), [], 2, None, names(1)),
    (names(3, 1, 2, 4), [], 2, None, names(1, 2)),  # oldest first, whatever the listing's order
    (names(1, 2), [], 2, None, []),
    (names(1), [], 3, None, []),
    # a nonce's snapshot is never deleted, nor counted
    ([*names(1, 2, 3), "before-upgrade", "pre-7"], [], 2, None, names(1)),
    # a copy that did not finish goes, whatever keep says
    (names(2, 3), names(1), 2, None, names(1)),
    (names(5), ["before-upgrade"], 1, None, []),
    # a nonce named like a periodic snapshot is kept while it is the one asked for
    (names(1, 2, 3), [], 1, names(1)[0], names(2)),
    # pre-change snapshots count with the periodic ones, by the time their names hold
    ([*names(1, 3, 5), *pres((2, 7), (4, 8))], [], 3, None, [*names(1), *pres((2, 7))]),
    ([*pres((1, 7), (2, 8), (3, 9))], [], 2, None, pres((1, 7))),
    # the newest pre-change one is kept beyond keep: a rollback restores it
    ([*pres((1, 7)), *names(2, 3, 4)], [], 2, None, names(2)),
    ([*pres((1, 7), (2, 8)), *names(3, 4)], [], 1, None, [*pres((1, 7)), *names(3)]),
    # ... as is the one asked now, and one whose copy did not finish goes
    (names(1, 2), pres((3, 7)), 1, pres((3, 7))[0], names(1)),
    (names(1, 2), pres((3, 7)), 2, None, pres((3, 7))),
    # a nonce the user named is neither: untouched, not counted
    ([*names(1, 2), "pre-7", "pre-7-x", "pre-upgrade-20261127-060000", "every-day"], [], 1, None, names(1)),
])
def test_retention_deletes_the_oldest_periodic_and_pre_change_snapshots_beyond_keep(complete, incomplete, keep, keep_also,
                                                                                     expected):
    assert expired(complete, incomplete, keep, keep_also) == expected


def test_a_periodic_or_pre_change_name_reads_back_as_its_time():
    assert periodic_time(periodic_snapshot_name(T0 + 61.7)) == T0 + 61
    assert pre_change_time(pre_change_snapshot_name(12, T0 + 61.7)) == T0 + 61
    assert periodic_time(pre_change_snapshot_name(12, T0)) is None and pre_change_time(periodic_snapshot_name(T0)) is None
    assert pre_change_time("pre-12") is None
    assert pre_change_time("pre-12-20261399-000000") is None
    assert periodic_time("before-upgrade") is None
    assert periodic_time("every-20261399-000000") is None
    assert periodic_time("every-20261127-060000-x") is None


@pytest.mark.parametrize("text, expected", [
    (None, None),
    ("", None),
    ('{"nonce": "n1", "every": 3600, "keep": 4}', Ask("n1", 3600.0, 4)),
    ('{"nonce": null, "every": 60}', Ask(None, 60.0, 3)),
    ('{"nonce": "n1", "every": null, "keep": 1}', Ask("n1", None, 1)),
])
def test_the_ask_the_operator_annotates(text, expected):
    assert parse_ask(text) == expected


@pytest.mark.parametrize("text, complaint", [
    ('{"nonce": "../other-app"}', "is not a snapshot name"),
    ('{"nonce": "A"}', "is not a snapshot name"),
    ('{"nonce": 7}', "is not a snapshot name"),
    ('{"every": -5}', "at least 60"),
    ('{"every": 59}', "at least 60"),  # the API's minimum: a pod annotated by hand is held to it too
    ('{"every": true}', "at least 60"),
    ('{"every": "1h"}', "at least 60"),
    ('{"keep": 0}', "not a count"),
    ('{"keep": 101}', "not a count"),
    ('["n1"]', "not a JSON object"),
    ("{nonce", "Expecting"),
])
def test_an_ask_that_is_not_one_is_refused_naming_what(text, complaint):
    with pytest.raises(ValueError, match=complaint):
        parse_ask(text)


@pytest.mark.parametrize("flag, environ, location, expected", [
    ("/data/ckpt/gen-3", {}, None, "/data/ckpt"),
    (None, {contract.ENV_CHECKPOINT_DIR: f"{contract.CHECKPOINT_MOUNT}/gen-2"}, None, contract.CHECKPOINT_MOUNT),
    (None, {contract.ENV_CHECKPOINT_DIR: "s3a://b/apps/ns/a/gen-0"}, "s3a://b/apps/ns/a", "s3a://b/apps/ns/a"),
    (None, {}, "s3a://b/apps/ns/a", "s3a://b/apps/ns/a"),
    (None, {}, "s3a://b", "s3a://b"),
])
def test_the_apps_base_is_its_checkpoint_roots_parent(flag, environ, location, expected):
    assert app_base(flag, environ, "clicks", location) == expected


def test_a_local_run_without_a_root_has_a_base_of_its_own(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert app_base(None, {}, "clicks") == str(tmp_path / ".streamapp" / "apps" / "clicks")
    assert app_base(None, {}, "other") != app_base(None, {}, "clicks")
    assert Settings(checkpoint_root="s3a://b/x/gen-0").app_base == "s3a://b/x"
    assert Settings(checkpoint_root="s3a://b/x/gen-0", base="s3a://c").app_base == "s3a://c"
    assert parent("ckpt") == str(tmp_path)


RESTORED = contract.RESTORED_FILE
CHECKPOINT = ["_owner.json", "streamapp.json", "counts"]


@pytest.mark.parametrize("root_names, restore_id, restored_id, expected", [
    ([], None, None, "restore"),
    (["_owner.json"], None, None, "restore"),
    (CHECKPOINT, None, None, "skip"),
    (["counts"], None, None, "skip"),
    ([*CHECKPOINT, RESTORED], None, None, "skip"),
    (["_owner.json", restoring.RESTORING_FILE, "counts"], None, None, "again"),
    # the restore record alone is no checkpoint
    (["_owner.json", RESTORED], None, None, "restore"),
    (["_owner.json", RESTORED], "rollback-7", None, "restore"),
    # a rollback replaces the checkpoint the failed spec ran on ...
    (CHECKPOINT, "rollback-7", None, "replace"),
    ([*CHECKPOINT, RESTORED], "rollback-7", None, "replace"),  # restored before, from restoreFrom
    ([*CHECKPOINT, RESTORED], "rollback-7", "rollback-5", "replace"),  # an earlier rollback's
    # ... once: a later driver of the same rollback goes on from where the first one got to
    ([*CHECKPOINT, RESTORED], "rollback-7", "rollback-7", "skip"),
    # a replace cut short is restored again, whole
    ([*CHECKPOINT, restoring.RESTORING_FILE], "rollback-7", None, "again"),
    ([*CHECKPOINT, RESTORED, restoring.RESTORING_FILE], "rollback-7", "rollback-7", "again"),
])
def test_a_restore_at_start_fills_an_empty_generation_or_replaces_one_once_per_id(root_names, restore_id, restored_id,
                                                                                  expected):
    assert restoring.step(root_names, restore_id, restored_id) == expected


@pytest.mark.parametrize("text, expected", [
    (None, None),
    ('{"from": "/data/snapshots/pre-7-20261127-060000", "id": "rollback-7"}\n', "rollback-7"),
    ('{"from": "/data/snapshots/s1", "id": null}', None),
    ('{"id": 7}', None),
    ('["rollback-7"]', None),
    ("{half", None),  # unreadable: the origin of the state is unknown, a rollback replaces it
])
def test_the_id_a_restore_recorded(text, expected):
    assert restoring.recorded_id(text) == expected


def test_where_a_generation_is_restored_from():
    own = RestoreFrom(snapshot="before-upgrade")
    assert restoring.location(None, "a", "s3a://b/a", {}) is None
    assert restoring.location(own, "a", "s3a://b/a", {}) == "s3a://b/a/snapshots/before-upgrade"
    assert restoring.location(RestoreFrom(snapshot="s1", app="a"), "a", "/data", {}) == "/data/snapshots/s1"
    given = {contract.ENV_RESTORE_FROM: "s3a://b/other/snapshots/s1"}
    assert restoring.location(RestoreFrom(snapshot="s1", app="other"), "a", "s3a://b/a", given) \
        == "s3a://b/other/snapshots/s1"
    with pytest.raises(restoring.RestoreRefused, match=r"^spec\.state\.restoreFrom\.app: 'other'"):
        restoring.location(RestoreFrom(snapshot="s1", app="other"), "a", "/data", {})


def test_a_snapshot_sharing_no_query_with_the_app_is_refused_naming_the_sinks():
    from streamapp_testkit.operator_apps import app as make_app

    named = make_app(sinks=[{"name": "totals", "from": "big", "kafka": {"topic": "big-orders"}},
                            {"name": "audit", "from": "orders", "kafka": {"topic": "audit"}}])
    assert restoring.unmatched(["totals", "audit"], {"totals": 4}) == ["audit"]
    restoring._check_queries(named, "s3a://b/app/snapshots/x", {"totals": 4})  # a sink added: it starts afresh
    with pytest.raises(restoring.RestoreRefused, match=r"holds the queries big-blue, none of this app's "
                                                       r"\(totals, audit\).*spec\.sinks\[\]\.name"):
        restoring._check_queries(named, "s3a://b/app/snapshots/x", {"big-blue": 4})
