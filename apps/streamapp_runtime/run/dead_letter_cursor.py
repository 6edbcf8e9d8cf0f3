"""The dead-letter cursor, pure: what a batch's progress tells of the offsets it read and of its bad
records, and per source what is left to read back (run.dead_letters explains the cursor). No I/O."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from streamapp_runtime.checkpoint import layout
from streamapp_runtime.compile.sources import BAD_COUNT_PREFIX
from streamapp_runtime.run.consumer_groups import Offsets, offsets_of

EARLIEST = -2  # in Spark's offset JSON: the partition's first offset


def merge(a: Offsets, b: Offsets, pick=max) -> Offsets:
    """Both offset maps, the larger offset (or `pick`'s) where both have a partition. Pure."""
    return {**a, **b, **{tp: pick(a[tp], b[tp]) for tp in a.keys() & b.keys()}}


def batch_offsets(progress: dict, topics: set[str]) -> tuple[Offsets | None, Offsets]:
    """(where the batch started, None for a checkpoint's first batch; where it ended) over the
    progress's sources reading ``topics`` (several when a query reads the source twice). Pure."""
    start: Offsets | None = {}
    end: Offsets = {}
    for source in progress.get("sources") or []:
        ended = {tp: o for tp, o in offsets_of(source.get("endOffset")).items() if tp[0] in topics}
        if not ended:
            continue
        end = merge(end, ended)
        if source.get("startOffset") is None:
            start = None
        elif start is not None:
            start = merge(start, offsets_of(source["startOffset"]), min)
    return start, end


def bad_count(progress: dict, source: str) -> int | None:
    """The source's bad records in the batch, over every read of it; None when the query did not
    report them though it read something (then the batch is read back). Pure."""
    prefix = f"{BAD_COUNT_PREFIX}{source}#"
    counts = [int((row or {}).get("bad") or 0) for name, row in (progress.get("observedMetrics") or {}).items()
              if name.startswith(prefix)]
    if counts:
        return sum(counts)
    return 0 if not int(progress.get("numInputRows") or 0) else None


def batch_begin(start: Offsets | None, end: Offsets, initial: Offsets) -> Offsets:
    """Where the batch began per partition it ended on: a first batch at the checkpoint's initial
    offsets, a partition new to the query at its earliest offset (as Spark reads it). Pure."""
    known = initial if start is None else start
    return {tp: known.get(tp, EARLIEST) for tp in end}


@dataclass
class Coverage:
    """One source's dead-letter cursor and what is left to read back. Pure (no I/O)."""

    cursor: Offsets = field(default_factory=dict)  # below it, every bad record is written
    upto: Offsets = field(default_factory=dict)  # the end of what is to be read back
    dirty: bool = False  # some bad records (or an unread gap) lie between cursor and upto

    def batch(self, begin: Offsets, end: Offsets, bad: int | None) -> None:
        for tp, offset in begin.items():  # nothing before the pipeline's first batch is ours to write
            self.cursor.setdefault(tp, offset)
        behind = any(self.cursor[tp] < b for tp, b in begin.items() if b >= 0)
        if not self.dirty and bad == 0 and not behind:
            self.cursor = merge(self.cursor, end)
            return
        self.dirty = True
        self.upto = merge(self.upto, end)

    def to_read(self) -> tuple[Offsets, Offsets]:
        """(from, to) per partition with something left to read back."""
        left = {tp: o for tp, o in self.upto.items() if o > self.cursor.get(tp, EARLIEST)}
        return {tp: self.cursor.get(tp, EARLIEST) for tp in left}, left

    def written(self) -> None:
        self.cursor = merge(self.cursor, self.upto)
        self.upto, self.dirty = {}, False


def initial_offsets(files: dict[str, str]) -> Offsets:
    """A checkpoint's initial Kafka offsets from its ``sources/*/0`` files (``v1`` and a JSON line,
    after a NUL Spark writes first), the lowest per partition. Pure."""
    found: Offsets = {}
    for text in files.values():
        found = merge(found, offsets_of(text[text.find("{"):] if "{" in text else ""), min)
    return found


def last_committed_offsets(commits: list[str], read_offsets: Callable[[str], str | None]) -> Offsets:
    """The Kafka offsets a query's checkpoint committed last: its ``offsets/<n>`` (a version line, the
    batch's metadata, then one line per source) for the highest ``n`` in ``commits/``. Pure given
    ``read_offsets(n)``."""
    batch = layout.last_committed(commits)
    if batch is None:
        return {}
    found: Offsets = {}
    for line in (read_offsets(str(batch)) or "").splitlines()[2:]:
        found = merge(found, offsets_of(line))
    return found
