"""(b) The click-sessions aggregation written by hand in PySpark Structured Streaming: the floor of
overhead the StreamApp runtime is compared with. The runtime's state store and shuffle partitions
(local[2], RocksDB with changelog checkpointing, shuffle partitions = input partitions, UI off), but
Spark's own checkpoint file manager (the runtime writes a volume's checkpoint through Hadoop's
FileSystem API: bench/README.md, "How the data-plane figures were reached").

(b₀) With PARTITIONS `defaults`, the same job as a user would first write it: Spark's own settings
(200 shuffle partitions, the HDFS-backed state store), which the runtime's compiler chooses over.

python -m streamapp_bench.handwritten BOOTSTRAP INPUT OUTPUT CHECKPOINT MODE MAX_OFFSETS PARTITIONS|defaults
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    bootstrap, source, target, checkpoint, mode, max_offsets, partitions = argv
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from streamapp_runtime.run.session import bind_to_loopback
    from streamapp_testbed.paths import installed

    bind_to_loopback()  # the same local network settings as the runtime's own local sessions
    builder = (SparkSession.builder.master("local[2]").appName("bench-handwritten")
               .config("spark.jars", installed().spark_jars_conf())
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC"))
    if partitions != "defaults":
        builder = (builder.config("spark.sql.shuffle.partitions", partitions)
                   .config("spark.sql.streaming.stateStore.providerClass",
                           "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
                   .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true"))
    spark = builder.getOrCreate()
    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest"))
    if int(max_offsets) > 0:
        reader = reader.option("maxOffsetsPerTrigger", max_offsets)
    schema = "uuid string, session_id string, event string, time_spent long, ts timestamp"
    clicks = reader.load().select(F.from_json(F.col("value").cast("string"), schema).alias("e")).select("e.*")
    windows = (clicks.where(F.col("event").isin("click", "page_view"))
               .withWatermark("ts", "30 seconds")
               .groupBy(F.window("ts", "1 minute"), "session_id", "uuid")
               .agg(F.count_if(F.col("event") == "click").alias("clicks"),
                    F.count_if(F.col("event") == "page_view").alias("page_views"),
                    F.sum("time_spent").alias("time_spent")))
    out = windows.select(
        F.col("session_id").alias("key"),
        F.to_json(F.struct(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                           "session_id", "uuid", "clicks", "page_views", "time_spent")).alias("value"))
    query = (out.writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", target)
             .option("checkpointLocation", checkpoint).outputMode("append" if mode == "final" else "update")
             .queryName("handwritten").start())
    try:
        query.awaitTermination()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
