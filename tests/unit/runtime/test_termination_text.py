"""The driver's last words as text: the reason first, then the error, within the kubelet's limit; written
only where the pod's environment says (tests/runtime/test_termination_message.py runs a failing app)."""

from __future__ import annotations

import pytest

from streamapp_api import contract
from streamapp_runtime.run import termination

pytestmark = pytest.mark.unit
SPARK_ERROR = ("[CAST_INVALID_INPUT] The value 'abc' of the type \"STRING\" cannot be cast to \"INT\" because it "
               "is malformed. SQLSTATE: 22018\n" + "\n".join(f"\tat org.apache.spark.Frame{i}" for i in range(40)))


def test_the_message_names_the_reason_then_the_error_within_the_kubelets_limit():
    text = termination.message(SPARK_ERROR, "query counts failed")
    lines = text.splitlines()
    assert lines[0].startswith("PipelineError: query counts failed: [CAST_INVALID_INPUT] The value 'abc'")
    assert len(lines) == 1 + termination.DETAIL_LINES  # the first lines of the stack, not all of it
    huge = termination.message("x" * 10_000)
    assert len(huge.encode()) <= contract.TERMINATION_MESSAGE_LIMIT and huge.startswith("PipelineError: xxx")


def test_kafka_refusing_the_app_is_a_kafka_error():
    text = termination.message("StreamingQueryException: boom\nCaused by: org.apache.kafka.common.errors."
                               "SaslAuthenticationException: Authentication failed: Invalid username or password")
    assert text.startswith("KafkaError: Kafka refused the credentials: StreamingQueryException: boom")


def test_written_only_where_the_environment_says(tmp_path):
    target = tmp_path / "termination-log"
    termination.write("PipelineError: x", {contract.ENV_TERMINATION_LOG: str(target)})
    assert target.read_text() == "PipelineError: x"
    termination.write("PipelineError: y", {})  # a local run: nowhere, and no error
    assert target.read_text() == "PipelineError: x"
