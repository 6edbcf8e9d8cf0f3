"""The step keys are declared once (streamapp_api.steps.STEP_KEYS, the fields of Step), and both step
tables have a row for each: what the API checks and tracks per step (flow.STEP_FLOW) and how the
runtime compiles it (compile/steps STEP_COMPILERS). Importing the runtime's table needs pyspark
installed, not a Spark session."""

from __future__ import annotations

import pytest

from streamapp_api import InvalidSpec, load
from streamapp_api.flow import STEP_FLOW
from streamapp_api.realtime import STATELESS_STEPS
from streamapp_api.steps import SHUFFLING_STEPS, STATEFUL_STEPS, STEP_KEYS, Step
from streamapp_runtime.compile.steps import STEP_COMPILERS

pytestmark = pytest.mark.unit


def test_step_keys_are_the_fields_of_step():
    assert STEP_KEYS == tuple(field.alias or name for name, field in Step.model_fields.items())


@pytest.mark.parametrize("table", [STEP_FLOW, STEP_COMPILERS], ids=["api STEP_FLOW", "runtime STEP_COMPILERS"])
def test_a_step_table_has_a_row_for_every_step_key_and_no_other(table):
    assert sorted(table) == sorted(STEP_KEYS)


@pytest.mark.parametrize("kinds", [STATEFUL_STEPS, SHUFFLING_STEPS, STATELESS_STEPS])
def test_lists_of_step_kinds_name_declared_keys(kinds):
    assert set(kinds) <= set(STEP_KEYS)


def test_a_window_without_an_aggregate_after_it_is_refused_before_the_runtime_sees_it():
    """The runtime compiles a window together with the aggregate after it and does not check that one
    follows: loading the app (as `streamapp run` and the driver do) is where it is refused."""
    document = {
        "apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": "windows"},
        "spec": {
            "kafka": {"bootstrapServers": "kafka:9092"},
            "sources": [{"name": "events", "topic": "t", "schema": {"user": "string", "ts": "timestamp"},
                         "eventTime": "ts", "watermark": "10s"}],
            "streams": [{"name": "counts", "from": "events",
                         "steps": [{"window": {"type": "tumbling", "size": "1m"}}, {"filter": "user IS NOT NULL"}]}],
            "sinks": [{"from": "counts", "kafka": {"topic": "out"}}],
        },
    }
    with pytest.raises(InvalidSpec) as refused:
        load(document)
    assert any(issue.path == "spec.streams[0].steps[0].window" and "followed directly by an aggregate" in issue.message
               for issue in refused.value.issues), refused.value.issues
