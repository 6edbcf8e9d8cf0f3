"""The delivery bench: what `delivery: exactly-once` on the Kafka sink costs against Spark's own
at-least-once sink, (a) and (a-eos) on the same backlog, interleaved and repeated, then both at one
fixed rate for end-to-end latency. Medians with their spread; the ratio of each pair comes from runs
made back to back."""

from __future__ import annotations

import logging
import statistics
from dataclasses import replace
from pathlib import Path

from . import dataplane, engines, measure

log = logging.getLogger("bench.delivery")
PAIR = ("runtime", "runtime-eos")


def spread(values: list[float]) -> dict:
    """Median, lowest and highest of the values that were measured. Pure."""
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None, "runs": 0}
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": len(values)}


def run(bed, workdir: Path, n: int, partitions: int, max_offsets: int, users: int, repeats: int, live_seconds: float,
        timeout: float) -> dict:
    bootstrap = bed.kafka.bootstrap
    backlog, produced, counted = dataplane.produce_backlog(bootstrap, "clicks-delivery", n, users, partitions)
    base = engines.Run(bootstrap, backlog, "", workdir, "updates", max_offsets, partitions)
    runs: dict[str, list[dict]] = {e: [] for e in PAIR}
    ratios = []
    for i in range(repeats):
        order = PAIR if i % 2 == 0 else PAIR[::-1]  # neither always goes first on a warming machine
        for engine in order:
            r = replace(base, target=f"out-{engine}-{i}", workdir=workdir / f"tput-{engine}-{i}")
            runs[engine].append(dataplane.throughput(bed, r, engine, counted, produced, timeout))
        ratios.append(measure.ratio(runs["runtime-eos"][-1]["events_per_s"], runs["runtime"][-1]["events_per_s"]))
    rates = {e: spread([r["events_per_s"] for r in runs[e]]) for e in PAIR}
    live_rate = 0.5 * min(r["median"] for r in rates.values() if r["median"]) if all(r["median"] for r in rates.values()) \
        else 1000.0
    latency = {e: dataplane.latency(replace(base, source=f"live-in-{e}", target=f"live-out-{e}", workdir=workdir / f"live-{e}",
                                            max_offsets=0), e, live_rate, live_seconds, timeout) for e in PAIR}
    result = {"n": produced, "counted": counted, "partitions": partitions, "max_offsets_per_trigger": max_offsets,
              "repeats": repeats, "events_per_s": rates, "eos_over_alo": spread(ratios), "live_rate": live_rate,
              "latency": {e: {k: latency[e].get(k) for k in ("p50_ms", "p99_ms", "max_ms", "latencies", "missing", "finished")}
                          for e in PAIR},
              "runs": {e: [{k: r.get(k) for k in ("events_per_s", "finished", "wall_seconds", "measured_seconds")}
                           for r in runs[e]] for e in PAIR}}
    log.info("delivery: %s", result)
    return result
