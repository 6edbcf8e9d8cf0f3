"""The driver's last words: on a fatal error `streamapp run` writes why to the file the driver pod's
termination message is read from (the kubelet keeps it after the container is gone; the operator
copies it into status.lastRestart.message). Real Spark and Kafka; the text itself:
tests/unit/runtime/test_termination_text.py."""

from __future__ import annotations

import pytest
import yaml

from streamapp_testkit.runtime import start_run
from streamapp_api import contract
from streamapp_testbed.kafka_admin import create_topic, produce

@pytest.mark.integration
def test_a_pipeline_that_fails_in_spark_leaves_its_error_in_the_termination_log(kafka, names, tmp_path):
    topic = names("in")
    create_topic(kafka.bootstrap, topic)
    produce(kafka.bootstrap, topic, [(None, "abc")])  # passes validation; Spark refuses the record (ANSI cast)
    app = {"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": names("app")[:50]},
           "spec": {"kafka": {"bootstrapServers": kafka.bootstrap},
                    "sources": [{"name": "lines", "topic": topic, "format": "string", "startingOffsets": "earliest"}],
                    "streams": [{"name": "counts", "from": "lines", "steps": [
                        {"filter": "cast(value as int) > 0"},
                        {"aggregate": {"groupBy": ["value"], "columns": {"n": "count(*)"}}}], "emit": "updates"}],
                    "sinks": [{"from": "counts", "kafka": {"topic": names("out")}}]}}
    path, log, last_words = tmp_path / "app.yaml", tmp_path / "run.log", tmp_path / "termination-log"
    path.write_text(yaml.safe_dump(app))
    proc = start_run(path, kafka.bootstrap, tmp_path / "checkpoint", log,
                     **{contract.ENV_TERMINATION_LOG: str(last_words)})
    assert proc.wait(timeout=300) == 1, log.read_text()[-3000:]
    said = last_words.read_text()
    assert said.startswith("PipelineError: query ") and "CAST_INVALID_INPUT" in said.splitlines()[0], said
    assert "'abc'" in said and len(said.encode()) <= contract.TERMINATION_MESSAGE_LIMIT
