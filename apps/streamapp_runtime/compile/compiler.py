"""Compile a StreamApp into DataFrames: one Frame per source and stream, built once, on demand."""

from __future__ import annotations

from pyspark.sql import SparkSession

from streamapp_api import Source, StreamApp, Table, resolve

from streamapp_runtime import plan
from streamapp_runtime.compile.frame import Frame
from streamapp_runtime.compile.sources import source_frame
from streamapp_runtime.compile.frame import StepError
from streamapp_runtime.compile.steps import apply_steps
from streamapp_runtime.compile.steps.table_join import table_join


class Compiler:
    def __init__(self, spark: SparkSession, app: StreamApp, kafka_options: dict[str, str]):
        self.spark = spark
        self.app = app
        self.kafka_options = kafka_options
        self.items = plan.by_name(app)
        # What the API resolved for each stream (emit mode, event time per step): compiled, not re-derived.
        self.resolved = resolve(app)
        self._frames: dict[str, Frame] = {}
        self._building: list[str] = []

    def path_of(self, name: str) -> str:
        for kind in ("sources", "tables", "streams"):
            for i, item in enumerate(getattr(self.app.spec, kind)):
                if item.name == name:
                    return f"spec.{kind}[{i}]"
        return name

    def emit_of(self, name: str) -> str:
        return self.resolved.emit(name)

    def frame(self, name: str) -> Frame:
        if name in self._frames:
            return self._frames[name]
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
                frame = source_frame(self.spark, item, self.kafka_options)
            else:
                upstream = self.frame(item.from_)
                frame = apply_steps(self, item, self.path_of(name), Frame(upstream.df, upstream.event_time,
                                                                         upstream.watermark, name))
        finally:
            self._building.pop()
        self._frames[name] = frame
        return frame

    def table_join(self, frame: Frame, join, where: str) -> Frame:
        table = self.items.get(join.table)
        if not isinstance(table, Table):
            raise StepError(f"{where}.join.table: {join.table!r} is not a table")
        mode = plan.output_mode(self.emit_of(frame.name))
        return table_join(self.spark, frame, table, join, self.kafka_options, mode, where)
