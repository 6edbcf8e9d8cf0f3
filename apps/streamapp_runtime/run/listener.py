"""The StreamingQueryListener feeding Metrics and printing a progress line per batch."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections import deque

from pyspark.sql.streaming import StreamingQueryListener

from streamapp_runtime.run.metrics import Metrics, batch_lag, progress_line

log = logging.getLogger("streamapp.runtime")


def first_batch_words(progress: dict) -> str:
    """A batch's duration and its longest phases (Spark's durationMs), e.g. for the first after a start."""
    phases = {k: v for k, v in (progress.get("durationMs") or {}).items() if k != "triggerExecution"}
    total = (progress.get("durationMs") or {}).get("triggerExecution", 0)
    longest = sorted(phases.items(), key=lambda kv: -kv[1])[:4]
    return f"batch {progress.get('batchId')} in {total / 1000:.1f}s (" + ", ".join(
        f"{k} {v / 1000:.1f}s" for k, v in longest) + ")"


class ProgressListener(StreamingQueryListener):
    def __init__(self, metrics: Metrics, queries: set[str], quiet: bool = False, committer=None, dead_letter_writer=None,
                 user_code_dead_letters: dict | None = None):
        self.metrics = metrics
        # step or udf path -> the accumulator of the dead letters its user code wrote (compile.user_code)
        self.user_code_dead_letters = user_code_dead_letters if user_code_dead_letters is not None else {}
        self.committer = committer  # consumer_groups.GroupCommitter: each batch's offsets to the query's group
        self.dead_letter_writer = dead_letter_writer  # run.dead_letters.DeadLetterWriter: reads back batches that had bad records
        self.last_batch: dict[str, int] = {}  # query -> the id of the last batch seen
        self.committed_at: dict[str, float] = {}  # query -> when its last batch committed (its progress came)
        # query -> its last two progresses (oldest first): whether an available-now query ran dry
        # (stopping.ran_dry) is read from here, not from query.recentProgress, a py4j round trip
        # per progress that the supervisor's poll would make several times a second.
        self.recent: dict[str, deque] = {}
        self.queries = queries  # only this app's queries (a test session may run others)
        self.names: dict[str, str] = {}
        self.quiet = quiet
        # Spark's whole progress of every batch (durations per phase, state operators, sources),
        # one JSON line each, when STREAMAPP_PROGRESS_JSON names a file: to profile where a batch goes.
        path = os.environ.get("STREAMAPP_PROGRESS_JSON")
        self.progress_file = open(path, "a", buffering=1) if path else None  # noqa: SIM115 - open for the app's life

    def onQueryStarted(self, event) -> None:
        if event.name in self.queries:
            self.names[str(event.id)] = event.name
            self.metrics.started(event.name)

    def onQueryProgress(self, event) -> None:
        p = json.loads(event.progress.json)
        if p.get("name") not in self.queries:
            return
        self.metrics.observe(p)
        if self.user_code_dead_letters:  # the workers' counts reached the driver with the batch's tasks
            self.metrics.dead_lettered_by_user_code({w: a.value for w, a in self.user_code_dead_letters.items()})
        if self.committer is not None:
            self.committer.batch_done(p["name"], p)
        if self.dead_letter_writer is not None:
            self.dead_letter_writer.batch_done(p)
        if p["name"] not in self.last_batch:  # where a driver's first batch goes (restores, start-up costs)
            log.info("first batch of query %s in this driver: %s", p["name"], first_batch_words(p))
        self.last_batch[p["name"]] = p.get("batchId", -1)
        self.committed_at[p["name"]] = time.time()
        self.recent.setdefault(p["name"], deque(maxlen=2)).append(p)
        if self.progress_file is not None:
            self.progress_file.write(json.dumps(p) + "\n")
        if not self.quiet:
            print(progress_line(p, batch_lag(p), self.metrics.sink_batches.get(p["name"])), file=sys.stderr, flush=True)

    def onQueryIdle(self, event) -> None:
        name = self.names.get(str(event.id))
        if name:
            self.metrics.idle(name)

    def onQueryTerminated(self, event) -> None:
        name = self.names.get(str(event.id))
        if name:
            self.metrics.terminated(name)
            if event.exception:  # the supervisor decides whether this is fatal and says so
                log.debug("query %s terminated: %s", name, str(event.exception).split("\n")[0])
