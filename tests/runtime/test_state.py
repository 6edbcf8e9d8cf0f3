"""Stateful steps across runs on one checkpoint: table joins (updates, tombstones), stream joins, accumulate."""

from __future__ import annotations

import pytest

from rt_helpers import app, consume, produce, run_available_now, ts
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
