"""Start an app's queries and supervise them: what `streamapp run` and the driver pod both execute.

SIGTERM stops every query after its micro-batch in flight commits (a real-time one at once, see
``stopping``); then ``run`` returns 0. A query that loses Kafka (see ``recovery``) is restarted from
its checkpoint after a backoff; any other failure makes ``run`` stop the others and return 1, and the
checkpoint resumes it on the next start with nothing lost.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery

from streamapp_api import StreamApp, contract, realtime
from streamapp_api.checkpoint import is_local
from streamapp_api.durations import parse_duration, trigger_interval
from streamapp_api.expressions import expression_sites

from streamapp_runtime import plan, spark_compat
from streamapp_runtime.checkpoint.fence import Fence, owner_id
from streamapp_runtime.checkpoint.record import read_record, write_record
from streamapp_runtime.compile.compiler import Compiler
from streamapp_runtime.compile.frame import INTERNAL_PREFIX
from streamapp_runtime.run import (
    dead_letters, own_pod, plan_guard, recovery, rescale, restoring, snapshot_schedule, snapshots, stopping, termination,
)
from streamapp_runtime.run.consumer_groups import GroupCommitter, admin_commit
from streamapp_runtime.run.kafka_wait import admin_client, partition_counts
from streamapp_runtime.run.listener import ProgressListener
from streamapp_runtime.run.metrics import Metrics
from streamapp_runtime.run.settings import Settings, choose_shuffle_partitions, choose_state_function
from streamapp_runtime.sinks import WRITERS, QueryContext

log = logging.getLogger("streamapp.runtime")


@dataclass
class Running:
    app: StreamApp
    metrics: Metrics
    queries: list[StreamingQuery] = field(default_factory=list)
    listener: ProgressListener | None = None
    stop_requested: threading.Event = field(default_factory=threading.Event)
    plans: list[plan.QueryPlan] = field(default_factory=list)  # queries[i] runs plans[i]
    restart: Callable[[plan.QueryPlan], StreamingQuery] | None = None  # a new query on the same checkpoint
    committer: GroupCommitter | None = None  # each batch's offsets to the query's consumer group
    fence: Fence | None = None  # this driver's ownership of the checkpoint
    rescaler: rescale.Rescaler | None = None  # a driver pod's: follows the executor count on its pod
    snapshotter: snapshots.Snapshotter | None = None  # takes the snapshots asked for (pod or manifest)
    dead_letter_writer: dead_letters.DeadLetterWriter | None = None  # the sources whose sink queries count bad records
    ended_dry: set[str] = field(default_factory=set)  # available-now queries told to start no new batch

    def query_names(self) -> list[str]:
        return [q.name for q in self.queries]


def prepare_session(spark, app: StreamApp, settings: Settings, options: dict[str, str], wait: bool = True,
                    stop: threading.Event | None = None) -> tuple[int, str]:
    """Per-app SQL settings, and what the runtime alone decides for the checkpoint and records there
    at its first run: the shuffle partitions and the state function (accumulate, table joins)."""
    apply_app_sql_conf(spark, app, settings.checkpoint_root)
    counts = partition_counts(options, plan.input_topics(app), wait=wait, stop=stop)
    check_task_slots(spark, app, counts)
    recorded = read_record(settings.checkpoint_root)
    grow_into = None
    if app.spec.scaling_mode == "load":
        grow_into = contract.shuffle_partitions_to_grow_into(app.spec.scaling.max_executors, app.spec.executor.cores)
    partitions, why = choose_shuffle_partitions(recorded.get("shufflePartitions"), app.spec.shuffle_partitions,
                                                settings.spark_conf.get(contract.SHUFFLE_PARTITIONS), counts, grow_into)
    state_function, state_why = choose_state_function(recorded, settings.spark_conf.get(contract.STATE_FUNCTION_CONF),
                                                      app.spec.state.store)
    chosen = {"shufflePartitions": partitions, "stateFunction": state_function}
    if any(recorded.get(k) is None for k in chosen):
        write_record(settings.checkpoint_root, {**recorded, **chosen, "app": app.metadata.name})
    spark.conf.set(contract.SHUFFLE_PARTITIONS, str(partitions))
    log.info("shuffle partitions: %d (%s)", partitions, why)
    log.info("state function: %s (%s)", state_function, state_why)
    return partitions, state_function


def apply_app_sql_conf(spark, app: StreamApp, checkpoint_root: str) -> None:
    """The SQL settings the app runs with (the session may have run another app before: a test's, a laptop's).
    A checkpoint on a volume is written through Hadoop's FileSystem API, which forks no process per
    file (spark_compat.file_system_checkpoint_manager); an object store's keeps Spark's default."""
    for key, value in contract.app_sql_conf(app.spec.state.store).items():
        spark.conf.set(key, value)
    if is_local(checkpoint_root):
        spark.conf.set(spark_compat.CHECKPOINT_FILE_MANAGER, spark_compat.file_system_checkpoint_manager(spark))
    else:
        spark.conf.unset(spark_compat.CHECKPOINT_FILE_MANAGER)


def check_expressions(spark, app: StreamApp, settings: Settings) -> None:
    """Refuse the app (plan_guard.AppRefused, naming the field) when Spark's own parser reads a call of a
    refused function in one of its expressions. Under the app's SQL settings (no ${...} substitution)."""
    apply_app_sql_conf(spark, app, settings.checkpoint_root)
    plan_guard.check_sites(expression_sites(app), settings.spark_conf,
                           lambda text, statement: spark_compat.functions_spark_reads(spark, text, statement))


def checked_frames(ctx: QueryContext, plans: list[plan.QueryPlan]) -> dict[str, DataFrame]:
    """Every query's DataFrame (sinks.WRITERS' frame), once each analysed plan is known to call no
    refused function (plan_guard.AppRefused otherwise): built all before any query starts."""
    frames = {qp.name: WRITERS[qp.kind].frame(ctx, qp) for qp in plans}
    plan_guard.check_plans(frames, ctx.settings.spark_conf, lambda name: spark_compat.function_class(ctx.spark, name),
                           spark_compat.plan_classes)
    return frames


def start_query(ctx: QueryContext, qp: plan.QueryPlan, df: DataFrame | None = None) -> StreamingQuery:
    """Build the query's frame (unless given) and writer (sinks.WRITERS), then what every query has,
    and start it."""
    sink = WRITERS[qp.kind]
    writer = sink.writer(ctx, qp, sink.frame(ctx, qp) if df is None else df)
    writer = writer.queryName(qp.name).outputMode(qp.output_mode).option("checkpointLocation", qp.checkpoint)
    if qp.trigger.kind == "available-now":
        writer = writer.trigger(availableNow=True)
    elif qp.trigger.kind == "interval":
        writer = writer.trigger(processingTime=qp.trigger.interval)
    elif qp.trigger.kind == "realtime":
        writer = writer.trigger(realTime=qp.trigger.interval)
    return writer.start()


def compile_app(spark, app: StreamApp, settings: Settings) -> list[tuple[plan.QueryPlan, DataFrame]]:
    """Every query's DataFrame as `start` builds and checks it (plan_guard), none started, no Kafka
    reached, no sink touched."""
    check_expressions(spark, app, settings)
    options = plan.kafka_options(app, settings.kafka_override, settings.kafka_env_options, settings.schema_registry_user_info)
    ctx = QueryContext(spark, Compiler(spark, app, options), app, settings, options, Metrics(app.metadata.name, {}, {}))
    plans = plan.query_plans(app, settings.checkpoint_root, settings.console, settings.available_now)
    frames = checked_frames(ctx, plans)
    return [(qp, frames[qp.name]) for qp in plans]


def dry_run(spark, app: StreamApp, settings: Settings) -> list[str]:
    """Compile every query's DataFrame as `start` would, without starting one, connecting to Kafka or
    touching a sink: Spark analyses each expression as it is built, so a bad one is reported with its
    step path (StepError, ValueError), a refused function with its field (plan_guard.AppRefused). One
    line per query: what it would write."""
    lines = []
    for qp, df in compile_app(spark, app, settings):
        shown = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in df.schema.fields if not f.name.startswith(INTERNAL_PREFIX))
        lines.append(f"query {qp.name} ({qp.kind}, {qp.output_mode} mode) writes: {shown}")
    return lines


def claim_local_checkpoint(settings: Settings) -> Fence | None:
    """This driver's owner marker on a local checkpoint that another driver holds, written before Spark
    starts, so that the predecessor's time to stop (checkpoint.fence) passes while it does. An object
    store is reached through Spark: its marker is written by ``start``."""
    if not is_local(settings.checkpoint_root):
        return None
    fence = Fence(settings.checkpoint_root, owner_id(dict(os.environ)))
    if fence.held_by_another():
        fence.claim()
    return fence


def start(spark, app: StreamApp, settings: Settings, quiet: bool = False, wait_for_topics: bool = True,
          stop_requested: threading.Event | None = None, fence: Fence | None = None) -> Running:
    """Start every query; ``stop_requested`` (set by SIGTERM, see ``install_sigterm``) also ends the
    wait for Kafka before them, with kafka_wait.StopRequested. ``fence``: the marker claimed already
    (``claim_local_checkpoint``)."""
    stop_requested = stop_requested or threading.Event()
    owner = fence or Fence(settings.checkpoint_root, owner_id(dict(os.environ)))
    if owner.held_by_another():
        owner.claim()  # a predecessor's time to stop passes while the expressions are checked
    check_expressions(spark, app, settings)  # before anything is waited for or written (but that marker)
    options = plan.kafka_options(app, settings.kafka_override, settings.kafka_env_options, settings.schema_registry_user_info)
    owner.settle()
    restoring.at_start(app, settings.checkpoint_root, settings.app_base, dict(os.environ), owner)
    partitions, state_function = prepare_session(spark, app, settings, options, wait=wait_for_topics, stop=stop_requested)
    plans = plan.query_plans(app, settings.checkpoint_root, settings.console, settings.available_now)
    metrics = Metrics(app.metadata.name, plan.topic_sources(app), {p.name: p.reads for p in plans if p.kind == "dlq"})
    metrics.shuffle_partitions.labels(app.metadata.name).set(partitions)
    metrics.dead_letter_sources([p.reads for p in plans if p.kind == "dlq"] + [s for p in plans for s in p.counts_bad])
    metrics.count_executors(lambda: spark_compat.executor_count(spark))
    running = Running(app, metrics, stop_requested=stop_requested, committer=group_committer(app, options, metrics),
                      fence=owner)
    running.dead_letter_writer = dead_letters.for_app(spark, app, plans, settings.checkpoint_root, options,
                                                      metrics, plan.DLQ_MIN_INTERVAL_S)
    compiler = Compiler(spark, app, options, state_function)
    running.listener = ProgressListener(metrics, {p.name for p in plans}, quiet=quiet, committer=running.committer,
                                        dead_letter_writer=running.dead_letter_writer,
                                        user_code_dead_letters=compiler.dead_letter_counters)
    spark.streams.addListener(running.listener)
    ctx = QueryContext(spark, compiler, app, settings, options, metrics)
    running.restart = lambda qp: start_query(ctx, qp)
    try:
        frames = checked_frames(ctx, plans)  # every plan checked before the first query starts
        metrics.dead_letter_sources(list(compiler.dead_letter_counters))  # user code's: python steps, udfs
        for qp in plans:
            running.queries.append(start_query(ctx, qp, frames[qp.name]))
            running.plans.append(qp)
            log.info("started query %s (%s, %s mode) checkpoint %s", qp.name, qp.kind, qp.output_mode, qp.checkpoint)
    except Exception:
        stop_now(spark, running)
        raise
    pod = own_pod.of_driver(settings.spark_conf, dict(os.environ))  # a driver pod's: the operator's asks on it
    running.rescaler = rescale.for_driver_pod(spark, pod, settings.spark_conf,
                                              metrics.executors_target.labels(app.metadata.name).set)
    running.snapshotter = snapshots.for_driver(app, pod, settings.checkpoint_root, settings.app_base,
                                               lambda: commits(running), metrics)
    return running


def commits(running: Running) -> snapshot_schedule.Commits:
    """When the app's queries last committed a batch, as the listener saw them."""
    listener = running.listener
    return snapshot_schedule.Commits.of(dict(listener.committed_at), listener.queries) if listener is not None \
        else snapshot_schedule.Commits()


def group_committer(app: StreamApp, options: dict[str, str], metrics: Metrics) -> GroupCommitter:
    namespace, name = app.metadata.namespace or "default", app.metadata.name
    return GroupCommitter(lambda query: contract.consumer_group(namespace, name, query),
                          admin_commit(admin_client(options)), metrics.group_commit_failed)


def last_batch_run(progresses: list[dict]) -> int:
    """The id of the last batch a query ran in this run, from its ``recentProgress`` (-1: none). An
    idle trigger reports the *next* batch id but runs no batch (no ``addBatch`` phase) and posts no
    progress event to listeners (``onQueryIdle`` instead): waiting for that id would never end, nor for
    the batch before it when an earlier driver ran it (a restored or restarted query that is idle)."""
    ran = [p.get("batchId", -1) for p in progresses
           if "addBatch" in p.get("durationMs", {}) or p.get("numInputRows", 0) > 0]
    return max(ran, default=-1)


def _wait_for_listener(queries: list[StreamingQuery], listener: ProgressListener, timeout: float = 60.0) -> None:
    """Until the listener has seen each query's last batch (Spark hands it progress asynchronously),
    so that the last batches' bad records reach the dead-letter writer and their offsets the consumer
    groups. On a busy machine the listener can be several batches behind the queries when they end."""
    deadline = time.monotonic() + timeout
    last = {}
    for query in queries:
        try:
            recent = query.recentProgress
        except Exception:  # noqa: BLE001 - a query whose JVM side is gone has nothing more to report
            continue
        last[query.name] = last_batch_run([json.loads(p.json) if hasattr(p, "json") else p for p in recent or []])
    while time.monotonic() < deadline and any(listener.last_batch.get(q, -1) < b for q, b in last.items()):
        time.sleep(0.05)


def stop_now(spark, running: Running) -> None:
    if running.rescaler is not None:
        running.rescaler.stop()
        running.rescaler = None
    if running.snapshotter is not None:  # a copy under way ends with the session: taken again after a restart
        running.snapshotter.stop()
        running.snapshotter = None
    for query in running.queries:
        try:
            query.stop()
        except Exception as exc:  # already failed
            log.debug("stopping %s: %s", query.name, exc)
    if running.listener is not None:
        _wait_for_listener(running.queries, running.listener)
        spark.streams.removeListener(running.listener)
        running.listener = None
    if running.dead_letter_writer is not None:
        running.dead_letter_writer.close()  # the last batches' dead letters written first
        running.dead_letter_writer = None
    if running.committer is not None:
        running.committer.close()  # the last batches' offsets committed first
        running.committer = None


def stop_gracefully(spark, running: Running, timeout: float = 600) -> None:
    """Stop each query after its batch in flight commits, a real-time one at once (``stopping``)."""
    realtime = [qp.trigger.kind == "realtime" for qp in running.plans]
    stopping.stop_after_batch_in_flight(spark, running.queries, realtime, timeout)


def end_dry_available_now(spark, running: Running) -> None:
    """An available-now query that has read its topics to their end and whose watermark no longer
    moves starts no new batch: with a ``ttl`` Spark would run an empty one at every trigger, for ever."""
    for query, qp in zip(running.queries, running.plans, strict=True):
        if qp.name in running.ended_dry or qp.trigger.kind != "available-now" or running.listener is None:
            continue
        # the listener's record first: no py4j call at each poll for a query that is still reading
        if stopping.ran_dry(list(running.listener.recent.get(qp.name, ()))) and query.isActive \
                and spark_compat.start_no_new_batch(spark, query):
            running.ended_dry.add(qp.name)
            log.info("query %s: every record read and nothing left to close; ending it", qp.name)


def failure_text(exc) -> str:
    """The message of a query's exception and, when Spark gives it, the JVM stack with its causes."""
    return "\n".join(part for part in (str(exc), spark_compat.jvm_stack_trace(exc)) if part)


def schedule_retry(spark, running: Running, waiting: dict[int, float], i: int, failure: str, attempt: int,
                   policy: recovery.RetryPolicy, gave_up: str, retrying: str) -> bool:
    """Put failed query `i` in `waiting` for its next try; when the failure is not retryable, stop
    every query and return False (the app exits 1 and Kubernetes restarts the driver)."""
    name = running.plans[i].name
    decision = recovery.decide(failure, attempt, policy)
    if not decision.retry:
        log.error("query %s %s: %s", name, gave_up, failure.split("\n")[0])
        termination.write(termination.message(failure, f"query {name} {gave_up}"))
        stop_gracefully(spark, running, timeout=60)
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
            stop_gracefully(spark, running, timeout=10 if waiting else 600)
            stop_now(spark, running)
            if running.fence is not None:
                running.fence.release()
            return 0
        lost = running.fence.lost() if running.fence is not None else None
        if lost:
            log.error("fenced out: %s; stopping every query now", lost)
            stop_now(spark, running)
            return 1
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
                if running.restart is None:
                    raise RuntimeError(f"query {qp.name}: this run cannot restart its queries")
                running.queries[i] = running.restart(qp)
            except Exception as exc:  # noqa: BLE001 - a restart that fails is decided like a failed query
                attempts[i] += 1
                if not schedule_retry(spark, running, waiting, i, failure_text(exc), attempts[i], policy,
                                      gave_up="could not restart", retrying="could not restart"):
                    return 1
                continue
            running.metrics.restarted(qp.name)
            log.info("restarted query %s from checkpoint %s", qp.name, qp.checkpoint)
        end_dry_available_now(spark, running)
        if not waiting and all(not q.isActive for q in running.queries):
            for query, qp in zip(running.queries, running.plans, strict=True):
                if qp.name in running.ended_dry:  # its last (empty) batch may still be committing
                    stopping.finish(query, timeout=600)
            stop_now(spark, running)
            if running.fence is not None:
                running.fence.release()
            return 0
        time.sleep(poll)


def stale_after(app: StreamApp) -> float:
    """Seconds without progress after which /healthz fails: progress comes at the end of each batch
    (in real-time mode, each checkpoint interval)."""
    if app.spec.realtime:  # a checkpoint interval's progress, and the next one's, missed
        return max(300.0, 2 * parse_duration(realtime.CHECKPOINT_INTERVAL).total_seconds())
    interval = trigger_interval(app.spec.trigger)
    return max(300.0, 5 * (interval.total_seconds() if interval else 0))


def local_realtime_master(app: StreamApp, settings: Settings, stop: threading.Event | None = None) -> str:
    """A local run of a real-time app gets a task thread for every partition its queries hold at once
    (they mostly wait for records, so more threads than cores is what real-time mode wants)."""
    options = plan.kafka_options(app, settings.kafka_override, settings.kafka_env_options, settings.schema_registry_user_info)
    counts = partition_counts(options, plan.input_topics(app), wait=True, stop=stop)
    return f"local[{max(2, realtime.task_slots(app, counts))}]"


def check_task_slots(spark, app: StreamApp, counts: dict[str, int]) -> None:
    """A real-time app with fewer task slots than partitions held at once would leave partitions
    waiting a whole checkpoint interval, silently: refuse to start, saying what to raise."""
    if not app.spec.realtime:
        return
    needed = realtime.task_slots(app, counts)
    conf = spark.sparkContext.getConf()
    have = task_slots(conf.get("spark.master", "local"), conf.get("spark.executor.instances", None),
                      conf.get("spark.executor.cores", "1"), conf.get("spark.task.cpus", "1"), os.cpu_count() or 1)
    if have < needed:
        held = ", ".join(f"{query} {slots}" for query, slots in realtime.slots_by_query(app, counts).items())
        raise RuntimeError(f"real-time mode (spec.trigger: realtime) needs {needed} task slots at once, one per "
                           f"partition each query reads ({held}), and this driver has {have}: raise spec.executors "
                           "or scaling.maxExecutors, or spec.executor.cores")
    log.info("real-time mode: %d task slots held of %d", needed, have)


def task_slots(master: str, instances: str | None, cores: str, task_cpus: str, cpu_count: int) -> int:
    """Tasks Spark runs at once: local[N] (local[*]: the machine's cores), else executors × cores ÷
    spark.task.cpus. Pure."""
    if master.startswith("local"):
        inner = master[len("local["):-1] if master.startswith("local[") else "1"
        threads = inner.split(",")[0]
        return cpu_count if threads == "*" else int(threads)
    return int(instances or 0) * int(cores) // max(1, int(task_cpus))


def install_sigterm(stop_requested: threading.Event) -> None:
    """SIGTERM and Ctrl-C set ``stop_requested``: the app stops between batches and exits 0."""
    if threading.current_thread() is threading.main_thread():
        def handler(signum, frame):  # noqa: ARG001
            stop_requested.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
