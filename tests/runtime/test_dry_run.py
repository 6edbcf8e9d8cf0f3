"""`streamapp run --dry-run`: every query's DataFrame compiled on real Spark, none started, no Kafka
needed; a bad expression comes back with its step path."""

from __future__ import annotations

import pytest
import yaml

from streamapp_api import StreamApp, load
from streamapp_runtime.run import runner
from streamapp_runtime.run.settings import Settings
from streamapp_runtime.compile.steps import StepError
from streamapp_testbed.paths import REPO_DIR

pytestmark = [pytest.mark.integration, pytest.mark.slow]
NO_BROKER = "127.0.0.1:9"  # nothing listens: a dry run must not need Kafka


def _example(name: str, edit=lambda text: text, checked: bool = True):
    """An example as the operator would pass it (checked), or only shaped into the model: what reaches
    Spark when a mistake slips past `streamapp validate`."""
    document = yaml.safe_load(edit((REPO_DIR / "examples" / f"{name}.yaml").read_text()))
    return load(document) if checked else StreamApp.model_validate(document)


def _dry_run(spark, app, tmp_path):
    return runner.dry_run(spark, app, Settings(checkpoint_root=str(tmp_path), kafka_override=NO_BROKER))


@pytest.mark.parametrize("name", ["click-sessions", "stock-stats", "not-looking-at-facebook", "profile-enrichment"])
def test_every_query_of_an_example_compiles_without_starting(spark, tmp_path, name):
    app = _example(name)
    lines = _dry_run(spark, app, tmp_path)
    # one per sink; the sinks count the bad records of the sources they read, no dead-letter query of its own
    assert len(lines) == len(app.spec.sinks)
    assert not any(line.startswith("query dlq-") for line in lines)
    assert spark.streams.active == [], "nothing started"
    assert not any(tmp_path.iterdir()), "no checkpoint written"


def test_the_column_types_a_postgres_sink_gets_are_shown(spark, tmp_path):
    lines = _dry_run(spark, _example("click-sessions"), tmp_path)
    assert "query sessions-session_stats (postgres, append mode) writes: window_start timestamp, window_end " \
           "timestamp, session_id string, uuid string, clicks bigint, page_views bigint, time_spent bigint" in lines


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("count_if(event = 'click')", "cnt_if(event = 'click')"),
     "spec.streams[0].steps[2].aggregate.columns.clicks: cnt_if() is not a Spark SQL function; did you mean count_if()"),
    (lambda t: t.replace("event IN ('click', 'page_view')", "evnt IN ('click')"),
     "spec.streams[0].steps[0].filter: Spark refused it: [UNRESOLVED_COLUMN.WITH_SUGGESTION]"),
])
def test_a_bad_expression_is_named_by_its_step(spark, tmp_path, edit, message):
    # validate refuses the misspelled column before Spark sees it; the runtime must still name the step
    with pytest.raises(StepError) as raised:
        _dry_run(spark, _example("click-sessions", edit, checked=False), tmp_path)
    assert str(raised.value).startswith(message)


def test_a_column_a_protobuf_sink_cannot_write_is_named_without_starting(spark, tmp_path):
    def edit(text: str) -> str:
        text = text.replace("kafka:\n    bootstrapServers: kafka:9092",
                            "kafka:\n    bootstrapServers: kafka:9092\n    schemaRegistry: {url: 'http://127.0.0.1:9'}")
        text = text.replace('"sum(time_spent)"', '"sum(cast(time_spent AS decimal(12, 2)))"')
        return text.replace("{topic: session-summaries, key: session_id}",
                            "{topic: session-summaries, key: session_id, format: protobuf}")

    with pytest.raises(ValueError) as raised:
        _dry_run(spark, _example("click-sessions", edit), tmp_path)  # no registry is reached: none listens there
    assert str(raised.value) == ("spec.sinks[0].kafka.format: column 'time_spent': type decimal(22,2) has no Protobuf "
                                 "type here; cast it (to string, bigint, double, timestamp...) in a select step")
