"""The data-plane bench: the same backlog through (a)–(d) for the sustained rate, then (a)–(c) at a
fixed rate (half the slowest engine's maximum) for end-to-end latency, then the DB-write ratio of the
example as written (emit final, Kafka and Postgres sinks) over the backlog."""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import replace
from pathlib import Path

from . import clicks, engines, measure, topics

log = logging.getLogger("bench.data")
WARMUP_EVENTS = 300


def _stop(proc) -> None:
    if proc is not None:
        proc.stop(grace=20)


def produce_backlog(bootstrap: str, name: str, n: int, users: int, partitions: int) -> tuple[str, int, int]:
    """N generated click events into a new topic: (topic, events produced, clicks and page views among them)."""
    topic = topics.create(bootstrap, name, partitions)
    counted = 0

    def events():
        nonlocal counted
        for key, value in clicks.backlog(n, seed=0, users=users):
            counted += clicks.counted(value)
            yield key, value

    produced = topics.produce(bootstrap, topic, events())
    return topic, produced, counted


def throughput(bed, run: engines.Run, engine: str, counted: int, total: int, timeout: float) -> dict:
    run.workdir.mkdir(parents=True, exist_ok=True)
    topics.create(run.bootstrap, run.target, run.partitions)
    reader = topics.OutputReader(run.bootstrap, run.target).start()
    began = time.monotonic()
    proc = engines.ENGINES[engine](run)
    try:
        finished = reader.wait_for(counted, timeout, alive=lambda: proc.running)
        wall = time.monotonic() - began
    finally:
        _stop(proc)
        reader.stop()
    rate = measure.sustained_rate(measure.curve_from_rows(reader.rows), counted)
    events_per_s = rate["per_second"] * total / counted if rate["per_second"] else None
    out = {"engine": engine, "finished": finished, "events_per_s": events_per_s, "output_rows": len(reader.rows),
           "events_accounted": reader.progress, "counted_events": counted, "wall_seconds": round(wall, 1),
           "measured_seconds": rate["seconds"],
           "output_seconds": (rate["last_ms"] - rate["first_ms"]) / 1000 if rate.get("first_ms") else None}
    if not finished:
        out["log_tail"] = proc.log_tail(15)
    progress = run.workdir / engines.PROGRESS
    if progress.exists():
        lines = [json.loads(line) for line in progress.read_text().splitlines() if line.strip()]
        out["batch_profile"] = measure.batch_profile(lines, engines.runtime_query(run))
    log.info("throughput %s: %s", engine, {k: v for k, v in out.items() if k != "log_tail"})
    return out


def raw_throughput(run: engines.Run, total: int, min_seconds: float, timeout: float) -> dict:
    """The raw consumer, with as many passes over the topic as it takes to last `min_seconds`."""
    passes, out = 1, {}
    for _attempt in range(3):  # the first pass runs cold: the estimate of how many passes improves
        proc = engines.raw_consumer(replace(run, workdir=run.workdir / f"raw-{passes}"), total * passes)
        began = time.monotonic()
        while proc.running and time.monotonic() - began < timeout:
            time.sleep(0.2)
        log_path = proc.log_path
        _stop(proc)
        points = engines.raw_progress(log_path)
        rate = measure.sustained_rate(points, total * passes)
        seconds = (points[-1][0] - points[0][0]) / 1000 if len(points) > 1 else 0
        out = {"engine": "raw", "events_per_s": rate["per_second"], "passes": passes,
               "records_read": points[-1][1] if points else 0, "measured_seconds": rate["seconds"],
               "read_seconds": seconds, "finished": bool(points) and points[-1][1] >= total * passes}
        if seconds >= min_seconds or not rate["per_second"]:
            break
        passes = max(passes + 1, math.ceil(passes * min_seconds / max(seconds, 0.5) * 1.2))
    log.info("throughput raw: %s", out)
    return out


def latency(run: engines.Run, engine: str, rate: float, seconds: float, timeout: float) -> dict:
    run.workdir.mkdir(parents=True, exist_ok=True)
    topics.create(run.bootstrap, run.source, run.partitions)
    topics.create(run.bootstrap, run.target, run.partitions)
    reader = topics.OutputReader(run.bootstrap, run.target).start()
    proc = engines.ENGINES[engine](run)
    try:
        warm = list(clicks.paced(WARMUP_EVENTS * 10, WARMUP_EVENTS / (WARMUP_EVENTS * 10), seed=7, prefix="warmup-"))
        topics.produce(run.bootstrap, run.source, warm)
        warm_counted = sum(clicks.counted(v) for _, v in warm)
        ready = reader.wait_for(warm_counted, timeout, alive=lambda: proc.running)
        if not ready:
            return {"engine": engine, "finished": False, "log_tail": proc.log_tail(15)}
        began = time.monotonic()
        sent = topics.produce(run.bootstrap, run.source, clicks.paced(rate, seconds, seed=3))
        produce_seconds = time.monotonic() - began
        events = topics.read_input(run.bootstrap, run.source, sent + len(warm))
        live = [(at, e) for at, e in events if not e["uuid"].startswith("warmup-")]
        expected = warm_counted + sum(1 for _, e in live if e["event"] in clicks.COUNTED)
        finished = reader.wait_for(expected, timeout, idle=30, alive=lambda: proc.running)
    finally:
        _stop(proc)
        reader.stop()
    lat, missing = measure.event_latencies(live, reader.rows)
    out = {"engine": engine, "finished": finished, "rate": rate, "events": sent,
           "achieved_rate": sent / produce_seconds if produce_seconds else None,
           "p50_ms": measure.percentile(lat, 50), "p99_ms": measure.percentile(lat, 99),
           "max_ms": max(lat) if lat else None, "latencies": len(lat), "missing": missing}
    log.info("latency %s: %s", engine, out)
    return out


def db_writes(run: engines.Run, total: int, dsn: str, timeout: float) -> dict:
    """The example as written (emit final, Kafka + Postgres sinks) over the backlog, available-now."""
    import psycopg

    run = replace(run, mode="final", postgres_dsn=dsn)
    run.workdir.mkdir(parents=True, exist_ok=True)
    topics.create(run.bootstrap, run.target, run.partitions)
    proc = engines.runtime(run, available_now=True)
    began = time.monotonic()
    try:
        while proc.running and time.monotonic() - began < timeout:
            time.sleep(0.5)
        wall = time.monotonic() - began
        code = proc.proc.returncode if proc.proc else None
    finally:
        _stop(proc)
    with psycopg.connect(dsn) as conn:
        batches, upserts = conn.execute("SELECT count(*), coalesce(sum(rows), 0) FROM streamapp_batches").fetchone()
        stored, covered = conn.execute("SELECT count(*), coalesce(sum(clicks + page_views), 0) FROM session_stats").fetchone()
    out = {"exit_code": code, "wall_seconds": round(wall, 1), "events": total, "rows_upserted": int(upserts),
           "partition_commits": int(batches), "rows_stored": int(stored), "events_in_closed_windows": int(covered),
           "db_write_ratio": upserts / total if total else None}
    log.info("db writes: %s", out)
    return out


def run(bed, workdir: Path, n: int, partitions: int, live_seconds: float, max_offsets: int, users: int,
        timeout: float, engines_to_run=("runtime", "handwritten", "kstreams"), min_seconds: float = 60,
        variants=("runtime-nodlq",), only: tuple[str, ...] = ()) -> dict:
    """``only``: measure just these engines' sustained rates (and "raw"), skipping latency and DB writes."""
    unknown = set(only) - set(engines.ENGINES) - {"raw"}
    if unknown:
        raise ValueError(f"unknown engines {', '.join(sorted(unknown))}; known: {', '.join([*engines.ENGINES, 'raw'])}")
    if only:
        engines_to_run, variants = tuple(e for e in only if e in engines.ENGINES), ()
    bootstrap = bed.kafka.bootstrap
    began = time.monotonic()
    backlog, produced, counted = produce_backlog(bootstrap, "clicks-backlog", n, users, partitions)
    result = {"n": produced, "counted": counted, "partitions": partitions, "users": users,
              "max_offsets_per_trigger": max_offsets, "produce_seconds": round(time.monotonic() - began, 1)}
    log.info("backlog: %s", result)
    base = engines.Run(bootstrap, backlog, "", workdir, "updates", max_offsets, partitions)
    rates, larger = {}, {}
    for engine in (*engines_to_run, *variants):
        r = replace(base, target=f"out-{engine}", workdir=workdir / f"tput-{engine}")
        rates[engine] = throughput(bed, r, engine, counted, produced, timeout)
        size = measure.larger_n(produced, rates[engine], min_seconds)
        if size:  # N was too small for this engine to work `min_seconds`: again, on a larger backlog
            if size not in larger:
                larger[size] = produce_backlog(bootstrap, f"clicks-backlog-{size}", size, users, partitions)
            topic, size_produced, size_counted = larger[size]
            at_n = {k: rates[engine][k] for k in ("events_per_s", "output_seconds", "measured_seconds")}
            r = replace(base, source=topic, target=f"out-{engine}-{size}", workdir=workdir / f"tput-{engine}-{size}")
            rates[engine] = {**throughput(bed, r, engine, size_counted, size_produced, timeout), "n": size_produced,
                             "at_default_n": at_n}
    if not only or "raw" in only:
        rates["raw"] = raw_throughput(replace(base, workdir=workdir / "tput-raw"), produced, min_seconds, timeout)
    result["throughput"] = rates
    if only:
        return {**result, "ratios": ratios(rates)}
    measured = [rates[e]["events_per_s"] for e in engines_to_run if rates[e]["events_per_s"]]
    live_rate = 0.5 * min(measured) if measured else 1000.0
    result["live_rate"] = live_rate
    result["latency"] = {
        engine: latency(replace(base, source=f"live-in-{engine}", target=f"live-out-{engine}",
                                workdir=workdir / f"live-{engine}", max_offsets=0), engine, live_rate,
                        live_seconds, timeout)
        for engine in engines_to_run}
    if bed.postgres is not None and "runtime" in engines_to_run:
        result["db"] = db_writes(replace(base, target="out-db", workdir=workdir / "db"), produced,
                                 bed.postgres.dsn, timeout)
    result["ratios"] = ratios(rates)
    return result


def ratios(rates: dict) -> dict:
    get = lambda e: rates.get(e, {}).get("events_per_s")  # noqa: E731
    return {"a_over_b": measure.ratio(get("runtime"), get("handwritten")),
            "a_over_c": measure.ratio(get("runtime"), get("kstreams")),
            "a_over_d": measure.ratio(get("runtime"), get("raw")),
            "a_nodlq_over_b": measure.ratio(get("runtime-nodlq"), get("handwritten")),
            "a_nodlq_over_c": measure.ratio(get("runtime-nodlq"), get("kstreams"))}
