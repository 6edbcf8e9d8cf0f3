"""A second windowed aggregate over the rows of a first one (Spark's chained stateful operators).

Per-user counts per minute, then per 5 minutes: how many (user, minute) rows, the busiest user-minute
and the total. The expected rows are computed here in plain Python from the events.
"""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from streamapp_testkit.runtime import app, consume, late_dropped, produce, run_available_now, ts
from streamapp_testbed.kafka_admin import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]
WATERMARK = 20  # seconds


def spec(topic: str, minutes_out: str, fives_out: str) -> dict:
    return {
        "sources": [{"name": "clicks", "topic": topic, "schema": {"user": "string", "ts": "timestamp"},
                     "eventTime": "ts", "watermark": f"{WATERMARK}s", "maxOffsetsPerTrigger": 175}],
        "streams": [
            {"name": "per-minute", "from": "clicks", "emit": "final", "steps": [
                {"window": {"type": "tumbling", "size": "1m"}},
                {"aggregate": {"groupBy": ["user"], "columns": {"clicks": "count(*)"}}}]},
            {"name": "per-five", "from": "per-minute", "emit": "final", "steps": [
                {"filter": "clicks > 1"},  # record steps between the two aggregates keep the event time
                {"window": {"type": "tumbling", "size": "5m"}},
                {"aggregate": {"columns": {"user_minutes": "count(*)", "busiest": "max(clicks)",
                                           "clicks": "sum(clicks)"}}}]},
        ],
        "sinks": [{"from": "per-minute", "kafka": {"topic": minutes_out, "key": "user"}},
                  {"from": "per-five", "kafka": {"topic": fives_out}}],
    }


def expected(events: list[dict]) -> tuple[dict, dict]:
    """Closed 1-minute (start, user) -> clicks and closed 5-minute start -> (rows, busiest, clicks)."""
    watermark = max(e["t"] for e in events) - WATERMARK
    minutes: dict = defaultdict(int)
    for e in events:
        minutes[(int(e["t"] // 60) * 60, e["user"])] += 1
    closed_minutes = {k: n for k, n in minutes.items() if k[0] + 60 <= watermark}
    fives: dict = defaultdict(list)
    for (start, _user), n in closed_minutes.items():
        if n > 1:
            fives[start // 300 * 300].append(n)
    closed_fives = {start: (len(ns), max(ns), sum(ns)) for start, ns in fives.items() if start + 300 <= watermark}
    return closed_minutes, closed_fives


def test_a_window_over_the_rows_of_a_windowed_aggregate(kafka, spark, names, tmp_path):
    topic, minutes_out, fives_out = names("clicks"), names("minutes"), names("fives")
    create_topic(kafka.bootstrap, topic, partitions=1)
    rng = random.Random(11)
    # In event-time order on one partition: nothing is late, so every closed window is exact.
    events = sorted(({"user": f"u{rng.randrange(6)}", "t": rng.uniform(0, 1500)} for _ in range(700)),
                    key=lambda e: e["t"])
    produce(kafka.bootstrap, topic, [(e["user"], {"user": e["user"], "ts": ts(e["t"])}) for e in events])
    the_app = app(names("app"), spec(topic, minutes_out, fives_out))

    progress = run_available_now(spark, the_app, kafka, tmp_path)

    want_minutes, want_fives = expected(events)
    assert len(want_fives) >= 3
    got_minutes = consume(kafka.bootstrap, minutes_out, expect=len(want_minutes))
    assert {(r["value"]["window_start"], r["key"]): r["value"]["clicks"] for r in got_minutes} == {
        (ts(start).replace(".000000Z", ".000Z"), user): n for (start, user), n in want_minutes.items()}
    got_fives = consume(kafka.bootstrap, fives_out, expect=len(want_fives))
    assert len(got_fives) == len(want_fives)  # each 5-minute window written once
    assert {r["value"]["window_start"]: (r["value"]["user_minutes"], r["value"]["busiest"], r["value"]["clicks"])
            for r in got_fives} == {ts(start).replace(".000000Z", ".000Z"): v for start, v in want_fives.items()}
    assert all(r["value"]["window_end"] for r in got_fives)
    assert set(got_fives[0]["value"]) == {"window_start", "window_end", "user_minutes", "busiest", "clicks"}
    assert sum(late_dropped(p) for p in progress.values()) == 0
