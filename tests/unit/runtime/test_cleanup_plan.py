"""What `streamapp cleanup` removes and keeps, from what exists: table tests, no Kafka, no Postgres."""

from __future__ import annotations

import pytest

from streamapp_api import contract, load
from streamapp_runtime.cleanup.leftovers import (DELETE, KEEP, Choices, Found, LedgerRows, QueryFolder, format_table,
                                                 live_drivers, plan, query_id)
from streamapp_runtime.sinks.dead_letter_topic import writer_name
from streamapp_runtime.sinks.kafka_transactions import writer_id

pytestmark = pytest.mark.unit
ID, OTHER_ID = "6b0c1e2a-0000-4000-8000-000000000001", "6b0c1e2a-0000-4000-8000-000000000002"
ROOT = "s3a://bucket/shop/gen-0"


def shop(name: str = "shop", delivery: str = "exactly-once") -> object:
    return load({"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": name}, "spec": {
        "kafka": {"bootstrapServers": "kafka:9092"},
        "sources": [{"name": "orders", "topic": "orders", "schema": {"id": "string", "n": "long"}}],
        "deadLetter": {"delivery": delivery},
        "sinks": [{"name": "to-kafka", "from": "orders", "kafka": {"topic": "orders-out", "delivery": "exactly-once"}},
                  {"name": "to-pg", "from": "orders", "postgres": {"secretRef": {"name": "pg"}, "table": "orders",
                                                                   "primaryKey": ["id"]}}]}})


FOLDERS = (QueryFolder(ROOT, "to-kafka", ID), QueryFolder(ROOT, "to-pg", OTHER_ID))
QUERIES = ["to-kafka", "to-pg"]


def found(groups=(), topics=(), ledger=(), folders=FOLDERS, owners=None) -> Found:
    return Found("s3a://bucket/shop", folders, owners or {}, frozenset(groups), frozenset(topics), tuple(ledger),
                 "kafka:9092")


def actions(items) -> dict[tuple[str, str], str]:
    return {(item.kind, item.name): item.action for item in items}


LAG = contract.consumer_group("prod", "shop", "to-kafka")
LETTERS = writer_name("orders", ID)  # the sink query to-kafka counts orders' bad records
MARKER = writer_id("to-kafka", ID, 1)


@pytest.mark.parametrize("groups, want", [
    # the app's own groups: lag, dead-letter cursor, exactly-once marker (and the two transactional ids)
    ([LAG, LETTERS, MARKER], {("consumer group", LAG): DELETE, ("consumer group", LETTERS): DELETE,
                              ("transactional id", LETTERS): KEEP, ("consumer group", MARKER): DELETE,
                              ("transactional id", MARKER): KEEP}),
    # another namespace's app of the same name, an app whose name starts like this one's: not listed
    ([contract.consumer_group("dev", "shop", "to-kafka"), contract.consumer_group("prod", "shop.eu", "to-kafka"),
      MARKER + "x", MARKER + ".1", writer_name("orders", ID) + ".1", "streamapp.prod.shop"], {}),
    # writers and cursors of a checkpoint not found here: listed, kept (another app's, or a deleted checkpoint's)
    ([writer_id("to-kafka", "7f00", 1), writer_name("orders", "7f00")],
     {("consumer group", writer_id("to-kafka", "7f00", 1)): KEEP, ("consumer group", writer_name("orders", "7f00")): KEEP}),
])
def test_only_the_apps_own_groups_are_deleted(groups, want):
    items = plan(shop(), "prod", QUERIES, found(groups))
    assert {k: v for k, v in actions(items).items() if k[0] in ("consumer group", "transactional id")} == want


def test_transactional_ids_are_listed_as_kept_with_why():
    items = plan(shop(delivery="at-least-once"), "prod", QUERIES, found([LETTERS, MARKER]))
    kept = [item for item in items if item.kind == "transactional id"]
    assert [item.name for item in kept] == [MARKER]  # at-least-once dead letters open no transaction
    assert "transactional.id.expiration.ms" in kept[0].why


@pytest.mark.parametrize("choices, want", [
    (Choices(), {"shop.dlq": DELETE, "orders-out": KEEP}),
    (Choices(delete_sink_topics=True), {"shop.dlq": DELETE, "orders-out": DELETE}),
    (Choices(keep_dead_letter_topic=True), {"shop.dlq": KEEP, "orders-out": KEEP}),
])
def test_sink_topics_are_kept_unless_asked_and_the_input_is_never_touched(choices, want):
    items = plan(shop(), "prod", QUERIES, found(topics=["shop.dlq", "orders-out", "orders", "unrelated"]), choices)
    assert {item.name: item.action for item in items if item.kind.endswith("topic")} == want


def test_ledger_rows_go_with_this_checkpoints_ids_only():
    ledger = [LedgerRows("Postgres db:5432/app", "to-pg", OTHER_ID, 12, "pg"),
              LedgerRows("Postgres db:5432/app", "to-pg", "a-second-apps-checkpoint", 7, "pg"),
              LedgerRows("Postgres db:5432/app", "to-pg", "", 3, "pg")]
    items = [item for item in plan(shop(), "prod", QUERIES, found(ledger=ledger)) if item.kind == "ledger rows"]
    assert [(item.action, item.target) for item in items] == [
        (DELETE, ("pg", "to-pg", OTHER_ID)), (KEEP, ()), (KEEP, ())]
    assert "12 row(s)" in items[0].why and "not found here" in items[1].why


def test_the_checkpoint_is_deleted_and_the_sink_table_kept():
    items = plan(shop(), "prod", QUERIES, found())
    assert actions(items) == {("sink output", "orders"): KEEP, ("checkpoint", "s3a://bucket/shop"): DELETE}
    assert plan(shop(), "prod", QUERIES, Found(None))[-1].kind == "sink output"  # no checkpoint found: none listed


@pytest.mark.parametrize("owners, live", [
    ({}, 0),
    ({ROOT: {"owner": "pod-uid", "since": "2026-11-26T20:00:00+00:00", "released": True}}, 0),
    ({ROOT: {"owner": "pod-uid", "since": "2026-11-26T20:00:00+00:00", "released": False}}, 1),
])
def test_an_unreleased_owner_marker_means_a_driver_may_be_live(owners, live):
    reasons = live_drivers(owners)
    assert len(reasons) == live
    assert all("pod-uid" in r for r in reasons)


@pytest.mark.parametrize("text, want", [
    ('{"id":"6b0c1e2a"}\n', "6b0c1e2a"), ("", None), ("not json", None), ('{"id": 3}', None), (None, None),
])
def test_query_id_from_sparks_metadata_file(text, want):
    assert query_id(text) == want


def test_the_table_has_a_header_and_a_row_each():
    text = format_table(plan(shop(), "prod", QUERIES, found([LAG])))
    lines = text.splitlines()
    assert lines[0].split() == ["ACTION", "KIND", "NAME", "WHERE", "WHY"]
    assert len(lines) == 4 and LAG in lines[1]
