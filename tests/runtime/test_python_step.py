"""The python step on local Spark and the test bed's Kafka: the author's function from a ConfigMap's
directory, its column filtered on and aggregated, and a record it raises on dead-lettered with the
Python error while the others flow on. One driver run (each costs Spark's start-up)."""

from __future__ import annotations

import textwrap

import pytest

from streamapp_api import contract
from streamapp_testbed.kafka_admin import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_python_step_feeds_a_filter_and_an_aggregate_and_dead_letters_what_it_raises_on(
        kafka, spark, names, tmp_path, monkeypatch):
    from streamapp_testkit.runtime import app, consume, produce, run_available_now

    orders, out, dlq = names("orders"), names("out"), names("dlq")
    for topic in (orders, out, dlq):
        create_topic(kafka.bootstrap, topic, partitions=1)
    # As the operator mounts spec.userCode's ConfigMap "pricing": its key pricing_<unique>.py a file of
    # that directory (a module name of its own: the session's Python workers outlive the test).
    module = f"pricing_{names('m').replace('-', '_')}"
    code = tmp_path / "user-code"
    (code / "pricing").mkdir(parents=True)
    (code / "pricing" / f"{module}.py").write_text(textwrap.dedent("""
        import pandas as pd

        def tag(orders: pd.DataFrame) -> pd.DataFrame:
            if (orders["amount"] < 0).any():
                raise ValueError(f"negative amount: {orders['amount'].min()}")
            return orders.assign(big=orders["amount"] >= 10, cents=orders["amount"] * 100)
        """))
    monkeypatch.setenv(contract.ENV_USER_CODE_DIR, str(code))
    produce(kafka.bootstrap, orders, [
        ("o1", {"user": "ann", "amount": 12}),
        ("o2", {"user": "ann", "amount": 3}),   # not big: filtered out
        ("o3", {"user": "bob", "amount": -5}),  # the function raises: dead-lettered
        ("o4", {"user": "bob", "amount": 20}),
        ("o5", {"user": "ann", "amount": 30}),
    ])
    the_app = app(names("app"), {
        "userCode": {"configMaps": ["pricing"]},
        "sources": [{"name": "orders", "topic": orders, "schema": {"user": "string", "amount": "long"}}],
        "streams": [{"name": "totals", "from": "orders", "steps": [
            {"python": {"module": module, "function": "tag",
                        "schema": {"user": "string", "amount": "long", "big": "boolean", "cents": "long"}}},
            {"filter": "big"},
            {"aggregate": {"groupBy": ["user"], "columns": {"orders": "count(*)", "cents": "sum(cents)"}}},
        ]}],
        "sinks": [{"from": "totals", "kafka": {"topic": out, "key": "user"}}],
        "deadLetter": {"topic": dlq},
    })

    run_available_now(spark, the_app, kafka, tmp_path / "checkpoint")

    totals = {r["key"]: r["value"] for r in consume(kafka.bootstrap, out, to_end=True)}
    assert totals == {"ann": {"user": "ann", "orders": 2, "cents": 4200},
                      "bob": {"user": "bob", "orders": 1, "cents": 2000}}
    letters = consume(kafka.bootstrap, dlq, to_end=True)
    assert len(letters) == 1
    letter = letters[0]
    assert (letter["key"], letter["value"]) == ("o3", {"user": "bob", "amount": -5})
    assert letter["headers"]["streamapp.error"] == "ValueError: negative amount: -5"
    assert letter["headers"]["streamapp.step"] == "spec.streams[0].steps[0]"
    assert (letter["headers"]["streamapp.stream"], letter["headers"]["streamapp.topic"],
            letter["headers"]["streamapp.offset"]) == ("totals", orders, "2")
