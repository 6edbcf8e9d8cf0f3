"""`--available-now` on an app with a `ttl` ends by itself once its records are read: with a ttl Spark
asks for an empty batch at every trigger, for ever. (Stopping on SIGTERM is tested with the restarts,
tests/runtime/test_restart.py, and real-time mode, tests/runtime/test_realtime.py.)"""

from __future__ import annotations

import threading

import pytest

from streamapp_testkit.runtime import app, consume, produce, ts
from streamapp_runtime.run import runner
from streamapp_runtime.run.settings import Settings
from streamapp_testbed.kafka_admin import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_available_now_with_a_ttl_ends_by_itself_with_every_record(kafka, spark, names, tmp_path):
    topic, out = names("invoices"), names("totals")
    create_topic(kafka.bootstrap, topic, partitions=1)
    the_app = app(names("app"), {
        "sources": [{"name": "invoices", "topic": topic, "schema": {"invoice": "string", "card": "string", "amount": "double",
                                                                    "ts": "timestamp"}}],
        "streams": [{"name": "totals", "from": "invoices", "steps": [
            {"accumulate": {"key": ["card"], "columns": {"total": "sum(amount)"}, "ttl": "1h"}}]}],
        "sinks": [{"from": "totals", "kafka": {"topic": out, "key": "invoice"}}],
    })
    invoices = [{"invoice": f"i{i:02d}", "card": f"c{i % 3}", "amount": float(i), "ts": ts(i)} for i in range(20)]
    produce(kafka.bootstrap, topic, [(v["card"], v) for v in invoices])
    settings = Settings(checkpoint_root=str(tmp_path), kafka_override=kafka.bootstrap, available_now=True, metrics_port=None)
    running = runner.start(spark, the_app, settings, quiet=True, wait_for_topics=False)
    result: list[int] = []
    supervisor = threading.Thread(target=lambda: result.append(runner.supervise(spark, running)), daemon=True)
    supervisor.start()
    supervisor.join(120)
    if supervisor.is_alive():  # what a ttl did before: an empty batch at every trigger, for ever
        running.stop_requested.set()
        supervisor.join(120)
        pytest.fail("the available-now run did not end by itself within 120 s")
    assert result == [0]

    written = consume(kafka.bootstrap, out, expect=len(invoices))
    last = {}
    for r in written:
        last[r["value"]["card"]] = max(last.get(r["value"]["card"], 0.0), r["value"]["total"])
    assert sorted(r["key"] for r in written) == sorted(v["invoice"] for v in invoices)
    assert last == {f"c{c}": float(sum(range(c, 20, 3))) for c in range(3)}
