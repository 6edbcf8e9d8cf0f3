"""Dead letters: records that cannot be read go to a topic with their raw key and value.

Kafka Connect's convention: the record is copied untouched and the reason travels in headers
(``streamapp.error``, ``streamapp.source``, ``streamapp.topic``, ``streamapp.partition``,
``streamapp.offset``), so the topic can be replayed into the source once fixed.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamapp_api import Source

from streamapp_runtime.compile.sources import RAW_KEY, RAW_VALUE, bad_of, bad_records, read_kafka_range


def _header(name: str, value) -> F.Column:
    return F.struct(F.lit(name).alias("key"), value.cast("string").cast("binary").alias("value"))


# The dead-letter query (real-time mode, and a source no sink reads: see plan.py) reads and parses
# every record again. Run at the pipeline's pace it doubled the per-batch overhead on a small driver
# (the data-plane bench's runtime without dead letters: bench/README.md), so it runs at most
# every plan.DLQ_MIN_INTERVAL_S, in batches DLQ_BATCH_FACTOR times the source's maxOffsetsPerTrigger.
DLQ_BATCH_FACTOR = 10


def dead_letters(spark: SparkSession, source: Source, options: dict[str, str]) -> DataFrame:
    """The dead-letter query's stream."""
    cap = source.max_offsets_per_trigger
    return dead_letter_rows(bad_records(spark, source, options, None if cap is None else cap * DLQ_BATCH_FACTOR),
                            source)


def dead_letter_rows(bad: DataFrame, source: Source) -> DataFrame:
    """(key, value, headers) of bad records (sources.bad_records, bad_of), as the topic gets them."""
    headers = F.array(
        _header("streamapp.error", F.col("reason")),
        _header("streamapp.source", F.lit(source.name)),
        _header("streamapp.topic", F.col("_topic")),
        _header("streamapp.partition", F.col("_partition")),
        _header("streamapp.offset", F.col("_offset")),
    )
    return bad.select(F.col(RAW_KEY).alias("key"), F.col(RAW_VALUE).alias("value"), headers.alias("headers"))


def read_back(spark: SparkSession, source: Source, options: dict[str, str], begin: dict, end: dict):
    """The bad records between ``begin`` and ``end`` (per partition) as (key, value, headers) tuples,
    read from Kafka and parsed as the pipeline parsed them; streamed to the driver."""
    bad = dead_letter_rows(bad_of(read_kafka_range(spark, options, begin, end), source, options), source)
    for row in bad.toLocalIterator():
        yield row["key"], row["value"], [(h["key"], h["value"]) for h in row["headers"]]
