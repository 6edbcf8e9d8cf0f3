"""Which query failures are worth a restart in-process, and when. Pure: text in, decision out.

A query that ends because Kafka could not be reached (broker down, restarting, a leader moving) is
restarted from its own checkpoint after a capped exponential backoff, with nothing lost: the
checkpoint holds the offsets and state of the last committed micro-batch. Everything else (bad
data Spark refuses, offsets that no longer exist, credentials Kafka rejects, a bug) still fails
the process, because retrying cannot fix it and would only hide it.

Spark gives us the failure as text (the StreamingQueryException's message and the JVM stack trace
with its ``Caused by:`` chain), so the decision reads that text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Checked first: a failure mentioning any of these is never retried, even when a Kafka timeout
# also appears further down the chain.
FATAL = [
    (re.compile(r"KAFKA_DATA_LOSS|Some data may have been (missed|lost)|OffsetOutOfRangeException"),
     "Kafka offsets the checkpoint needs are gone (data loss)"),
    (re.compile(r"(Authentication|Authorization|SaslAuthentication)Exception|SslAuthenticationException"),
     "Kafka refused the credentials"),
    (re.compile(r"RecordTooLargeException|SerializationException|InvalidTopicException"),
     "Kafka refused the records"),
]

# Kafka client exceptions that mean "the broker could not be reached or answered in time", and
# the connector's own message when an executor's fetch gets nothing before its poll timeout. They
# count wherever they appear in the chain: a Postgres sink's foreachBatch (Python) that loses Kafka
# fails as a PythonException wrapping them. Anything else (AnalysisException, a Python error of the
# pipeline, Postgres refusing a write) is not retried.
RETRYABLE = [
    (re.compile(r"org\.apache\.kafka\.common\.errors\.(TimeoutException|NetworkException|DisconnectException|"
                r"NotLeaderOrFollowerException|LeaderNotAvailableException|BrokerNotAvailableException|"
                r"NotCoordinatorException|CoordinatorNotAvailableException|NotEnoughReplicas\w*Exception|"
                r"KafkaStorageException)(: [^\n]*)?"), None),
    (re.compile(r"Cannot fetch records? (for offset|in) [^\n]*"), None),
    (re.compile(r"java\.net\.ConnectException(: [^\n]*)?"), None),
]


@dataclass(frozen=True)
class RetryPolicy:
    first_delay: float = 5.0
    max_delay: float = 60.0
    factor: float = 2.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before restart number ``attempt`` (1-based): first, first*factor, ..., max."""
        return min(self.max_delay, self.first_delay * self.factor ** max(0, attempt - 1))


@dataclass(frozen=True)
class Decision:
    retry: bool
    delay: float  # seconds before the restart; 0 when not retried
    reason: str  # the matched failure, one line, for the log


def classify(failure: str) -> tuple[bool, str]:
    """(retryable, why) for the text of a failed query."""
    for pattern, why in FATAL:
        if pattern.search(failure):
            return False, why
    for pattern, _ in RETRYABLE:
        match = pattern.search(failure)
        if match:
            return True, match.group(0).strip()[:300]
    first_line = failure.strip().split("\n")[0][:300]
    return False, first_line or "unknown failure"


def decide(failure: str, attempt: int, policy: RetryPolicy = RetryPolicy()) -> Decision:
    """Restart a query that failed for the ``attempt``-th time in a row, or give up."""
    retry, why = classify(failure)
    return Decision(retry, policy.delay(attempt) if retry else 0.0, why)


def next_attempt(previous: int, progressed: bool) -> int:
    """Attempts count failures in a row: a query that ran a trigger since its last start begins again at 1."""
    return 1 if progressed or previous < 1 else previous + 1
