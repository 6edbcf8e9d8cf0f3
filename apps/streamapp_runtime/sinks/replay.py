"""Which rows of a micro-batch each writer of a transactional sink gets, the same in a replay.

The exactly-once sinks (Postgres, Kafka with ``delivery: exactly-once``) record per batch partition
whether it was written, and skip a recorded one when the batch is replayed after a crash. That needs
partition ``p`` to hold the same rows in the replay. The batch's rows are the same (a replay reads the
offsets the offset log recorded, from the state version the batch started from), but not their
partitions: Spark orders a stateless batch's Kafka offset ranges as the map it planned them in, which
differs between the first run and a replay (seen: a killed run's replay skipped the partition holding
other rows, 13 rows lost and 11 written twice). So the writers get the rows by a hash of their content
into the query's shuffle partitions, which its checkpoint fixes.

A batch whose rows come out of a stateful operator (an aggregation, a deduplication, a state
function) row by row is partitioned that way already: partition ``p`` holds what the operator emitted
from state partition ``p``, whose keys the checkpoint fixes and whose input and state version the
replay repeats. ``by_content_or_state`` keeps such a batch as it is, which spares a shuffle.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamapp_runtime import spark_compat


def by_content(df: DataFrame, columns: list[str]) -> DataFrame:
    """``df`` repartitioned by a hash of ``columns`` into the query's shuffle partitions."""
    partitions = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    return df.repartition(partitions, *[F.col(f"`{c}`") for c in columns])


def by_content_or_state(df: DataFrame, columns: list[str]) -> DataFrame:
    """``df`` as it is when a stateful operator's partitions made it (``spark_compat.partitioned_by_state``),
    else ``by_content``."""
    return df if spark_compat.partitioned_by_state(df) else by_content(df, columns)
