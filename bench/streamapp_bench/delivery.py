"""The delivery bench: what `delivery: exactly-once` on the Kafka sink costs against Spark's own
at-least-once sink, (a) and (a-eos) on the same backlog, interleaved and repeated, then both at one
fixed rate for end-to-end latency. Medians with their spread; the ratio of each pair comes from runs
made back to back."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from . import dataplane, engines
from .rounds import interleave, per_round_ratio, spread

log = logging.getLogger("bench.delivery")
PAIR = ("runtime", "runtime-eos")


def run(bed, workdir: Path, n: int, partitions: int, max_offsets: int, users: int, repeats: int, live_seconds: float,
        timeout: float, warm_seconds: float = dataplane.WARM_SECONDS) -> dict:
    bootstrap = bed.kafka.bootstrap
    backlog, produced, counted = dataplane.produce_backlog(bootstrap, "clicks-delivery", n, users, partitions)
    base = engines.Run(bootstrap, backlog, "", workdir, "updates", max_offsets, partitions)
    runs: dict[str, list[dict]] = {e: [] for e in PAIR}
    # neither always goes first on a warming machine
    for i, engine in interleave(PAIR, repeats, alternate=True):
        r = replace(base, target=f"out-{engine}-{i}", workdir=workdir / f"tput-{engine}-{i}")
        runs[engine].append(dataplane.throughput(bed, r, engine, counted, produced, timeout))
    rates_of = {e: [r["events_per_s"] for r in runs[e]] for e in PAIR}
    ratio = per_round_ratio(rates_of["runtime-eos"], rates_of["runtime"])
    rates = {e: spread(rates_of[e]) for e in PAIR}
    live_rate = 0.5 * min(r["median"] for r in rates.values() if r["median"]) if all(r["median"] for r in rates.values()) \
        else 1000.0
    latency = {e: dataplane.latency(replace(base, source=f"live-in-{e}", target=f"live-out-{e}", workdir=workdir / f"live-{e}",
                                            max_offsets=0), e, live_rate, live_seconds, timeout, warm_seconds)
               for e in PAIR}
    result = {"n": produced, "counted": counted, "partitions": partitions, "max_offsets_per_trigger": max_offsets,
              "repeats": repeats, "events_per_s": rates, "eos_over_alo": ratio, "live_rate": live_rate,
              "latency": {e: {k: latency[e].get(k) for k in ("p50_ms", "p99_ms", "max_ms", "latencies", "missing", "finished")}
                          for e in PAIR},
              "runs": {e: [{k: r.get(k) for k in ("events_per_s", "finished", "wall_seconds", "measured_seconds")}
                           for r in runs[e]] for e in PAIR}}
    log.info("delivery: %s", result)
    return result
