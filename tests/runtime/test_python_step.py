"""User code on local Spark and the test bed's Kafka: a python step and two udfs from a ConfigMap's
directory, the step's column filtered on, a udf in the filter and another inside an aggregate, and
records they raise on dead-lettered with the Python error while the others flow on. One driver run
(each costs Spark's start-up)."""

from __future__ import annotations

import textwrap

import pytest

from streamapp_api import contract
from streamapp_testbed.kafka_admin import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_user_code_feeds_a_filter_and_an_aggregate_and_dead_letters_what_it_raises_on(
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

        def blocked(user: str) -> bool:
            if user == "cat":
                raise LookupError(f"{user} is not in the customer list")
            return user == "dan"

        def band(cents: int) -> str:
            return "large" if cents >= 2500 else "small"
        """))
    monkeypatch.setenv(contract.ENV_USER_CODE_DIR, str(code))
    produce(kafka.bootstrap, orders, [
        ("o1", {"user": "ann", "amount": 12}),
        ("o2", {"user": "ann", "amount": 3}),   # not big: filtered out
        ("o3", {"user": "bob", "amount": -5}),  # the function raises: dead-lettered
        ("o4", {"user": "bob", "amount": 20}),
        ("o5", {"user": "ann", "amount": 30}),
        ("o6", {"user": "cat", "amount": 50}),  # the udf raises: dead-lettered, null drops it in the filter
        ("o7", {"user": "dan", "amount": 70}),  # blocked
    ])
    the_app = app(names("app"), {
        "userCode": {"configMaps": ["pricing"]},
        "udfs": [{"name": "blocked", "module": module, "function": "blocked", "returns": "boolean"},
                 {"name": "band", "module": module, "function": "band", "returns": "string"}],
        "sources": [{"name": "orders", "topic": orders, "schema": {"user": "string", "amount": "long"}}],
        "streams": [{"name": "totals", "from": "orders", "steps": [
            {"python": {"module": module, "function": "tag",
                        "schema": {"user": "string", "amount": "long", "big": "boolean", "cents": "long"}}},
            {"filter": "big AND NOT blocked(user)"},
            {"aggregate": {"groupBy": ["user"], "columns": {"orders": "count(*)", "cents": "sum(cents)",
                                                             "large": "count_if(band(cents) = 'large')"}}},
        ]}],
        "sinks": [{"from": "totals", "kafka": {"topic": out, "key": "user"}}],
        "deadLetter": {"topic": dlq},
    })

    seen = []
    run_available_now(spark, the_app, kafka, tmp_path / "checkpoint", metrics=seen)

    totals = {r["key"]: r["value"] for r in consume(kafka.bootstrap, out, to_end=True)}
    assert totals == {"ann": {"user": "ann", "orders": 2, "cents": 4200, "large": 1},
                      "bob": {"user": "bob", "orders": 1, "cents": 2000, "large": 0}}
    letters = consume(kafka.bootstrap, dlq, to_end=True)
    by_udf = [r for r in letters if "streamapp.udf" in r["headers"]]
    assert by_udf and all(r["value"] == {"udf": "blocked", "arguments": ["cat"]} for r in by_udf)  # at least once
    assert by_udf[0]["headers"]["streamapp.error"] == "LookupError: cat is not in the customer list"
    by_step = [r for r in letters if "streamapp.step" in r["headers"]]
    assert len(by_step) == 1
    letter = by_step[0]
    assert (letter["key"], letter["value"]) == ("o3", {"user": "bob", "amount": -5})
    assert letter["headers"]["streamapp.error"] == "ValueError: negative amount: -5"
    assert letter["headers"]["streamapp.step"] == "spec.streams[0].steps[0]"
    assert (letter["headers"]["streamapp.stream"], letter["headers"]["streamapp.topic"],
            letter["headers"]["streamapp.offset"]) == ("totals", orders, "2")
    # counted as the dead-letter topic holds them, per step or udf (the path in the spec is the series' source)
    counted = {where: seen[0].registry.get_sample_value("streamapp_dead_letter_records_total",
                                                        {"app": the_app.metadata.name, "source": where})
               for where in ("spec.streams[0].steps[0]", "spec.udfs[0]")}
    assert counted == {"spec.streams[0].steps[0]": 1, "spec.udfs[0]": len(by_udf)}, counted
