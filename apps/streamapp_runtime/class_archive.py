"""A class-data-sharing archive of the classes a driver loads: ``python class_archive.py DEST``.

A JVM that maps the archive (``-XX:SharedArchiveFile``) takes those classes ready-parsed and
verified instead of loading them from Spark's jars, which is most of the CPU a Spark JVM spends
before its first batch (docs/performance.md, "Start-up"). The archive is made by running a small
streaming job like the runtime's (a source, JSON, a window aggregation kept in RocksDB, a batch
sink) on local Spark with ``-XX:ArchiveClassesAtExit``; it fits only the JDK and the Spark jars it
was made with, and a JVM given one that does not fit ignores it (``-Xshare:auto``).

Self-contained (only pyspark): the runtime image makes its archive before the runtime's code is in it,
so the two reads of py4j it needs (the JVM's classpath, the gateway process to wait for) are here
rather than in spark_compat.
"""

from __future__ import annotations

import os
import sys
import tempfile


def warm_up(spark, workdir: str) -> None:
    from pyspark.sql import functions as F

    events = (spark.readStream.format("rate").option("rowsPerSecond", 200).load()
              .select(F.to_json(F.struct(F.col("value").cast("string").alias("user"),
                                         F.col("timestamp").alias("ts"))).alias("json"))
              .select(F.from_json("json", "user string, ts timestamp").alias("e")).select("e.*")
              .withWatermark("ts", "1 second")
              .groupBy(F.window("ts", "1 second"), (F.length("user") % 3).alias("k"))
              .agg(F.count("*").alias("n"), F.max("user").alias("last")))
    query = (events.writeStream.outputMode("append").trigger(processingTime="1 second")
             .option("checkpointLocation", os.path.join(workdir, "checkpoint"))
             .foreachBatch(lambda frame, _batch: frame.collect()).start())
    while query.lastProgress is None or query.lastProgress["batchId"] < 3:
        query.awaitTermination(1)
        if query.exception():
            raise RuntimeError(str(query.exception()))
    query.stop()


def main(dest: str) -> int:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    dest = os.path.abspath(dest)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    partial = f"{dest}.{os.getpid()}.partial"  # the JVM writes it as it exits; renamed once whole
    with tempfile.TemporaryDirectory(prefix="class-archive-") as workdir:
        spark = (SparkSession.builder.master("local[2]").appName("class-archive")
                 .config("spark.driver.extraJavaOptions", f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds=off")
                 .config("spark.ui.enabled", "false")
                 .config("spark.sql.shuffle.partitions", "2")
                 .config("spark.sql.streaming.stateStore.providerClass",
                         "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
                 .config("spark.local.dir", os.path.join(workdir, "local"))
                 .config("spark.sql.warehouse.dir", os.path.join(workdir, "warehouse"))
                 .getOrCreate())
        try:
            warm_up(spark, workdir)
            # A JVM maps the archive only when its classpath starts with the one it was made with:
            # the runtime image's executors put this one first (entrypoint.sh).
            classpath = spark.sparkContext._jvm.java.lang.System.getProperty("java.class.path")
            with open(f"{dest}.classpath", "w") as out:
                out.write(classpath)
        finally:
            spark.stop()
            jvm = SparkContext._gateway.proc  # the JVM exits when its stdin closes, and writes the archive then
            jvm.stdin.close()
            jvm.wait(timeout=300)
    if not os.path.isfile(partial):
        print(f"class_archive: the JVM wrote no archive to {partial}", file=sys.stderr)
        return 1
    os.replace(partial, dest)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: class_archive.py DEST")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("SPARK_LOCAL_HOSTNAME", "localhost")
    sys.exit(main(sys.argv[1]))
