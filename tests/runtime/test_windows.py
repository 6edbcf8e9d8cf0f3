"""Tumbling, hopping and session windows with emit final; late records dropped and counted.

Expected output is computed here in plain Python with Kafka Streams' rule (which Spark's watermark
follows): a record counts unless its window already closed, i.e. window end <= the watermark, where
the watermark is the newest event time seen in earlier batches minus the allowed lateness.
"""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from streamapp_testkit.runtime import app, consume, late_dropped, produce, run_available_now, ts
from streamapp_testbed.kafka_admin import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]
WATERMARK = 10  # seconds


def spec(topic: str, outputs: dict[str, str]) -> dict:
    measures = {"n": "count(*)", "total": "sum(amount)"}
    windows = {"tumbling": {"type": "tumbling", "size": "10s"},
               "hopping": {"type": "hopping", "size": "20s", "advance": "10s"},
               "session": {"type": "session", "gap": "5s"}}
    return {
        "sources": [{"name": "events", "topic": topic, "schema": {"user": "string", "amount": "long", "ts": "timestamp"},
                     "eventTime": "ts", "watermark": f"{WATERMARK}s"}],
        "streams": [{"name": kind, "from": "events", "emit": "final",
                     "steps": [{"window": windows[kind]}, {"aggregate": {"groupBy": ["user"], "columns": measures}}]}
                    for kind in outputs],
        "sinks": [{"from": kind, "kafka": {"topic": topic_out, "key": "user"}} for kind, topic_out in outputs.items()],
    }


def fixed_windows(t: float, size: int, advance: int) -> list[tuple[int, int]]:
    first = int(t // advance) * advance
    starts = range(first - size + advance, first + advance, advance)
    return [(s, s + size) for s in starts if s <= t < s + size]


def expected_fixed(batches: list[list[dict]], size: int, advance: int) -> tuple[dict, int]:
    """Closed windows per (start, user) -> (count, total), and the late rows the aggregation drops."""
    acc: dict = defaultdict(lambda: [0, 0])
    watermark, newest, dropped = float("-inf"), float("-inf"), 0
    for batch in batches:
        late_groups = set()
        for e in batch:
            for start, end in fixed_windows(e["t"], size, advance):
                if end <= watermark:
                    late_groups.add((start, e["user"]))
                else:
                    acc[(start, e["user"])][0] += 1
                    acc[(start, e["user"])][1] += e["amount"]
            newest = max(newest, e["t"])
        dropped += len(late_groups)
        watermark = newest - WATERMARK
    closed = {k: tuple(v) for k, v in acc.items() if k[0] + size <= watermark}
    return closed, dropped


def expected_sessions(events: list[dict], gap: int) -> dict:
    by_user = defaultdict(list)
    for e in events:
        by_user[e["user"]].append(e)
    watermark = max(e["t"] for e in events) - WATERMARK
    out = {}
    for user, rows in by_user.items():
        rows.sort(key=lambda e: e["t"])
        start, end, n, total = None, None, 0, 0
        for e in rows + [None]:
            if e is not None and end is not None and e["t"] < end:
                end, n, total = max(end, e["t"] + gap), n + 1, total + e["amount"]
                continue
            if start is not None and end <= watermark:
                out[(start, user)] = (n, total, round(end, 3))
            if e is not None:
                start, end, n, total = e["t"], e["t"] + gap, 1, e["amount"]
    return out


def rows(records: list[dict], with_end: bool = False) -> dict:
    from datetime import datetime

    def secs(text: str) -> float:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() - 1767225600  # 2026-01-01

    out = {}
    for r in records:
        v = r["value"]
        assert r["key"] == v["user"]
        key = (round(secs(v["window_start"]), 3), v["user"])
        assert key not in out, f"window emitted twice: {key}"
        out[key] = (v["n"], v["total"], round(secs(v["window_end"]), 3)) if with_end else (v["n"], v["total"])
    return out


def events(rng: random.Random, users: list[str], start: float, end: float, count: int, disorder: float) -> list[dict]:
    out = [{"user": rng.choice(users), "amount": rng.randint(1, 9), "t": round(rng.uniform(start, end), 3)}
           for _ in range(count)]
    out.sort(key=lambda e: e["t"] + rng.uniform(0, disorder))
    return out


def test_tumbling_and_hopping_windows_with_late_records(kafka, spark, names, tmp_path):
    rng = random.Random(4)
    topic, tumbling, hopping = names("in"), names("tumbling"), names("hopping")
    create_topic(kafka.bootstrap, topic, partitions=1)
    first = events(rng, ["a", "b", "c"], 0, 95, 200, disorder=3)
    newest = max(e["t"] for e in first)  # watermark after the first run: newest - 10s
    # Second run: out of order but within the watermark (counted), far too late (dropped), and newer events.
    within = [{"user": u, "amount": 5, "t": newest - 3} for u in ("a", "b")]
    too_late = [{"user": u, "amount": 7, "t": t} for u, t in (("a", 12.5), ("b", 31.0), ("c", 31.5), ("a", 47.0))]
    later = events(rng, ["a", "b", "c"], newest, newest + 40, 60, disorder=0)
    second = within + too_late + later

    the_app = app(names("app"), spec(topic, {"tumbling": tumbling, "hopping": hopping}))
    as_records = lambda batch: [(e["user"], {"user": e["user"], "amount": e["amount"], "ts": ts(e["t"])}) for e in batch]
    produce(kafka.bootstrap, topic, as_records(first))
    run_available_now(spark, the_app, kafka, tmp_path)
    produce(kafka.bootstrap, topic, as_records(second))
    progress = run_available_now(spark, the_app, kafka, tmp_path)

    want_tumbling, late_tumbling = expected_fixed([first, second], 10, 10)
    want_hopping, late_hopping = expected_fixed([first, second], 20, 10)
    assert late_tumbling > 0 and late_hopping > 0
    assert rows(consume(kafka.bootstrap, tumbling, expect=len(want_tumbling))) == want_tumbling
    assert rows(consume(kafka.bootstrap, hopping, expect=len(want_hopping))) == want_hopping
    assert late_dropped(progress[f"tumbling-{tumbling}"]) == late_tumbling
    assert late_dropped(progress[f"hopping-{hopping}"]) == late_hopping


def test_session_windows_merge_per_user(kafka, spark, names, tmp_path):
    rng = random.Random(7)
    topic, out = names("in"), names("sessions")
    create_topic(kafka.bootstrap, topic, partitions=2)
    batch = []
    for user in ("a", "b", "c"):
        t = rng.uniform(0, 5)
        while t < 120:
            batch.append({"user": user, "amount": rng.randint(1, 9), "t": round(t, 3)})
            t += rng.choice([1, 2, 3, 4, 8, 12])  # gaps over 5s end a session
    batch.sort(key=lambda e: e["t"] + rng.uniform(0, 4))  # out of order: sessions merge as records arrive
    the_app = app(names("app"), spec(topic, {"session": out}))
    produce(kafka.bootstrap, topic, [(e["user"], {"user": e["user"], "amount": e["amount"], "ts": ts(e["t"])}) for e in batch])
    run_available_now(spark, the_app, kafka, tmp_path)
    want = expected_sessions(batch, gap=5)
    assert len(want) > 10
    assert rows(consume(kafka.bootstrap, out, expect=len(want)), with_end=True) == want


def test_a_typo_in_an_aggregate_function_names_the_aggregate_step_and_the_function(spark):
    from streamapp_runtime.compile.compiler import Compiler
    from streamapp_runtime.compile.steps import StepError

    the_app = app("typo", {
        "sources": [{"name": "events", "topic": "t", "schema": {"user": "string", "amount": "long", "ts": "timestamp"},
                     "eventTime": "ts", "watermark": "10s"}],
        "streams": [{"name": "totals", "from": "events", "emit": "final",
                     "steps": [{"filter": "amount > 0"}, {"window": {"type": "tumbling", "size": "1m"}},
                               {"aggregate": {"groupBy": ["user"], "columns": {"n": "cnt(*)", "total": "sum(amount)"}}}]}],
        "sinks": [{"from": "totals", "kafka": {"topic": "out"}}],
    })
    with pytest.raises(StepError) as refused:
        Compiler(spark, the_app, {"kafka.bootstrap.servers": "127.0.0.1:9"}).frame("totals")
    assert str(refused.value).startswith("spec.streams[0].steps[2].aggregate.columns.n: cnt() is not a Spark SQL function; "
                                         "did you mean count()"), str(refused.value)
