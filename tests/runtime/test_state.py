"""Stateful steps across runs on one checkpoint: table joins (updates, tombstones), stream joins, accumulate."""

from __future__ import annotations

import json

import pytest

from streamapp_testkit.runtime import app, consume, produce, run_available_now, ts
from streamapp_testbed.kafka_admin import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_table_join_sees_updates_and_tombstones(kafka, spark, names, tmp_path):
    orders, profiles, out = names("orders"), names("profiles"), names("out")
    for topic in (orders, profiles):
        create_topic(kafka.bootstrap, topic, partitions=1)
    the_app = app(names("app"), {
        "sources": [{"name": "orders", "topic": orders, "schema": {"order_id": "string", "user_id": "string",
                                                                   "amount": "double", "ts": "timestamp"}, "eventTime": "ts"}],
        "tables": [{"name": "profiles", "topic": profiles, "key": "user_id",
                    "schema": {"user_id": "string", "tier": "string", "amount": "double"}}],
        "streams": [{"name": "enriched", "from": "orders", "steps": [{"join": {"table": "profiles", "key": "user_id", "type": "left"}}]},
                    {"name": "known", "from": "orders", "steps": [{"join": {"table": "profiles", "key": "user_id"}}]}],
        "sinks": [{"from": "enriched", "kafka": {"topic": out, "key": "order_id"}},
                  {"from": "known", "kafka": {"topic": out + "-inner", "key": "order_id"}}],
    })
    order = lambda i, user: (f"o{i}", {"order_id": f"o{i}", "user_id": user, "amount": float(i), "ts": ts(i)})
    # Run 1: u1 gold, u2 silver; orders of u1, u2 and an unknown u3.
    produce(kafka.bootstrap, profiles, [("u1", {"user_id": "u1", "tier": "gold", "amount": 1.0}),
                                        ("u2", {"user_id": "u2", "tier": "silver", "amount": 2.0})])
    produce(kafka.bootstrap, orders, [order(1, "u1"), order(2, "u2"), order(3, "u3")])
    run_available_now(spark, the_app, kafka, tmp_path)
    # Run 2: u1 upgraded, u2 deleted (tombstone), u3 appears; then more orders.
    produce(kafka.bootstrap, profiles, [("u1", {"user_id": "u1", "tier": "platinum", "amount": 9.0}), ("u2", None),
                                        ("u3", {"user_id": "u3", "tier": "new", "amount": 3.0})])
    run_available_now(spark, the_app, kafka, tmp_path)
    produce(kafka.bootstrap, orders, [order(4, "u1"), order(5, "u2"), order(6, "u3")])
    run_available_now(spark, the_app, kafka, tmp_path)

    want = {"o1": ("gold", 1.0), "o2": ("silver", 2.0), "o3": (None, None),
            "o4": ("platinum", 9.0), "o5": (None, None), "o6": ("new", 3.0)}
    got = {r["key"]: r["value"] for r in consume(kafka.bootstrap, out, expect=len(want))}
    assert {k: (v["tier"], v["profiles_amount"]) for k, v in got.items()} == want
    assert all(v["amount"] == float(k[1:]) for k, v in got.items())  # the stream's own amount is kept
    inner = {r["key"]: r["value"]["tier"] for r in consume(kafka.bootstrap, out + "-inner", expect=4)}
    assert inner == {k: v[0] for k, v in want.items() if v[0] is not None}


def test_stream_join_inner_and_left_within_bound(kafka, spark, names, tmp_path):
    searches, clicks, inner_out, left_out = names("searches"), names("clicks"), names("inner"), names("left")
    for topic in (searches, clicks):
        create_topic(kafka.bootstrap, topic, partitions=1)
    the_app = app(names("app"), {
        "sources": [
            {"name": "searches", "topic": searches, "schema": {"search_id": "string", "query": "string", "ts": "timestamp"},
             "eventTime": "ts", "watermark": "10s"},
            {"name": "clicks", "topic": clicks, "schema": {"search_id": "string", "url": "string", "ts": "timestamp"},
             "eventTime": "ts", "watermark": "10s"}],
        "streams": [
            {"name": "matched", "from": "searches", "steps": [{"join": {"stream": "clicks", "using": ["search_id"], "within": "5s"}}]},
            {"name": "all", "from": "searches", "steps": [{"join": {"stream": "clicks", "using": ["search_id"], "within": "5s", "type": "left"}}]}],
        "sinks": [{"from": "matched", "kafka": {"topic": inner_out, "key": "search_id"}},
                  {"from": "all", "kafka": {"topic": left_out, "key": "search_id"}}],
    })
    search_times = {f"s{i}": i * 10.0 for i in range(10)}
    click_offsets = {"s0": 1, "s1": 4.5, "s2": 6, "s3": -3, "s4": -7, "s5": 2, "s7": 20}  # s6, s8, s9: no click
    produce(kafka.bootstrap, searches, [(s, {"search_id": s, "query": f"q{s}", "ts": ts(t)}) for s, t in search_times.items()])
    produce(kafka.bootstrap, clicks, [(s, {"search_id": s, "url": f"u{s}", "ts": ts(search_times[s] + d)}) for s, d in click_offsets.items()])
    run_available_now(spark, the_app, kafka, tmp_path)
    # Move both watermarks far past every bound so left-join rows without a match come out.
    produce(kafka.bootstrap, searches, [("late", {"search_id": "zz", "query": "q", "ts": ts(500)})])
    produce(kafka.bootstrap, clicks, [("late", {"search_id": "zy", "url": "u", "ts": ts(500)})])
    run_available_now(spark, the_app, kafka, tmp_path)

    matched = {s for s, d in click_offsets.items() if abs(d) <= 5}
    got_inner = consume(kafka.bootstrap, inner_out, expect=len(matched))
    assert {r["key"]: r["value"]["url"] for r in got_inner} == {s: f"u{s}" for s in matched}
    assert all(r["value"]["clicks_ts"] is not None and r["value"]["ts"] is not None for r in got_inner)
    got_left = consume(kafka.bootstrap, left_out, expect=len(search_times))
    assert {r["key"]: r["value"]["url"] for r in got_left} == {s: (f"u{s}" if s in matched else None) for s in search_times}


def test_accumulate_carries_running_totals_across_restarts(kafka, spark, names, tmp_path):
    topic, out = names("invoices"), names("loyalty")
    create_topic(kafka.bootstrap, topic, partitions=2)
    the_app = app(names("app"), {
        "sources": [{"name": "invoices", "topic": topic, "schema": {"invoice": "string", "card": "string", "amount": "double",
                                                                    "ts": "timestamp"}, "eventTime": "ts", "watermark": "1m"}],
        "streams": [{"name": "loyalty", "from": "invoices", "steps": [
            {"keyBy": "card"},
            {"withColumns": {"points": "round(amount * 0.1, 2)"}},
            {"accumulate": {"key": ["card"], "columns": {"total_points": "sum(points)", "invoices": "count(invoice)",
                                                         "biggest": "max(amount)", "first_invoice": "first(invoice)"}}}]}],
        "sinks": [{"from": "loyalty", "kafka": {"topic": out, "key": "invoice"}}],
    })
    cards = ["c1", "c2", "c3"]
    invoices = [{"invoice": f"i{i:03d}", "card": cards[i % 3 if i % 4 else 0], "amount": float(10 + (i * 7) % 40), "ts": ts(i)}
                for i in range(30)]
    # Keyed by card, so each card's invoices stay in order in one partition.
    produce(kafka.bootstrap, topic, [(v["card"], v) for v in invoices[:18]])
    run_available_now(spark, the_app, kafka, tmp_path)
    produce(kafka.bootstrap, topic, [(v["card"], v) for v in invoices[18:]])
    run_available_now(spark, the_app, kafka, tmp_path)

    want, running = {}, {}
    for v in invoices:
        total, count, biggest, first = running.get(v["card"], (0.0, 0, None, None))
        total += round(v["amount"] * 0.1, 2)
        biggest = v["amount"] if biggest is None else max(biggest, v["amount"])
        running[v["card"]] = (total, count + 1, biggest, first or v["invoice"])
        want[v["invoice"]] = (round(total, 6), count + 1, biggest, first or v["invoice"])
    got = consume(kafka.bootstrap, out, expect=len(invoices))
    assert {r["key"]: (round(r["value"]["total_points"], 6), r["value"]["invoices"], r["value"]["biggest"],
                       r["value"]["first_invoice"]) for r in got} == want


def recorded(checkpoint) -> dict:
    return json.loads((checkpoint / "streamapp.json").read_text())


def state_operators(progress: dict) -> set[str]:
    return {o["operatorName"] for batches in progress.values() for p in batches for o in p.get("stateOperators") or []}


def test_a_checkpoint_of_the_pandas_state_api_keeps_it_and_its_state(kafka, spark, names, tmp_path):
    """A checkpoint the previous runtime wrote (applyInPandasWithState; streamapp.json without a state
    function) goes on with that API and its state over a second run: a table join and accumulate,
    one query each (that API allows one state function a query). A new checkpoint records and runs
    transformWithState, with the same rows."""
    invoices, cards, tiers, totals = names("invoices"), names("cards"), names("tiers"), names("totals")
    for topic in (invoices, cards, tiers, totals):  # one partition each: the output in the order written
        create_topic(kafka.bootstrap, topic, partitions=1)
    the_app = app(names("app"), {
        "sources": [{"name": "invoices", "topic": invoices, "schema": {"invoice": "string", "card": "string",
                                                                      "amount": "double", "ts": "timestamp"}}],
        "tables": [{"name": "cards", "topic": cards, "key": "card", "schema": {"card": "string", "tier": "string"}}],
        "streams": [{"name": "tiers", "from": "invoices", "steps": [{"join": {"table": "cards", "key": "card", "type": "left"}}]},
                    {"name": "totals", "from": "invoices", "steps": [
                        {"accumulate": {"key": ["card"], "columns": {"total": "sum(amount)", "n": "count(invoice)"}}}]}],
        "sinks": [{"from": "tiers", "kafka": {"topic": tiers, "key": "invoice"}},
                  {"from": "totals", "kafka": {"topic": totals, "key": "invoice"}}],
    })
    invoice = lambda i: (f"i{i:02d}", {"invoice": f"i{i:02d}", "card": f"c{i % 2}", "amount": float(i), "ts": ts(i)})
    produce(kafka.bootstrap, cards, [("c0", {"card": "c0", "tier": "gold"}), ("c1", {"card": "c1", "tier": "silver"})])
    produce(kafka.bootstrap, invoices, [invoice(i) for i in range(10)])
    old, new = tmp_path / "old", tmp_path / "new"
    first = run_available_now(spark, the_app, kafka, old, spark_conf={"spark.streamapp.stateFunction": "applyInPandasWithState"})
    assert recorded(old)["stateFunction"] == "applyInPandasWithState"
    # as the previous runtime left it: it recorded the shuffle partitions only
    (old / "streamapp.json").write_text(json.dumps({k: v for k, v in recorded(old).items() if k != "stateFunction"}))
    produce(kafka.bootstrap, cards, [("c0", {"card": "c0", "tier": "platinum"})])
    produce(kafka.bootstrap, invoices, [invoice(i) for i in range(10, 20)])
    second = run_available_now(spark, the_app, kafka, old)
    assert recorded(old)["stateFunction"] == "applyInPandasWithState"
    assert state_operators(first) == state_operators(second) == {"applyInPandasWithState"}

    want_tiers, want_totals, running = {}, {}, {}
    for i in range(20):
        card = f"c{i % 2}"
        want_tiers[f"i{i:02d}"] = {"c0": "gold" if i < 10 else "platinum", "c1": "silver"}[card]
        total, n = running.get(card, (0.0, 0))
        running[card] = want_totals[f"i{i:02d}"] = (total + i, n + 1)

    def written(got: list[dict]) -> tuple[dict, dict]:
        return ({r["key"]: r["value"]["tier"] for r in got if "tier" in r["value"]},
                {r["key"]: (r["value"]["total"], r["value"]["n"]) for r in got if "total" in r["value"]})

    def read(skip: int) -> list[dict]:
        return [*consume(kafka.bootstrap, tiers, expect=skip + 20)[skip:], *consume(kafka.bootstrap, totals, expect=skip + 20)[skip:]]

    assert written(read(0)) == (want_tiers, want_totals)
    # the same input on a new checkpoint, in one run (both topics in Kafka record-time order): the same rows
    fresh = run_available_now(spark, the_app, kafka, new)
    assert recorded(new)["stateFunction"] == "transformWithState"
    assert state_operators(fresh) == {"transformWithStateInPySparkExec"}
    assert written(read(20)) == (want_tiers, want_totals)


def test_windows_after_a_table_join_and_accumulate_close_with_the_sources_watermark(kafka, spark, names, tmp_path):
    """transformWithState hands the query's watermark on: the event-time column after it is marked as
    carrying it (packing.rewatermark), so a window downstream closes as the source's watermark passes,
    and drops what is late for it, while accumulate itself counts every record, late ones too."""
    clicks, users, out = names("clicks"), names("users"), names("out")
    for topic in (clicks, users):
        create_topic(kafka.bootstrap, topic, partitions=1)
    the_app = app(names("app"), {
        "sources": [{"name": "clicks", "topic": clicks, "schema": {"user": "string", "ts": "timestamp"},
                     "eventTime": "ts", "watermark": "10s"}],
        "tables": [{"name": "users", "topic": users, "key": "user", "schema": {"user": "string", "region": "string"}}],
        "streams": [{"name": "regions", "from": "clicks", "emit": "final", "steps": [
            {"join": {"table": "users", "key": "user", "type": "left"}},
            {"accumulate": {"key": ["user"], "columns": {"nth": "count(ts)"}}},
            {"window": {"type": "tumbling", "size": "1m"}},
            {"aggregate": {"groupBy": ["region"], "columns": {"n": "count(*)", "most": "max(nth)"}}}]}],
        "sinks": [{"from": "regions", "kafka": {"topic": out, "key": "region"}}],
    })
    click = lambda user, t: (user, {"user": user, "ts": ts(t)})
    produce(kafka.bootstrap, users, [("u1", {"user": "u1", "region": "eu"}), ("u2", {"user": "u2", "region": "us"})])
    produce(kafka.bootstrap, clicks, [click("u1", 0), click("u1", 10), click("u2", 20), click("u1", 30), click("u2", 50),
                                      click("u2", 200)])  # the watermark passes 60 s: [0, 60) closes
    first = run_available_now(spark, the_app, kafka, tmp_path)
    assert state_operators(first) >= {"transformWithStateInPySparkExec"}
    # u1 at 5 s is late for the window, not for accumulate: u1's count at 400 s is 5
    produce(kafka.bootstrap, clicks, [click("u1", 5), click("u1", 400), click("u2", 500)])
    run_available_now(spark, the_app, kafka, tmp_path)

    got = {}
    for r in consume(kafka.bootstrap, out, expect=4):
        key = (r["value"]["window_start"][11:19], r["key"])
        assert key not in got, f"window emitted twice: {key}"
        got[key] = (r["value"]["n"], r["value"]["most"])
    assert got == {("00:00:00", "eu"): (3, 3), ("00:00:00", "us"): (2, 2), ("00:03:00", "us"): (1, 3),
                   ("00:06:00", "eu"): (1, 5)}
