"""The dead-letter query: records that cannot be read go to a topic with their raw key and value.

Kafka Connect's convention: the record is copied untouched and the reason travels in headers
(``streamapp.error``, ``streamapp.source``, ``streamapp.topic``, ``streamapp.partition``,
``streamapp.offset``), so the topic can be replayed into the source once fixed.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamapp_api import Source

from .sources import RAW_KEY, RAW_VALUE, bad_records


def _header(name: str, value) -> F.Column:
    return F.struct(F.lit(name).alias("key"), value.cast("string").cast("binary").alias("value"))


def dead_letters(spark: SparkSession, source: Source, options: dict[str, str]) -> DataFrame:
    bad = bad_records(spark, source, options)
    headers = F.array(
        _header("streamapp.error", F.col("reason")),
        _header("streamapp.source", F.lit(source.name)),
        _header("streamapp.topic", F.col("_topic")),
        _header("streamapp.partition", F.col("_partition")),
        _header("streamapp.offset", F.col("_offset")),
    )
    return bad.select(F.col(RAW_KEY).alias("key"), F.col(RAW_VALUE).alias("value"), headers.alias("headers"))
