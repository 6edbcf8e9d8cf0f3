"""Which failed queries the runtime restarts in-process, and after how long: table tests, no Spark."""

from __future__ import annotations

import pytest

from streamapp_runtime.run import recovery

pytestmark = pytest.mark.unit

# Failure texts shaped like Spark's: the StreamingQueryException message, then "Caused by:" lines.
BROKER_GONE_DRIVER = (
    "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Timed out waiting for a node "
    "assignment. Call: describeTopics\n"
    "Caused by: org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment. "
    "Call: describeTopics")
FETCH_TIMEOUT = ("[STREAM_FAILED] Query terminated with exception: Job aborted due to stage failure: "
                 "java.util.concurrent.TimeoutException: Cannot fetch record for offset 120 in 120000 milliseconds")
PRODUCER_EXPIRED = ("Caused by: org.apache.kafka.common.errors.TimeoutException: Expiring 12 record(s) for "
                    "out-0:120001 ms has passed since batch creation")
DATA_LOSS = ("[STREAM_FAILED] [KAFKA_DATA_LOSS.START_OFFSET_RESET] Some data may have been lost because they "
             "are not available in Kafka any more\n"
             "Caused by: org.apache.kafka.common.errors.TimeoutException: whatever came after")
SASL = "Caused by: org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed"
PYTHON = ("[STREAM_FAILED] Query terminated with exception: An exception was thrown from the Python worker. "
          "org.apache.spark.api.python.PythonException: Traceback ...: ZeroDivisionError")
MALFORMED = "[MALFORMED_RECORD_IN_PARSING.WITHOUT_SUGGESTION] Malformed records are detected in record parsing"


@pytest.mark.parametrize("failure, retry, reason", [
    (BROKER_GONE_DRIVER, True, "org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node"),
    (FETCH_TIMEOUT, True, "Cannot fetch record for offset 120 in 120000 milliseconds"),
    (PRODUCER_EXPIRED, True, "TimeoutException: Expiring 12 record(s)"),
    ("Caused by: org.apache.kafka.common.errors.NetworkException: Disconnected", True, "NetworkException"),
    ("Caused by: java.net.ConnectException: Connection refused", True, "java.net.ConnectException"),
    (DATA_LOSS, False, "data loss"),
    (SASL, False, "credentials"),
    (PYTHON, False, "An exception was thrown from the Python worker"),
    (PYTHON + "\nCaused by: org.apache.kafka.common.errors.TimeoutException: Topic out not present in metadata",
     True, "Topic out not present in metadata"),  # a foreachBatch sink that lost Kafka
    (MALFORMED, False, "[MALFORMED_RECORD_IN_PARSING"),
    ("", False, "unknown failure"),
])
def test_only_kafka_connectivity_failures_are_retried(failure, retry, reason):
    decision = recovery.decide(failure, attempt=1)
    assert decision.retry is retry
    assert reason in decision.reason
    assert "\n" not in decision.reason
    assert decision.delay == (5.0 if retry else 0.0)


@pytest.mark.parametrize("attempt, delay", [(1, 5), (2, 10), (3, 20), (4, 40), (5, 60), (6, 60), (50, 60)])
def test_backoff_doubles_up_to_its_cap(attempt, delay):
    assert recovery.decide(BROKER_GONE_DRIVER, attempt).delay == delay


def test_a_custom_policy_is_used():
    policy = recovery.RetryPolicy(first_delay=1, max_delay=3, factor=3)
    assert [policy.delay(n) for n in (1, 2, 3)] == [1, 3, 3]


@pytest.mark.parametrize("previous, progressed, attempt", [(0, False, 1), (0, True, 1), (1, False, 2), (4, False, 5),
                                                           (4, True, 1)])
def test_attempts_count_failures_in_a_row(previous, progressed, attempt):
    assert recovery.next_attempt(previous, progressed) == attempt
