"""Real-time mode (``spec.trigger: realtime``): which apps can run that way, and the task slots they hold.

Spark (4.1+) runs such a query as long-running tasks, one per input partition, that read, transform
and write each record as it arrives; a "batch" only bounds how often offsets are checkpointed. Spark
accepts only stateless plans in it (projections, filters, explode, unions, broadcast joins with static
data) and only the Kafka, foreach, console and memory writers. Every task of a query runs at once, so
a query holds one task slot per partition it reads for as long as it runs: with fewer slots, the
partitions left over wait a whole checkpoint interval (seen on local Spark 4.2: no error, just late).

Pure functions over the models: the API server's webhook and ``streamapp validate`` refuse what cannot
run (``check_realtime``); the operator sizes executors and the runtime checks its slots with
``task_slots``, so both count the same way.
"""

from __future__ import annotations

from .contract import dlq_query
from .errors import Issue
from .expressions import sql_state
from .resolve import resolve
from .spec import StreamApp

# How often a real-time query checkpoints its offsets: what a restart replays (Kafka sinks are
# at-least-once there), and when its tasks end and start again. That pause holds every partition's
# records at each checkpoint: checkpointing every minute delays enough records to lift a long run's
# p99, Spark's default of 5 minutes few enough that it does not (the figures: docs/runtime.md,
# "Real-time mode").
CHECKPOINT_INTERVAL = "5m"
STATELESS_STEPS = ("filter", "select", "withColumns", "explode", "keyBy", "sql")
_MICRO_BATCHES = "or run micro-batches (remove spec.trigger, or set an interval)"


def check_realtime(app: StreamApp) -> list[Issue]:
    """Why the app cannot run in real-time mode (nothing when it is not asked for)."""
    spec = app.spec
    if not spec.realtime:
        return []
    issues = []
    for i, source in enumerate(spec.sources):
        if source.max_offsets_per_trigger is not None:
            issues.append(Issue(f"spec.sources[{i}].maxOffsetsPerTrigger", "real-time mode reads records as they "
                                f"arrive, without batches to cap (Spark refuses it); remove it, {_MICRO_BATCHES}"))
        for field, name, decoded_in_python in (
                ("format", source.format, source.value_format.decoded_in_python),
                ("keyFormat", source.key_format, source.key_format_kind.decoded_in_python)):
            if decoded_in_python:
                issues.append(Issue(f"spec.sources[{i}].{field}", f"real-time mode runs Spark's own functions only; "
                                    f"{name} records are decoded in Python workers: read json or string, "
                                    + _MICRO_BATCHES))
    if spec.udfs:
        issues.append(Issue("spec.udfs", f"real-time mode runs Spark's own functions only; a udf runs in Python "
                            f"workers: remove the udfs, {_MICRO_BATCHES}"))
    for i, stream in enumerate(spec.streams):
        for j, step in enumerate(stream.steps):
            if len(step.set_keys()) != 1:
                continue
            path = f"spec.streams[{i}].steps[{j}].{step.kind}"
            if step.join is not None:
                what = ("reads the table as a stream" if step.join.table else "keeps both streams' records in state")
                issues.append(Issue(path, f"real-time mode runs stateless steps only; a join {what}: remove it, "
                                    + _MICRO_BATCHES))
            elif step.python is not None:  # stateless, but its batches of records are what real time does without
                issues.append(Issue(path, f"real-time mode runs Spark's own steps only ({', '.join(STATELESS_STEPS)}); "
                                    f"a python step takes records in batches: remove it, {_MICRO_BATCHES}"))
            elif step.kind not in STATELESS_STEPS:
                issues.append(Issue(path, f"real-time mode runs stateless steps only ({', '.join(STATELESS_STEPS)}); "
                                    f"{step.kind} keeps state across records: remove it, {_MICRO_BATCHES}"))
            elif step.sql is not None:
                issues.extend(Issue(path, f"real-time mode runs stateless steps only; this query {found}: remove "
                                    f"it, {_MICRO_BATCHES}") for found in sql_state(step.sql))
    for i, sink in enumerate(spec.sinks):
        for kind, target in sink.targets():
            issues.extend(Issue(f"spec.sinks[{i}].{kind}{f.field}", f.message + _MICRO_BATCHES)
                          for f in target.realtime_findings())
    if spec.scaling.mode == "load":
        issues.append(Issue("spec.scaling.mode", "load decides from micro-batch times, which real-time mode does not "
                            "have; use partitions (a task slot for every input partition of every query) or manual"))
    return issues


def query_sources(app: StreamApp) -> dict[str, tuple[str, ...]]:
    """Each streaming query's name -> the sources it reads (a sink reads its stream's whole lineage;
    a dead-letter query reads its one source)."""
    resolved = resolve(app)
    queries = {}
    for sink in app.spec.sinks:
        if sink.from_ in resolved.lineages:
            queries[sink.query_name] = resolved.lineage(sink.from_).sources
    if app.spec.dead_letter.enabled:
        queries.update({dlq_query(s.name): (s.name,) for s in app.spec.sources
                        if s.value_format.can_be_malformed})
    return queries


def slots_by_query(app: StreamApp, partitions: dict[str, int]) -> dict[str, int]:
    """Each query's name -> the task slots it holds in real-time mode: the partitions of every topic it
    reads (``partitions``: topic -> partition count; a topic not found counts 1)."""
    topics = {s.name: s.topic_list for s in app.spec.sources}
    return {query: sum(partitions.get(t, 1) for name in names for t in topics.get(name, ()))
            for query, names in query_sources(app).items()}


def task_slots(app: StreamApp, partitions: dict[str, int]) -> int:
    """Task slots the app's real-time queries hold at once, all queries together."""
    return sum(slots_by_query(app, partitions).values())
