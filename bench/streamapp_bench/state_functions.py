"""The state-functions bench (issue 17 §1): the runtime's `accumulate` step — a running sum and count per
key in event-time order — compiled with each of the Python state APIs its checkpoints may have
(compile/steps/keyed_state.py): `applyInPandasWithState` (checkpoints written before the switch) and
`transformWithState` (row-based, Spark 4.1+, new checkpoints), over the same Kafka backlog, with the
RocksDB state store, to a no-op sink. One Spark session runs each once per round, interleaved; rows
per second of `addBatch` time, medians with their spread, ratios per round. (The first version
compared hand-written folds, `transformWithStateInPandas` too: docs/runtime.md, "Spark 4.2".)

python -m streamapp_bench.state_functions BOOTSTRAP TOPIC ROUNDS OUT.json   (the job; `run` starts it)
"""

from __future__ import annotations

import json
import logging
import random
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

from streamapp_testbed import kafka_admin
from streamapp_testbed.process import ManagedProcess

from .engines import ENV
from .rounds import per_round_ratio, spread

log = logging.getLogger("bench.statefns")
VARIANTS = ("applyInPandasWithState", "transformWithState")  # contract.STATE_FUNCTIONS, the older first
KEYS = 2000


def backlog(n: int, seed: int = 1) -> Iterator[tuple[str, str]]:
    rng, start = random.Random(seed), datetime(2026, 1, 1, tzinfo=timezone.utc)
    for i in range(n):
        key = f"k{rng.randrange(KEYS)}"
        ts = (start + timedelta(milliseconds=5 * i)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        yield key, json.dumps({"k": key, "amount": round(rng.uniform(1, 100), 2), "ts": ts})


def run(bed, workdir: Path, n: int, rounds: int, partitions: int, timeout: float) -> dict:
    bootstrap = bed.kafka.bootstrap
    kafka_admin.create_topic(bootstrap, "statefns-in", partitions)
    produced = kafka_admin.produce(bootstrap, "statefns-in", backlog(n), producer_config={"linger.ms": 20})
    out = workdir / "statefns.json"
    job = ManagedProcess("statefns", [sys.executable, "-m", "streamapp_bench.state_functions", bootstrap, "statefns-in",
                                      str(rounds), str(out)], workdir / "statefns.log",
                         env={**ENV, "PYSPARK_PYTHON": sys.executable}).start()  # transformWithState needs protobuf
    job.proc.wait(timeout * rounds)
    if not out.exists():
        errors = [line for line in job.log_path.read_text(errors="replace").splitlines() if "Error" in line]
        raise RuntimeError(f"the state-functions job failed: {errors[:3]}\n{job.log_tail(10)}")
    runs = json.loads(out.read_text())
    rates = {v: [r["rows_per_s"] for r in runs[v]] for v in VARIANTS}
    return {"n": produced, "keys": KEYS, "partitions": partitions, "rounds": rounds,
            "rows_per_s": {v: spread(rates[v]) for v in VARIANTS},
            "over_pandas_state": {v: per_round_ratio(rates[v], rates[VARIANTS[0]]) for v in VARIANTS[1:]},
            "runs": runs}


def _variants():
    """name -> a function of the input frame giving the running values per row: the runtime's own
    accumulate step, compiled with each Python state API (compile/steps/keyed_state.py)."""
    from streamapp_api import Accumulate
    from streamapp_runtime.compile.frame import Frame
    from streamapp_runtime.compile.steps.accumulate import accumulate

    step = Accumulate.model_validate({"key": ["k"], "columns": {"total": "sum(amount)", "n": "count(amount)"}})

    def compiled(api: str):
        return lambda df: accumulate(Frame(df, "ts", None, "statefns"), step, "updates", "statefns", api).df

    return {api: compiled(api) for api in VARIANTS}


def main(argv: list[str]) -> int:
    import time

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from streamapp_runtime.run.session import bind_to_loopback
    from streamapp_testbed.paths import installed

    bootstrap, topic, rounds, out = argv[0], argv[1], int(argv[2]), Path(argv[3])
    bind_to_loopback()
    spark = (SparkSession.builder.master("local[2]").appName("bench-statefns")
             .config("spark.jars", installed().spark_jars_conf()).config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.streaming.stateStore.providerClass",
                     "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
             .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true").getOrCreate())
    variants = _variants()
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for i in range(rounds):
        for name in VARIANTS:
            raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
                   .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "50000").load())
            df = raw.select(F.from_json(F.col("value").cast("string"), "k string, amount double, ts timestamp").alias("v"),
                            F.col("offset").alias("_offset")).select("v.*", "_offset")
            query = (variants[name](df).writeStream.format("noop").outputMode("update")
                     .option("checkpointLocation", str(out.parent / f"checkpoint-{name}-{i}"))
                     .trigger(availableNow=True).start())
            began = time.monotonic()
            query.awaitTermination()
            busy = [p for p in query.recentProgress if p["numInputRows"]]
            rows, add = sum(p["numInputRows"] for p in busy), sum(p["durationMs"].get("addBatch", 0) for p in busy) / 1000
            runs[name].append({"rows": rows, "addBatch_s": add, "wall_s": time.monotonic() - began,
                               "rows_per_s": rows / add if add else None})
            print(name, i, runs[name][-1], flush=True)
    out.write_text(json.dumps(runs))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
