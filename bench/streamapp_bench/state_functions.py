"""The state-functions bench (issue 17 §1, "measure before you switch"): the Python state function the
runtime's accumulate and table joins use today, `applyInPandasWithState`, against Spark 4.x's
`transformWithState` (row-based, 4.1+) and `transformWithStateInPandas`, each folding a running sum
and count per key in event-time order — accumulate's work — over the same Kafka backlog, with the
RocksDB state store, to a no-op sink. One Spark session runs every variant once per round,
interleaved; rows per second of `addBatch` time, medians with their spread, ratios per round.

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
VARIANTS = ("applyInPandasWithState", "transformWithState", "transformWithStateInPandas")
KEYS = 2000
OUT = "k string, off long, total double, n long"


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
    """name -> a function of the input frame giving the running values per row."""
    import pandas as pd
    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
    from pyspark.sql.streaming.state import GroupStateTimeout

    def ordered(frames):
        return pd.concat(frames).sort_values(["ts", "off"], kind="stable")

    def running(amounts, total: float, n: int) -> tuple[list, list, float, int]:
        totals, ns = [], []
        for amount in amounts:
            if not pd.isna(amount):
                total, n = total + float(amount), n + 1
            totals.append(total)
            ns.append(n)
        return totals, ns, total, n

    def pandas_state(df):
        def step(key, batches, state):
            frames = [b for b in batches if len(b)]
            if not frames:
                return
            rows = ordered(frames)
            totals, ns, total, n = running(rows["amount"], *(state.get if state.exists else (0.0, 0)))
            state.update((total, n))
            yield pd.DataFrame({"k": key[0], "off": rows["off"].values, "total": totals, "n": ns})
        return df.groupBy("k").applyInPandasWithState(step, OUT, "total double, n long", "update",
                                                      GroupStateTimeout.NoTimeout)

    class RowFold(StatefulProcessor):
        def init(self, handle: StatefulProcessorHandle) -> None:
            self.running = handle.getValueState("running", "total double, n long")

        def handleInputRows(self, key, rows, timerValues):
            total, n = self.running.get() if self.running.exists() else (0.0, 0)
            for r in sorted(rows, key=lambda r: (r.ts, r.off)):
                if r.amount is not None:
                    total, n = total + r.amount, n + 1
                yield Row(k=key[0], off=r.off, total=total, n=n)
            self.running.update((total, n))

        def close(self) -> None:
            pass

    class PandasFold(RowFold):
        def handleInputRows(self, key, rows, timerValues):
            frames = [b for b in rows if len(b)]
            if not frames:
                return
            rows = ordered(frames)
            totals, ns, total, n = running(rows["amount"], *(self.running.get() if self.running.exists() else (0.0, 0)))
            self.running.update((total, n))
            yield pd.DataFrame({"k": key[0], "off": rows["off"].values, "total": totals, "n": ns})

    return {"applyInPandasWithState": pandas_state,
            "transformWithState": lambda df: df.groupBy("k").transformWithState(RowFold(), OUT, "Update", "None"),
            "transformWithStateInPandas": lambda df: df.groupBy("k").transformWithStateInPandas(
                PandasFold(), OUT, "Update", "None")}


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
                            F.col("offset").alias("off")).select("v.*", "off")
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
