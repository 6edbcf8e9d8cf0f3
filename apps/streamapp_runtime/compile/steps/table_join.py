"""Tables (KTable) and stream-table joins, with real streaming state.

The table's changelog topic and the stream are unioned and grouped by the join key; a Python state
function (keyed_state: transformWithState, or applyInPandasWithState on older checkpoints) keeps the
latest table value per key in the state store. Table records update or (null value) delete it; each
stream record is joined with the value the key has when the record is processed, so later updates
never change records already emitted, and a record never sees an update that comes after it. Within one micro-batch both sides are processed in order of
Kafka record time (the only clock both topics share), table before stream on a tie, then offset.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamapp_api import Join, Table
from streamapp_api.durations import parse_duration

from streamapp_runtime.compile.frame import Frame, StepError
from streamapp_runtime.compile.steps.keyed_state import KeyedFold, keyed_fold, passes_watermark
from streamapp_runtime.compile.steps.packing import ORDER_OFFSET, ORDER_TIME, PAYLOAD, order_columns, pack, rewatermark, unpack
from streamapp_runtime.compile.sources import ERROR, parse, read_kafka

JOIN_KEY = "__join_key"
SIDE = "__side"  # 0 table, 1 stream
TABLE_VALUE = "__table"
DELETED = "__deleted"
TABLE_SIDE, STREAM_SIDE = 0, 1


def table_changes(spark: SparkSession, table: Table, options: dict[str, str], name: str) -> DataFrame:
    """The table's changelog: (key, time, offset, value as JSON or null for a tombstone); ``name``: read_kafka's."""
    raw = read_kafka(spark, [table.topic], options, "earliest", fail_on_data_loss=False, name=name)
    df = parse(raw, table, options)
    deleted = F.col("__raw_value").isNull()
    df = df.where(deleted | F.col(ERROR).isNull())  # unreadable table records are skipped
    key = F.coalesce(F.col(table.key).cast("string"), F.col("_key")) if table.key != "_key" else F.col("_key")
    values = sorted(table.value_columns())
    payload = F.to_json(F.struct(*[F.col(c) for c in values]))
    return df.select(
        key.alias(JOIN_KEY), F.lit(TABLE_SIDE).alias(SIDE), F.unix_micros(F.col("_timestamp")).alias(ORDER_TIME),
        F.col("_offset").alias(ORDER_OFFSET), F.when(deleted, None).otherwise(payload).alias(PAYLOAD),
        deleted.alias(DELETED),
    )


@dataclass(frozen=True)
class LatestTableValue:
    """The table join's fold (keyed_state.Fold): the key's latest table value, carried through its
    rows (side, payload, deleted) in order; each stream row comes out with the value it met. Pure."""

    def __call__(self, saved: str | None, rows: list[tuple]) -> tuple[str | None, list[tuple]]:
        current, out = saved, []
        for side, payload, deleted in rows:
            if side == TABLE_SIDE:
                current = None if deleted else payload
            else:
                out.append((payload, current))
        return current, out


def table_join(spark: SparkSession, frame: Frame, table: Table, join: Join, options: dict[str, str],
               output_mode: str, where: str, name: str, state_function: str) -> Frame:
    df = frame.df
    key = join.key or "_key"
    if key not in df.columns:
        raise StepError(f"{where}.join.key: column {key!r} is not in the stream; its columns are {', '.join(df.columns)}")
    stream_side = df.select(
        F.col(key).cast("string").alias(JOIN_KEY), F.lit(STREAM_SIDE).alias(SIDE), *order_columns(frame, record_time=True),
        pack(df), F.lit(False).alias(DELETED),
    )
    both = stream_side.unionByName(table_changes(spark, table, options, name))
    ttl_ms = int(parse_duration(table.ttl).total_seconds() * 1000) if table.ttl else None
    latest = KeyedFold(LatestTableValue(), (SIDE, PAYLOAD, DELETED), (ORDER_TIME, SIDE, ORDER_OFFSET),
                       ((PAYLOAD, "string"), (TABLE_VALUE, "string")), "value", ttl_ms)
    joined = keyed_fold(both.groupBy(JOIN_KEY), latest, output_mode, state_function)
    if join.type == "inner":
        joined = joined.where(F.col(TABLE_VALUE).isNotNull())
    values = sorted(table.value_columns())
    types = table.value_format.value_columns(table.schema_)
    value_ddl = ", ".join(f"`{c}` {types[c]}" for c in values)
    table_struct = F.from_json(F.col(TABLE_VALUE), value_ddl)
    prefix = table.name.replace("-", "_")
    names = {c: (f"{prefix}_{c}" if c in df.columns else c) for c in values}
    out = joined.select(*unpack(joined, df.schema), *[table_struct.getField(c).alias(n) for c, n in names.items()])
    return rewatermark(frame, out, passes_watermark(latest, state_function))
