"""streamapp_api.resolve: the pipeline resolved once, what the runtime compiles from (emit mode per
query, lineage, the event time after each step) and what `streamapp validate` reports from."""

from __future__ import annotations

import pytest

from streamapp_api import StreamApp, load, resolve

from test_api_semantic import app_with

pytestmark = pytest.mark.unit


def test_each_step_gets_the_flow_after_it_and_the_event_time_follows_selects():
    app = load(app_with([{"filter": "amount > 0"}, {"select": ["user", "amount"]}, {"withColumns": {"x": "1"}}]))
    after = resolve(app).steps["out"]
    assert len(after) == 3
    assert [f.event_time for f in after] == ["ts", None, None], "a select without ts drops the event time"
    assert {"user", "amount"} <= after[1].columns and not {"ts", "event"} & after[1].columns


def test_emit_mode_per_query_and_a_source_written_as_it_comes():
    windowed = load(app_with([{"window": {"type": "tumbling", "size": "1m"}}, {"aggregate": {"groupBy": ["user"], "columns": {"n": "count(*)"}}}]))
    running = load(app_with([{"aggregate": {"groupBy": ["user"], "columns": {"n": "count(*)"}}}]))
    assert resolve(windowed).emit("out") == "final"
    assert resolve(running).emit("out") == "updates"
    assert resolve(windowed).emit("clicks") == "final"


def test_lineage_names_sources_tables_and_streams_in_dependency_order():
    doc = app_with([{"join": {"table": "profiles", "key": "user"}}])
    doc["spec"]["streams"].append({"name": "both", "from": "views", "steps": [
        {"join": {"stream": "out", "using": ["user"], "within": "1m"}}]})
    doc["spec"]["sinks"].append({"from": "both", "kafka": {"topic": "both"}})
    lineage = resolve(load(doc)).lineage("both")
    assert (lineage.sources, lineage.tables, lineage.streams) == (("views", "clicks"), ("profiles",), ("out", "both"))
    assert lineage.stream_joins == ("spec.streams[1].steps[0].join",)


def test_what_cannot_be_resolved_is_reported_not_guessed():
    doc = app_with([])
    doc["spec"]["streams"][0]["from"] = "nowhere"
    resolved = resolve(StreamApp.model_validate(doc))  # parsed, not checked: load() would refuse it
    assert "out" not in resolved.flows
    assert [i.path for i in resolved.issues] == ["spec.streams[0].from"]
