"""Compile a StreamApp into DataFrames, one query's lineage at a time.

Nothing is shared between two reads of a name: with named sources (spark_compat.name_source) Spark
refuses one source twice in a query under one name (a stream joined with another stream of the same
source, a table joined twice), so each read gets a reader of its own, named after its source or table
(``_2``, ``_3``… for the later ones). Spark made two sources of a frame read twice already."""

from __future__ import annotations

from pyspark.sql import SparkSession

from streamapp_api import Source, StreamApp, Table, contract, resolve

from streamapp_runtime import plan
from streamapp_runtime.compile.frame import Frame
from streamapp_runtime.compile.sources import source_frame, spark_source_name
from streamapp_runtime.compile.frame import StepError
from streamapp_runtime.compile.steps import apply_steps
from streamapp_runtime.compile.steps.table_join import table_join
from streamapp_runtime.compile.udfs import register_udfs


class Compiler:
    def __init__(self, spark: SparkSession, app: StreamApp, kafka_options: dict[str, str],
                 state_function: str = contract.STATE_FUNCTIONS[0]):
        self.spark = spark
        self.app = app
        self.state_function = state_function  # of the checkpoint (run.settings.choose_state_function)
        self.kafka_options = plan.reader_options(app, kafka_options)  # it reads with them, never writes
        self.items = plan.by_name(app)
        # What the API resolved for each stream (emit mode, event time per step): compiled, not re-derived.
        self.resolved = resolve(app)
        self._building: list[str] = []
        self._source_names: set[str] = set()  # of the query being compiled
        self._count_bad: frozenset[str] = frozenset()  # sources whose bad records the query counts
        # step or udf path -> the accumulator of the records its user code sent to the dead-letter topic
        self.dead_letter_counters: dict[str, object] = {}
        register_udfs(spark, app, self.kafka_options, self.dead_letter_counters)  # before any expression calls one

    def query_frame(self, name: str, count_bad: tuple[str, ...] = ()) -> Frame:
        """The frame a query writes: a new query, whose sources are named afresh; it counts the bad
        records of the sources in ``count_bad`` (plan.QueryPlan.counts_bad)."""
        self.new_query(count_bad)
        return self.frame(name)

    def new_query(self, count_bad: tuple[str, ...] = ()) -> None:
        self._source_names.clear()
        self._count_bad = frozenset(count_bad)

    def source_name(self, name: str) -> str:
        """The name the query's checkpoint knows this read of source or table ``name`` by."""
        base = chosen = spark_source_name(name)
        count = 1
        while chosen in self._source_names:
            count += 1
            chosen = f"{base}_{count}"
        self._source_names.add(chosen)
        return chosen

    def path_of(self, name: str) -> str:
        for kind in ("sources", "tables", "streams"):
            for i, item in enumerate(getattr(self.app.spec, kind)):
                if item.name == name:
                    return f"spec.{kind}[{i}]"
        return name

    def emit_of(self, name: str) -> str:
        return self.resolved.emit(name)

    def frame(self, name: str) -> Frame:
        """A source's or stream's frame, inside the query being compiled (steps read other streams with it)."""
        item = self.items.get(name)
        if item is None:
            raise StepError(f"{name!r} is not a source or stream of {self.app.metadata.name!r}")
        if name in self._building:
            raise StepError(f"streams form a cycle: {' -> '.join(self._building + [name])}")
        if isinstance(item, Table):
            raise StepError(f"{name!r} is a table: read it with a join step")
        self._building.append(name)
        try:
            if isinstance(item, Source):
                frame = source_frame(self.spark, item, self.kafka_options, self.source_name(name),
                                     count_bad=name in self._count_bad)
            else:
                upstream = self.frame(item.from_)
                frame = apply_steps(self, item, self.path_of(name), Frame(upstream.df, upstream.event_time,
                                                                         upstream.watermark, name))
        finally:
            self._building.pop()
        return frame

    def table_join(self, frame: Frame, join, where: str) -> Frame:
        table = self.items.get(join.table)
        if not isinstance(table, Table):
            raise StepError(f"{where}.join.table: {join.table!r} is not a table")
        mode = plan.output_mode(self.emit_of(frame.name))
        return table_join(self.spark, frame, table, join, self.kafka_options, mode, where,
                          self.source_name(table.name), self.state_function)
