"""Start an app's queries and supervise them: what `streamapp run` and the driver pod both execute.

SIGTERM asks every query to stop at the end of its current micro-batch; once each has committed,
``run`` returns 0. A query that loses Kafka (see ``recovery``) is restarted from its checkpoint after
a backoff; any other failure makes ``run`` stop the others and return 1, and the checkpoint resumes
it on the next start with nothing lost.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from dataclasses import dataclass, field

from streamapp_api import StreamApp
from streamapp_api.durations import parse_duration, spark_interval

from . import plan, recovery
from .compiler import Compiler
from .dlq import DLQ_MIN_INTERVAL_S, dead_letters
from .kafka_wait import partition_counts
from .metrics import Metrics
from .settings import Settings, choose_shuffle_partitions, postgres_uri, read_recorded, write_recorded
from .sinks import kafka as kafka_sink
from .sinks import postgres as pg_sink

log = logging.getLogger("streamapp.runtime")


@dataclass
class Running:
    app: StreamApp
    metrics: Metrics
    queries: list = field(default_factory=list)
    listener: object = None
    stop_requested: threading.Event = field(default_factory=threading.Event)
    plans: list = field(default_factory=list)  # queries[i] runs plans[i]
    restart: object = None  # QueryPlan -> a new StreamingQuery on the same checkpoint

    def query_names(self) -> list[str]:
        return [q.name for q in self.queries]


def prepare_session(spark, app: StreamApp, settings: Settings, options: dict[str, str], wait: bool = True) -> int:
    """Per-app SQL settings: state store and the checkpoint's fixed shuffle partitions."""
    from .settings import HDFS_PROVIDER, ROCKSDB_PROVIDER

    spark.conf.set("spark.sql.streaming.stateStore.providerClass",
                   ROCKSDB_PROVIDER if app.spec.state.store == "rocksdb" else HDFS_PROVIDER)
    spark.conf.set("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    counts = partition_counts(options, plan.input_topics(app), wait=wait)
    recorded = read_recorded(settings.checkpoint_root)
    partitions, why = choose_shuffle_partitions(recorded.get("shufflePartitions"), app.spec.shuffle_partitions,
                                                settings.spark_conf.get("spark.sql.shuffle.partitions"), counts)
    if recorded.get("shufflePartitions") is None:
        write_recorded(settings.checkpoint_root, {**recorded, "shufflePartitions": partitions, "app": app.metadata.name})
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    log.info("shuffle partitions: %d (%s)", partitions, why)
    return partitions


def _trigger(writer, app: StreamApp, settings: Settings, min_interval_s: float = 0):
    if settings.available_now:
        return writer.trigger(availableNow=True)
    trigger_s = parse_duration(app.spec.trigger).total_seconds() if app.spec.trigger else 0
    if min_interval_s > trigger_s:
        return writer.trigger(processingTime=f"{int(min_interval_s)} seconds")
    if app.spec.trigger:
        return writer.trigger(processingTime=spark_interval(app.spec.trigger))
    return writer


def start_query(spark, compiler: Compiler, app: StreamApp, settings: Settings, qp: plan.QueryPlan,
                options: dict[str, str]):
    if qp.kind == "dlq":
        source = next(s for s in app.spec.sources if s.name == qp.reads)
        df = dead_letters(spark, source, options)
        writer = df.writeStream.format("kafka").options(**options).option("topic", plan.dlq_topic(app))
    else:
        sink = app.spec.sinks[qp.index]
        where = f"spec.sinks[{qp.index}]"
        df = compiler.frame(qp.reads).df
        if qp.kind == "console":
            shown = df.select(*[c for c in df.columns if not c.startswith("__")])
            writer = shown.writeStream.format("console").option("truncate", "false").option("numRows", "50")
        elif qp.kind == "kafka":
            key = kafka_sink.key_column(df, sink.kafka.key, where)
            writer = kafka_sink.kafka_rows(df, key).writeStream.format("kafka").options(**options)
            writer = writer.option("topic", sink.kafka.topic)
        else:
            pg = sink.postgres
            uri = postgres_uri(settings, pg.secret_ref.name, f"{where}.postgres")
            columns = pg_sink.columns_of(df, list(pg.primary_key), where)
            if pg.create_table:
                pg_sink.ensure_tables(uri, pg_sink.create_statements(pg.table, columns, list(pg.primary_key)))
            else:
                pg_sink.ensure_tables(uri, pg_sink.create_statements(pg.table, columns, list(pg.primary_key))[-1:])
            target = pg_sink.Target(uri, pg.table, tuple(c for c, _ in columns), tuple(t for _, t in columns),
                                    tuple(pg.primary_key), qp.name)
            writer = df.writeStream.foreachBatch(pg_sink.batch_writer(target, columns))
    writer = writer.queryName(qp.name).outputMode(qp.output_mode).option("checkpointLocation", qp.checkpoint)
    return _trigger(writer, app, settings, DLQ_MIN_INTERVAL_S if qp.kind == "dlq" else 0).start()


def start(spark, app: StreamApp, settings: Settings, quiet: bool = False, wait_for_topics: bool = True) -> Running:
    from .listener import ProgressListener

    options = plan.kafka_options(app, settings.kafka_override, settings.kafka_env_options)
    prepare_session(spark, app, settings, options, wait=wait_for_topics)
    plans = plan.query_plans(app, settings.checkpoint_root, settings.console)
    metrics = Metrics(app.metadata.name, plan.topic_sources(app), {p.name: p.reads for p in plans if p.kind == "dlq"})
    running = Running(app, metrics)
    running.listener = ProgressListener(metrics, {p.name for p in plans}, quiet=quiet)
    spark.streams.addListener(running.listener)
    compiler = Compiler(spark, app, options)
    running.restart = lambda qp: start_query(spark, compiler, app, settings, qp, options)
    try:
        for qp in plans:
            running.queries.append(start_query(spark, compiler, app, settings, qp, options))
            running.plans.append(qp)
            log.info("started query %s (%s, %s mode) checkpoint %s", qp.name, qp.kind, qp.output_mode, qp.checkpoint)
    except Exception:
        stop_now(spark, running)
        raise
    return running


def stop_now(spark, running: Running) -> None:
    for query in running.queries:
        try:
            query.stop()
        except Exception as exc:  # already failed
            log.debug("stopping %s: %s", query.name, exc)
    if running.listener is not None:
        spark.streams.removeListener(running.listener)
        running.listener = None


def stop_gracefully(running: Running, timeout: float = 600) -> None:
    """Stop each query between micro-batches: the current batch finishes and commits first."""
    deadline = time.monotonic() + timeout
    for query in running.queries:
        while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
            time.sleep(0.05)
        if query.isActive:
            query.stop()


def failure_text(exc) -> str:
    """The message of a query's exception and, when Spark gives it, the JVM stack with its causes."""
    return "\n".join(part for part in (str(exc), getattr(exc, "_stackTrace", None) or "") if part)


def schedule_retry(spark, running: Running, waiting: dict[int, float], i: int, failure: str, attempt: int,
                   policy: recovery.RetryPolicy, gave_up: str, retrying: str) -> bool:
    """Put failed query `i` in `waiting` for its next try; when the failure is not retryable, stop
    every query and return False (the app exits 1 and Kubernetes restarts the driver)."""
    name = running.plans[i].name
    decision = recovery.decide(failure, attempt, policy)
    if not decision.retry:
        log.error("query %s %s: %s", name, gave_up, failure.split("\n")[0])
        stop_gracefully(running, timeout=60)
        stop_now(spark, running)
        return False
    log.warning("query %s %s (%s); attempt %d, next try in %.0fs from its checkpoint",
                name, retrying, decision.reason, attempt, decision.delay)
    waiting[i] = time.monotonic() + decision.delay
    return True


def supervise(spark, running: Running, poll: float = 0.2, policy: recovery.RetryPolicy = recovery.RetryPolicy()) -> int:
    """Wait until every query ends (available-now), one fails for good (1) or a stop is requested (0).

    A query that failed because Kafka could not be reached waits (``recovery.decide``) and starts
    again on its checkpoint; the others keep running meanwhile.
    """
    waiting: dict[int, float] = {}  # index of a failed query -> monotonic time of its restart
    attempts: dict[int, int] = {}  # index -> failures in a row
    while True:
        if running.stop_requested.is_set():
            log.info("stop requested: finishing the current micro-batches")
            # With Kafka gone, a running micro-batch cannot commit: do not wait for it (it is replayed).
            stop_gracefully(running, timeout=10 if waiting else 600)
            stop_now(spark, running)
            return 0
        for i, query in enumerate(running.queries):
            if i in waiting or query.isActive or query.exception() is None:
                continue
            attempts[i] = recovery.next_attempt(attempts.get(i, 0), progressed=bool(query.recentProgress))
            if not schedule_retry(spark, running, waiting, i, failure_text(query.exception()), attempts[i], policy,
                                  gave_up="failed", retrying="lost Kafka"):
                return 1
        for i, due in list(waiting.items()):
            if time.monotonic() < due:
                continue
            del waiting[i]
            qp = running.plans[i]
            try:
                running.queries[i] = running.restart(qp)
            except Exception as exc:  # noqa: BLE001 - a restart that fails is decided like a failed query
                attempts[i] += 1
                if not schedule_retry(spark, running, waiting, i, failure_text(exc), attempts[i], policy,
                                      gave_up="could not restart", retrying="could not restart"):
                    return 1
                continue
            running.metrics.restarted(qp.name)
            log.info("restarted query %s from checkpoint %s", qp.name, qp.checkpoint)
        if not waiting and all(not q.isActive for q in running.queries):
            stop_now(spark, running)
            return 0
        time.sleep(poll)


def stale_after(app: StreamApp) -> float:
    trigger = parse_duration(app.spec.trigger).total_seconds() if app.spec.trigger else 0
    return max(300.0, 5 * trigger)


def install_sigterm(running: Running) -> None:
    if threading.current_thread() is threading.main_thread():
        def handler(signum, frame):  # noqa: ARG001
            running.stop_requested.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
