"""How the queries of an app stop: after the batch in flight (SIGTERM, a failure of another query), and
when an available-now run has nothing left to do.

Spark's query.stop() interrupts the batch in flight, and waiting for a moment between batches before
calling it finds none while a backlog is read (the next batch starts as soon as one commits). So a
micro-batch query is told to start no new batch (spark_compat.start_no_new_batch), and stopped once its
batch in flight has committed: nothing after that batch is committed, anything before it is replayed.
A real-time query's batch is a whole checkpoint interval: it is stopped at once, and the open interval
is replayed on the next start.
"""

from __future__ import annotations

import json
import time

from streamapp_runtime import spark_compat


def stop_after_batch_in_flight(spark, queries: list, realtime: list[bool], timeout: float) -> None:
    """Stop every query after its batch in flight commits (``realtime[i]``: query i stops now); a batch
    still running after ``timeout`` seconds is interrupted (and replayed on the next start)."""
    deadline = time.monotonic() + timeout
    waiting = []
    for query, now in zip(queries, realtime, strict=True):
        if not query.isActive:
            continue
        if now or not spark_compat.start_no_new_batch(spark, query):
            query.stop()
        else:
            waiting.append(query)
    for query in waiting:
        # A query told to start no new batch reports itself inactive at once; its thread ends after the
        # batch in flight. One between batches waits for its next trigger: stop() ends that wait.
        if _trigger_active(query):
            finish(query, deadline - time.monotonic())
        query.stop()


def finish(query, timeout: float) -> None:
    """Wait up to ``timeout`` seconds for a query told to start no new batch to commit its batch in
    flight and end. stop() before that would interrupt the batch."""
    try:
        query.awaitTermination(max(0.0, timeout))
    except Exception:  # noqa: BLE001 - it ended with a failure, which the supervisor reads from the query
        pass


def _trigger_active(query) -> bool:
    try:
        return bool(query.status.get("isTriggerActive"))
    except Exception:  # noqa: BLE001 - a query whose JVM side is gone runs no batch
        return False


def ran_dry(progress: list[dict]) -> bool:
    """Whether an available-now query has nothing left to do, from its last progresses (oldest first):
    its last batch read no new offsets and its event-time watermark did not move. Only a processing-time
    timeout (a ``ttl``) asks Spark for more batches then, one per trigger, for ever. Pure."""
    if not progress:
        return False
    last = progress[-1]
    read_nothing = last.get("numInputRows", 0) == 0 and all(
        _offsets(s.get("startOffset")) == _offsets(s.get("endOffset")) for s in last.get("sources", []))
    if not read_nothing:
        return False
    before = progress[-2] if len(progress) > 1 else {}
    return _watermark(last) == _watermark(before)


def _offsets(value):
    return json.loads(value) if isinstance(value, str) and value.startswith("{") else value


def _watermark(progress: dict) -> str | None:
    return (progress.get("eventTime") or {}).get("watermark")
