"""`streamapp state`: a stream's aggregate state read from the checkpoint, checked against plain Python.

A click-sessions-like app (1-minute tumbling windows, 30s watermark, emit final) runs with
availableNow on generated clicks; the window holding the newest events is still open, so its
counts live only in the state store. `streamapp state` must show exactly what Python computes.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict

import pytest
import yaml

from streamapp_testkit.runtime import app, produce, run_available_now, ts
from streamapp_api.cli import main
from streamapp_testbed.kafka_admin import create_topic

WATERMARK, SIZE = 30, 60


def spec(topic: str, out: str) -> dict:
    return {
        "sources": [{"name": "clicks", "topic": topic, "format": "json", "eventTime": "ts", "watermark": f"{WATERMARK}s",
                     "schema": {"uuid": "string", "session_id": "string", "event": "string", "time_spent": "long",
                                "ts": "timestamp"}}],
        "streams": [
            {"name": "sessions", "from": "clicks", "emit": "final", "steps": [
                {"filter": "event IN ('click', 'page_view')"},
                {"window": {"type": "tumbling", "size": "1m"}},
                {"aggregate": {"groupBy": ["session_id", "uuid"], "columns": {
                    "clicks": "count_if(event = 'click')", "page_views": "count_if(event = 'page_view')",
                    "time_spent": "sum(time_spent)", "avg_spent": "avg(time_spent)"}}}]},
            {"name": "plain", "from": "clicks", "steps": [{"select": ["session_id", "ts"]}]}],
        "sinks": [{"from": "sessions", "kafka": {"topic": out, "key": "session_id"}}],
    }


def expected_open(events: list[dict]) -> dict:
    """(session_id, uuid, window start) -> (clicks, page_views, time_spent, count) for windows still open."""
    watermark = max(e["t"] for e in events) - WATERMARK
    acc = defaultdict(lambda: [0, 0, 0, 0])
    for e in events:
        if e["event"] not in ("click", "page_view"):
            continue
        a = acc[(e["session_id"], e["uuid"], int(e["t"] // SIZE) * SIZE)]
        a[0 if e["event"] == "click" else 1] += 1
        a[2] += e["time_spent"]
        a[3] += 1
    return {k: tuple(v) for k, v in acc.items() if k[2] + SIZE > watermark}


@pytest.mark.integration
@pytest.mark.slow
def test_state_of_open_window_matches_python(kafka, spark, names, tmp_path, capsys):
    rng = random.Random(17)
    topic = names("clicks")
    create_topic(kafka.bootstrap, topic, partitions=2)
    events = [{"uuid": f"u-{s % 3}", "session_id": f"s-{s}", "event": rng.choice(["click", "click", "page_view", "scroll"]),
               "time_spent": rng.randint(1, 50), "t": round(rng.uniform(0, 150), 3)} for s in range(20) for _ in range(12)]
    events.append({"uuid": "u-2", "session_id": "s-17", "event": "click", "time_spent": 7, "t": 150.0})  # newest
    produce(kafka.bootstrap, topic, [(e["session_id"], {**{k: v for k, v in e.items() if k != "t"}, "ts": ts(e["t"])})
                                     for e in events])
    the_app = app(names("app"), spec(topic, names("out")), bootstrap=kafka.bootstrap)
    run_available_now(spark, the_app, kafka, tmp_path / "ck")
    manifest = tmp_path / "app.yaml"
    manifest.write_text(yaml.safe_dump(the_app.model_dump(by_alias=True, exclude_none=True, mode="json"), sort_keys=False))

    base = ["state", str(manifest), "--checkpoint", str(tmp_path / "ck"), "--stream", "sessions"]
    assert main(base + ["--key", "session_id=s-17", "-o", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = {k: v for k, v in expected_open(events).items() if k[0] == "s-17"}
    assert want and got["stream"] == "sessions" and got["keys"] == {"session_id": "s-17"}
    start = lambda s: ts(s).replace(".000000Z", "Z")
    assert {(r["session_id"], r["uuid"], r["window_start"], r["window_end"]): (
        r["clicks"], r["page_views"], r["time_spent"], r["avg_spent.count"], r["avg_spent.sum"]) for r in got["rows"]} == {
        (s, u, start(w), start(w + SIZE)): (c, p, t, n, float(t)) for (s, u, w), (c, p, t, n) in want.items()}

    assert main(base + ["--key", "session_id=s-17"]) == 0  # the table form names the columns
    table = capsys.readouterr().out
    assert "session_id  uuid" in table and "clicks" in table and "s-17" in table

    assert main(base[:-1] + ["nope"]) == 2
    assert "stream 'nope'" in capsys.readouterr().err
    assert main(base[:-1] + ["plain"]) == 2
    assert "stream 'plain' keeps no aggregate state" in capsys.readouterr().err
    assert main(["state", str(manifest), "--checkpoint", str(tmp_path / "empty"), "--stream", "sessions"]) == 2
    assert "no committed batch yet" in capsys.readouterr().err
