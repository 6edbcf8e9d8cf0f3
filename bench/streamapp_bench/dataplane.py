"""The data-plane bench: the same backlog through (a)–(d) for the sustained rate, then (a)–(c) at a
fixed rate (half the slowest engine's median) for end-to-end latency, each in rounds (every engine
once per round, interleaved: rounds.py), then the DB-write ratio of the example as written (emit
final, Kafka and Postgres sinks) over the backlog."""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import replace
from pathlib import Path

from . import clicks, dataplane_figures, engines, measure, rounds, topics

log = logging.getLogger("bench.data")
WARMUP_EVENTS = 300
# Seconds at a latency run's fixed rate before the measured ones. The runtime's first batches take
# several times as long as later ones until the JIT has compiled the hot paths; a user's app has run
# for hours, so the bench measures a warm engine.
WARM_SECONDS = 20
# Seconds at the rate after the measured ones, not measured. A Spark engine's micro-batch right after the
# input stops takes longer than the others and held the last measured events: a step at the top of its
# latency CDF. Its tasks waited for their consumers' last prefetch, which the broker
# holds for fetch.max.wait.ms once no records come. The runtime now waits at most 50 ms
# (streamapp_runtime.plan.reader_options), but the hand-written jobs keep Kafka's 500 ms. The bench
# measures the steady state, not the end of a burst.
COOL_SECONDS = 3
# The DB-write ratio is a count, not a rate: a million events of the backlog's kind give it (0.0636 on
# 3,000,000) in a third of the time; (b0)'s smaller backlog when it has one.
DB_N = 1_000_000


def _stop(proc) -> None:
    if proc is not None:
        proc.stop(grace=20)


def produce_backlog(bootstrap: str, name: str, n: int, users: int, partitions: int,
                    value_format: str = "json", registry: str | None = None) -> tuple[str, int, int]:
    """N generated click events into a new topic: (topic, events produced, clicks and page views among them).
    ``value_format`` avro: the same events, each value Avro in the Confluent wire format, its schema
    registered at ``registry`` under ``<topic>-value`` by confluent-kafka's serializer."""
    topic = topics.create(bootstrap, name, partitions)
    counted = 0
    encode = clicks.avro_encoder(registry, topic) if value_format == "avro" else None

    def events():
        nonlocal counted
        for key, value in clicks.backlog(n, seed=0, users=users):
            counted += clicks.counted(value)
            yield key, (encode(value) if encode else value)

    produced = topics.produce(bootstrap, topic, events())
    return topic, produced, counted


def throughput(bed, run: engines.Run, engine: str, counted: int, total: int, timeout: float,
               probe_seconds: float = 0) -> dict:
    """The engine through the whole backlog. With `probe_seconds` (an engine's first run), stopped early
    when it is too slow for the backlog (`measure.too_long`): its rate is then that of what it did."""
    run.workdir.mkdir(parents=True, exist_ok=True)
    topics.create(run.bootstrap, run.target, run.partitions)
    reader = topics.OutputReader(run.bootstrap, run.target).start()
    began = time.monotonic()
    proc = engines.ENGINES[engine](run)

    def too_long() -> bool:
        return bool(probe_seconds) and measure.too_long(*reader.output_ms(), reader.progress, counted, probe_seconds)

    try:
        finished = reader.wait_for(counted, timeout, alive=lambda: proc.running, enough=too_long)
        stopped_early = not finished and proc.running and too_long()
        wall = time.monotonic() - began
    finally:
        _stop(proc)
        reader.stop()
    curve = measure.curve_from_rows(reader.rows)
    rate = measure.sustained_rate(curve, curve[-1][1] if stopped_early else counted)
    events_per_s = rate["per_second"] * total / counted if rate["per_second"] else None
    out = {"engine": engine, "finished": finished, **({"stopped_early": True} if stopped_early else {}),
           "events_per_s": events_per_s, "output_rows": len(reader.rows),
           "events_accounted": reader.progress, "counted_events": counted, "wall_seconds": round(wall, 1),
           "measured_seconds": rate["seconds"],
           "output_seconds": (rate["last_ms"] - rate["first_ms"]) / 1000 if rate.get("first_ms") else None}
    if not finished and not stopped_early:
        out["log_tail"] = proc.log_tail(15)
    progress = run.workdir / engines.PROGRESS
    if progress.exists():
        lines = [json.loads(line) for line in progress.read_text().splitlines() if line.strip()]
        out["batch_profile"] = measure.batch_profile(lines, engines.runtime_query(run))
    log.info("throughput %s: %s", engine, {k: v for k, v in out.items() if k != "log_tail"})
    return out


def raw_throughput(run: engines.Run, total: int, min_seconds: float, timeout: float, passes: int = 0) -> dict:
    """The raw consumer, with as many passes over the topic as it takes to last `min_seconds`, or
    exactly `passes` (a later round: the first decided how many)."""
    out, attempts, passes = {}, 1 if passes else 3, passes or 1
    for _attempt in range(attempts):  # the first pass runs cold: the estimate of how many passes improves
        proc = engines.raw_consumer(replace(run, workdir=run.workdir / f"raw-{passes}"), total * passes)
        began = time.monotonic()
        while proc.running and time.monotonic() - began < timeout:
            time.sleep(0.2)
        log_path = proc.log_path
        _stop(proc)
        points = engines.raw_progress(log_path)
        rate = measure.sustained_rate(points, total * passes)
        seconds = (points[-1][0] - points[0][0]) / 1000 if len(points) > 1 else 0
        finished = bool(points) and points[-1][1] >= total * passes
        out = {"engine": "raw", "events_per_s": rate["per_second"], "passes": passes,
               "records_read": points[-1][1] if points else 0, "measured_seconds": rate["seconds"],
               "read_seconds": seconds, "finished": finished}
        if not finished or (seconds >= min_seconds and rate["per_second"]):
            break
        if rate["per_second"] and seconds > 0:  # too short: as many passes as last `min_seconds`
            passes = max(passes + 1, math.ceil(passes * min_seconds / seconds * 1.2))
        else:  # read before the consumer's first progress line (every 50 ms): no duration to scale by
            passes *= 10
    log.info("throughput raw: %s", out)
    return out


def latency(run: engines.Run, engine: str, rate: float, seconds: float, timeout: float,
            warm_seconds: float = WARM_SECONDS) -> dict:
    """Event → window row latency of `engine` at `rate`: once a few events have come through (the engine
    is up), `warm_seconds` at the rate, not measured, then `seconds` of measured events, then
    `COOL_SECONDS` not measured."""
    run.workdir.mkdir(parents=True, exist_ok=True)
    topics.create(run.bootstrap, run.source, run.partitions)
    topics.create(run.bootstrap, run.target, run.partitions)
    reader = topics.OutputReader(run.bootstrap, run.target).start()
    began = time.monotonic()
    phases = {}  # seconds of each step, for the bench's own time budget (bench/README.md, "How long")

    def lap(name: str) -> None:
        phases[name] = max(0.0, round(time.monotonic() - began - sum(phases.values()), 1))

    proc = engines.ENGINES[engine](run)
    try:
        warm = list(clicks.paced(WARMUP_EVENTS * 10, WARMUP_EVENTS / (WARMUP_EVENTS * 10), seed=7, prefix=f"{clicks.UNMEASURED}up-"))
        topics.produce(run.bootstrap, run.source, warm)
        ready = reader.wait_for(sum(clicks.counted(v) for _, v in warm), timeout, alive=lambda: proc.running)
        if not ready:
            return {"engine": engine, "finished": False, "log_tail": proc.log_tail(15)}
        lap("start")
        counted = [0]

        def count(records):
            for key, value in records:
                counted[0] += clicks.counted(value)
                yield key, value

        measured_from_ms = int((time.time() + warm_seconds - 1) * 1000)  # a second early: warm-ups are dropped
        topics.produce(run.bootstrap, run.source,
                       count(clicks.warm_then_measured(rate, seconds, warm_seconds, COOL_SECONDS)))
        lap("produce")
        produce_seconds = phases["produce"] - warm_seconds - COOL_SECONDS
        # only the measured seconds are read back (with the warm-up and librdkafka's default fetch
        # sizes, reading back took longer than the run)
        live = [(at, e) for at, e in topics.read_input(run.bootstrap, run.source, from_ms=measured_from_ms)
                if clicks.measured(e)]
        lap("read_input")
        expected = sum(clicks.counted(v) for _, v in warm) + counted[0]
        finished = reader.wait_for(expected, timeout, idle=30, alive=lambda: proc.running)
        lap("drain")
    finally:
        _stop(proc)
        reader.stop()
    lat, missing = measure.event_latencies(live, reader.rows)
    lap("stop_and_latencies")
    measured = len(live)
    out = {"engine": engine, "finished": finished, "rate": rate, "events": measured,
           "achieved_rate": measured / produce_seconds if produce_seconds > 0 else None,
           "warm_seconds": warm_seconds, "cool_seconds": COOL_SECONDS,
           "p50_ms": measure.percentile(lat, 50), "p99_ms": measure.percentile(lat, 99),
           "max_ms": max(lat) if lat else None, "latencies": len(lat), "missing": missing, "phases_s": phases}
    log.info("latency %s: %s", engine, out)
    out["cdf"] = rounds.quantiles(lat)  # the distribution, for the plot
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
    with psycopg.connect(dsn) as conn:  # the ledger of this run's query alone: the database may hold others'
        batches, upserts = conn.execute("SELECT count(*), coalesce(sum(rows), 0) FROM streamapp_batches WHERE query = %s",
                                        (engines.runtime_query(run, "postgres"),)).fetchone()
        stored, covered = conn.execute("SELECT count(*), coalesce(sum(clicks + page_views), 0) FROM session_stats").fetchone()
    out = {"exit_code": code, "wall_seconds": round(wall, 1), "events": total, "rows_upserted": int(upserts),
           "partition_commits": int(batches), "rows_stored": int(stored), "events_in_closed_windows": int(covered),
           "db_write_ratio": upserts / total if total else None}
    log.info("db writes: %s", out)
    return out


class Backlogs:
    """The input topics of the throughput runs, each produced once and read from the beginning by every
    run on it: the default N, and others for engines too fast or too slow for it (`ThroughputRounds`)."""

    def __init__(self, bootstrap: str, users: int, partitions: int, registry: str | None = None):
        self.bootstrap, self.users, self.partitions, self.registry = bootstrap, users, partitions, registry
        self.topics: dict[tuple[int, str], tuple[str, int, int]] = {}

    def of(self, n: int, value_format: str = "json") -> tuple[str, int, int]:
        """(topic, events produced, clicks and page views among them) of the backlog of N events, its values
        in ``value_format`` (the same events in every format)."""
        if (n, value_format) not in self.topics:
            name = "clicks-backlog" if not self.topics else f"clicks-backlog-{n}"
            if value_format != "json":
                name = f"clicks-backlog-{value_format}-{n}"
            self.topics[(n, value_format)] = produce_backlog(self.bootstrap, name, n, self.users, self.partitions,
                                                             value_format, self.registry)
        return self.topics[(n, value_format)]


class ThroughputRounds:
    """One engine's run in one round. Its first run decides the backlog of all its rounds: the one it ran
    on; or, when the engine wrote output for less than `min_seconds` there, a larger one; or, when it is
    so slow that it would take more than three times `min_seconds`, a smaller one (that first run is
    stopped once it has shown its rate). Then the first run is kept (as `at_default_n` when it ran on N)
    and the round's run is made again on the backlog decided. The first run is on N, or on the backlog
    the previous results decided for the engine (`first_n`, see `previous_sizes`): the same rule then
    keeps it, unless the engine got faster or slower, and the extra run it costs is saved."""

    def __init__(self, bed, base: engines.Run, backlogs: Backlogs, n: int, min_seconds: float, timeout: float,
                 first_n: dict[str, int] | None = None):
        self.bed, self.base, self.backlogs, self.n = bed, base, backlogs, n
        self.min_seconds, self.timeout = min_seconds, timeout
        self.first_n = first_n or {}
        self.size: dict[str, int] = {}  # engine → its backlog's N (the raw consumer: its passes)

    def run(self, i: int, engine: str) -> dict:
        if engine == "raw":
            topic, produced, _ = self.backlogs.of(self.n)
            # half of min_seconds: only a ceiling to compare with, and steady (2.98-3.11 million/s in 3 rounds)
            out = raw_throughput(replace(self.base, source=topic, workdir=self.base.workdir / f"tput-raw-{i}"), produced,
                                 self.min_seconds / 2, self.timeout, passes=self.size.get("raw", 0))
            self.size.setdefault("raw", out["passes"])
            return out
        if engine in self.size:
            return self._at(i, engine, self.size[engine])
        first = self.first_n.get(engine, self.n)
        out = self._at(i, engine, first, probe_seconds=self.min_seconds, tag="-first")
        self.size[engine] = measure.decided_n(self.backlogs.of(first, engines.INPUT_FORMATS.get(engine, "json"))[1],
                                              out, self.min_seconds)
        if self.size[engine] != first or out.get("stopped_early"):  # again, on the backlog decided
            at_n = {k: out[k] for k in ("events_per_s", "output_seconds", "measured_seconds", "stopped_early") if k in out}
            out = {**self._at(i, engine, self.size[engine]), **({"at_default_n": at_n} if first == self.n else {})}
        if first != self.n:
            out["first_n"] = first
        return out

    def _at(self, i: int, engine: str, n: int, probe_seconds: float = 0, tag: str = "") -> dict:
        topic, produced, counted = self.backlogs.of(n, engines.INPUT_FORMATS.get(engine, "json"))
        name = (f"{engine}-{i}" if n == self.n else f"{engine}-{i}-{n}") + tag
        r = replace(self.base, source=topic, target=f"out-{name}", workdir=self.base.workdir / f"tput-{name}")
        out = throughput(self.bed, r, engine, counted, produced, self.timeout, probe_seconds)
        return {**out, "n": produced} if n != self.n else out


def previous_sizes(path: Path, n: int, min_seconds: float) -> dict[str, int]:
    """engine → the backlog the data-plane results at ``path`` decided for it, when they were measured
    with the same N and `min_seconds` (else, or without results, nothing): where each engine's first
    run starts (ThroughputRounds)."""
    try:
        previous = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if previous.get("args", {}).get("n") != n or previous.get("args", {}).get("min_seconds") != min_seconds:
        return {}
    figures = previous.get("result", {}).get("throughput", {})
    return {engine: f["n"] for engine, f in figures.items() if isinstance(f.get("n"), int) and f["n"] != n}


def run(bed, workdir: Path, n: int, partitions: int, live_seconds: float, max_offsets: int, users: int,
        timeout: float, rounds_of_each: int = 3, engines_to_run=("runtime", "handwritten", "kstreams"),
        min_seconds: float = 60, variants=("runtime-nodlq", "runtime-avro", "handwritten-plain"), only: tuple[str, ...] = (),
        warm_seconds: float = WARM_SECONDS, results: Path | None = None, first_n: dict[str, int] | None = None) -> dict:
    """Every engine `rounds_of_each` times, interleaved (a, a′, b, c, d, d, c, b, a′, a, …) on the same backlog,
    then the latency runs interleaved the same way, then the DB writes. ``only``: measure just these
    engines' sustained rates (and "raw"), skipping latency and DB writes. ``results``: where the PNGs go.
    ``first_n``: the backlog each engine's first run starts from (`previous_sizes`; default N)."""
    unknown = set(only) - set(engines.ENGINES) - {"raw"}
    if unknown:
        raise ValueError(f"unknown engines {', '.join(sorted(unknown))}; known: {', '.join([*engines.ENGINES, 'raw'])}")
    if only:
        engines_to_run, variants = tuple(e for e in only if e in engines.ENGINES), ()
    bootstrap = bed.kafka.bootstrap
    began, started = time.monotonic(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    registry = bed.schema_registry.url if bed.schema_registry is not None else None
    if registry is None:  # a test bed without a registry: no engine that reads Avro
        variants = tuple(v for v in variants if v not in engines.INPUT_FORMATS)
    backlogs = Backlogs(bootstrap, users, partitions, registry)
    _, produced, counted = backlogs.of(n)
    result = {"n": produced, "counted": counted, "partitions": partitions, "users": users, "rounds": rounds_of_each,
              "max_offsets_per_trigger": max_offsets, "produce_seconds": round(time.monotonic() - began, 1)}
    log.info("backlog: %s", result)
    base = engines.Run(bootstrap, "", "", workdir, "updates", max_offsets, partitions, registry=registry)
    measured = dataplane_figures.in_order([*engines_to_run, *variants, *(("raw",) if not only or "raw" in only else ())])
    # every other round reversed: on a shared machine the last run of a round was the slowest of it in 4
    # of 6 rounds whatever engine it was (bench/README.md, "Rounds"), so no engine always goes last
    result["order"] = rounds.interleave(measured, rounds_of_each, alternate=True)
    each = ThroughputRounds(bed, base, backlogs, n, min_seconds, timeout, first_n)
    runs: dict[str, list[dict]] = {e: [] for e in measured}
    for i, engine in result["order"]:
        runs[engine].append({**each.run(i, engine), "round": i})
    result["throughput"] = dataplane_figures.throughput_figures(runs)
    result["ratios"] = dataplane_figures.ratios(runs)
    if not only:
        result.update(latency_rounds(base, engines_to_run, result["throughput"], rounds_of_each, live_seconds, timeout,
                                     warm_seconds))
        if bed.postgres is not None and "runtime" in engines_to_run:
            db_topic, db_produced, db_counted = backlogs.of(min(n, DB_N))
            result["db"] = {**db_writes(replace(base, source=db_topic, target="out-db", workdir=workdir / "db"),
                                        db_produced, bed.postgres.dsn, timeout), "counted_events": db_counted}
    if results is not None:
        dataplane_figures.plot(results, result, started)
    return result


def latency_rounds(base: engines.Run, engines_to_run, throughput_figures: dict, rounds_of_each: int,
                   live_seconds: float, timeout: float, warm_seconds: float = WARM_SECONDS) -> dict:
    """Each engine at half the slowest engine's median rate, `rounds_of_each` times, interleaved; every
    run on fresh topics."""
    live_rate = dataplane_figures.live_rate(throughput_figures, engines_to_run)
    runs: dict[str, list[dict]] = {e: [] for e in engines_to_run}
    for i, engine in rounds.interleave(dataplane_figures.in_order(engines_to_run), rounds_of_each, alternate=True):
        r = replace(base, source=f"live-in-{engine}-{i}", target=f"live-out-{engine}-{i}",
                    workdir=base.workdir / f"live-{engine}-{i}", max_offsets=0)
        runs[engine].append({**latency(r, engine, live_rate, live_seconds, timeout, warm_seconds), "round": i})
    return {"live_rate": live_rate, "latency": dataplane_figures.latency_figures(runs)}
