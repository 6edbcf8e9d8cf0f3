"""Dead letters that cost nothing while the data is clean.

The sink query that owns a JSON source (``plan.dead_letter_owners``) counts the source's bad records
in every batch (``sources.bad_count_name``: Spark's observed metrics, computed as the records are
parsed anyway). From the query's progress this writer learns the offsets each batch read and how many
of them were bad; only when some were does it read those offsets back from Kafka as a batch, parse
them as the pipeline did and write the bad ones to the dead-letter topic. Clean data is read once.

Nothing is lost across a crash. Per partition, the *cursor* is the offset below which every bad
record is written (or none was there). It is kept as the committed offsets of a consumer group named
like the writer, ``streamapp.dlq-<source>.<owner query id>``, and committed with the dead letters: in
the same Kafka transaction with ``deadLetter.delivery: exactly-once`` (whose ``transactional.id`` is
that name: a new producer fences an older driver's), after them otherwise. Between batches with bad
records it advances over clean ones, committed at most every ``interval``. When the pipeline
committed a batch whose dead letters were not written (a crash in between), the cursor stays behind
the pipeline: the next batch starts past it, and the read-back starts at the cursor, covering the gap.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from streamapp_api import Source, contract
from streamapp_api.checkpoint import join, query_checkpoint

from streamapp_runtime import plan
from streamapp_runtime.checkpoint import files as checkpoint_files
from streamapp_runtime.checkpoint import layout
from streamapp_runtime.compile.dlq import read_back
from streamapp_runtime.connections import admin_config
from streamapp_runtime.run.consumer_groups import Offsets
from streamapp_runtime.run.dead_letter_cursor import (Coverage, bad_count, batch_begin, batch_offsets, initial_offsets,
                                                      last_committed_offsets, merge)
from streamapp_runtime.sinks.dead_letter_topic import DeadLetterSink, writer_name

log = logging.getLogger("streamapp.runtime")

@dataclass
class Owned:
    """A source whose dead letters this writer writes, and the sink query that counts them."""

    source: Source
    query: str
    checkpoint: str  # the query's
    earlier_query: str = ""  # the checkpoint of the dead-letter query an earlier version ran for the source
    coverage: Coverage = field(default_factory=Coverage)
    backlog: list = field(default_factory=list)  # progress of the query's batches not taken in yet
    sink: object = None  # sinks.dead_letter_topic.DeadLetterSink, once the query's id is known
    committed: Offsets | None = None  # the cursor in Kafka; None until read
    last_write: float = float("-inf")
    last_commit: float = float("-inf")
    told: bool = False  # a failure was logged as a warning already


class DeadLetterWriter:
    """Reads back and writes the bad records of the sources whose owner queries report batches
    (``batch_done``, from the listener), on a thread of its own; ``close`` writes what is left.

    ``read_back(source, from, to)``: the bad records as (key, value, headers); ``open_sink(name)``: a
    DeadLetterSink whose transactional id and cursor group is ``name``; ``read_initial(checkpoint)``:
    the checkpoint's initial offsets (initial_offsets); ``read_committed(checkpoint)``: the offsets a
    query's checkpoint committed last (last_committed_offsets)."""

    def __init__(self, owned: list[Owned], read_back: Callable, open_sink: Callable, metrics,
                 interval: float, read_initial: Callable[[str], Offsets], read_committed: Callable[[str], Offsets]):
        self.owned, self.read_back, self.open_sink, self.metrics = owned, read_back, open_sink, metrics
        self.interval, self.read_initial, self.read_committed = interval, read_initial, read_committed
        self.queries = {o.query for o in owned}
        self._items: list[dict] = []
        self._closing = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True, name="dead-letters")
        self._thread.start()

    def batch_done(self, progress: dict) -> None:
        if progress.get("name") in self.queries:
            with self._cond:
                self._items.append(progress)
                self._cond.notify()

    def close(self, timeout: float = 30.0) -> None:
        """Write what is left (for ``timeout`` at most: what is not written is read back on the next start)."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._items or self._closing, timeout=self.interval)
                items, self._items, closing = self._items, [], self._closing
            for owned in self.owned:
                owned.backlog.extend(p for p in items if p.get("name") == owned.query)
                self._guarded(owned, lambda o=owned: self._settle(o, closing))
            if closing:
                for owned in self.owned:
                    if owned.sink is not None:
                        owned.sink.close()
                return

    def _guarded(self, owned: Owned, work: Callable[[], None]) -> None:
        try:
            work()
            owned.told = False
        except Exception as exc:  # noqa: BLE001 - the pipeline goes on; what is not written stays to be read back
            self.metrics.dead_letter_failed(owned.source.name)
            log.log(logging.DEBUG if owned.told else logging.WARNING,
                    "dead letters of source %s: could not write them yet (counted in "
                    "streamapp_dead_letter_failures_total; tried again, nothing is lost): %s", owned.source.name, exc)
            owned.told = True
            if owned.sink is not None:
                owned.sink.reset()
            owned.last_write = time.monotonic()  # the next try after an interval

    def _settle(self, owned: Owned, closing: bool) -> None:
        while owned.backlog:
            self._take(owned, owned.backlog[0])
            owned.backlog.pop(0)
        coverage, now = owned.coverage, time.monotonic()
        if coverage.dirty and (closing or now - owned.last_write >= self.interval):
            owned.last_write = now
            begin, end = coverage.to_read()
            rows = self.read_back(owned.source, begin, end) if end else iter(())
            # never back: after a restart the cursor may be past a replayed batch's end on some partitions
            written = owned.sink.write(rows, merge(coverage.cursor, coverage.upto))
            coverage.written()
            owned.committed, owned.last_commit = dict(coverage.cursor), now
            if written:
                self.metrics.dead_lettered(owned.source.name, written)
                log.info("dead letters of source %s: %d record(s) written (offsets %s)", owned.source.name,
                         written, ", ".join(f"{t}[{p}] {begin[(t, p)]}-{o}" for (t, p), o in sorted(end.items())))
        elif owned.committed is not None and coverage.cursor != owned.committed and (
                closing or now - owned.last_commit >= self.interval):
            owned.sink.commit(coverage.cursor)
            owned.committed, owned.last_commit = dict(coverage.cursor), now

    def _take(self, owned: Owned, progress: dict) -> None:
        """One batch of the owner query; the cursor is read from Kafka first (raises while it cannot be)."""
        start, end = batch_offsets(progress, set(owned.source.topic_list))
        if not end:
            return
        if owned.sink is None:
            owned.sink = self.open_sink(writer_name(owned.source.name, progress["id"]))
        if owned.committed is None:
            owned.committed = owned.sink.cursor(sorted(end))
            # No cursor, and the app ran a dead-letter query before: that query wrote up to its last batch.
            earlier = {} if owned.committed or not owned.earlier_query else self.read_committed(owned.earlier_query)
            owned.coverage.cursor = merge(merge(earlier, owned.committed), owned.coverage.cursor)
        initial = self.read_initial(owned.checkpoint) if start is None else {}
        owned.coverage.batch(batch_begin(start, end, initial), end, bad_count(progress, owned.source.name))


def for_app(spark, app, plans: list, checkpoint_root: str, options: dict[str, str], metrics,
            interval: float) -> DeadLetterWriter | None:
    """The writer of the sources whose bad records the app's sink queries count; None when none does."""
    sources = {s.name: s for s in app.spec.sources}
    owned = [Owned(sources[name], qp.name, qp.checkpoint,
                   query_checkpoint(checkpoint_root, contract.dlq_query(name)))
             for qp in plans for name in qp.counts_bad]
    if not owned:
        return None
    config, topic = admin_config(options), app.dead_letter_topic
    exactly_once = app.spec.dead_letter.delivery == "exactly-once"

    def read_initial(checkpoint: str) -> Offsets:
        folder = join(checkpoint, layout.SOURCES)
        return initial_offsets({name: checkpoint_files.read_text(join(join(folder, name), "0")) or ""
                                for name in checkpoint_files.names(folder)})

    def read_committed(checkpoint: str) -> Offsets:
        offsets = join(checkpoint, layout.OFFSETS)
        return last_committed_offsets(checkpoint_files.names(join(checkpoint, layout.COMMITS)),
                                      lambda n: checkpoint_files.read_text(join(offsets, n)))

    readers = plan.reader_options(app, options)
    return DeadLetterWriter(owned, lambda source, begin, end: read_back(spark, source, readers, begin, end),
                            lambda name: DeadLetterSink(config, topic, name, exactly_once), metrics, interval,
                            read_initial, read_committed)
