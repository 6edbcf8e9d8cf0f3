"""Checks within one object: the Python twins of the CRD's CEL rules, plus settings checks.

Pure functions over the models; each returns Issues naming the exact field. ``streamapp validate``
runs them so it refuses everything the API server refuses (and more).
"""

from __future__ import annotations

import re
from typing import Iterator

from .avro_schemas import writer_schema_columns
from .base import COLUMN_HELP, COLUMN_PATTERN
from .checkpoint import VOLUME_FIELDS
from .contract import (
    REFUSED_FUNCTIONS_CONF,
    SPARK_DRIVER_SCOPE_CONF,
    SQL_VARIABLE_SUBSTITUTE,
    STATE_FUNCTION_CONF,
    STATE_FUNCTIONS,
)
from .durations import parse_duration
from .errors import Issue
from .expressions import sql_problems
from .pods import placement_issues
from .sinks import ONE_TARGET_MESSAGE, SINK_FORMAT_NEEDS_A_REGISTRY
from .sources import (
    KAFKA_OPTION_HINTS, KEY_COLUMN_TAKEN, KEY_SCHEMA_NEEDED, KEY_SCHEMA_UNUSED, KEY_SUBJECT_UNUSED, METADATA_COLUMNS,
    SCHEMA_TYPE_HELP, SPARK_MANAGED_KAFKA_OPTIONS, SUBJECT_NEEDS_A_REGISTRY_FORMAT, VALUE_FORMATS, Source, SparkTypeError,
    Table, options_need_their_format, parse_spark_type, subject_without_a_registry,
)
from .spec import (
    APP_NAME_HELP, APP_NAME_PATTERN, HEALTH_WINDOW_MESSAGE, HEALTH_WINDOW_MIN_SECONDS, RESTORE_WITHOUT_RESET,
    SNAPSHOT_EVERY_MESSAGE, SNAPSHOT_EVERY_MIN_SECONDS, StreamApp,
)
from .steps import SHUFFLING_STEPS, STEP_KEYS, Join, Step, Window

# What the driver may do through the API server, to fit its Role (and another pod allocator could need more).
_DRIVER_SCOPE_CONF = (*SPARK_DRIVER_SCOPE_CONF, "spark.kubernetes.allocation.pods.allocator")
# Executors evicted by a node scale-down leave gracefully (the operator's render/disruption.py sets them).
SPARK_DECOMMISSION_CONF = (
    "spark.decommission.enabled", "spark.storage.decommission.enabled",
    "spark.storage.decommission.shuffleBlocks.enabled", "spark.storage.decommission.rddBlocks.enabled",
)
# The driver's Spark UI: on the port its Service points at, without links that kill a query's stages.
SPARK_UI_CONF = ("spark.ui.port", "spark.ui.killEnabled")
SPARK_MANAGED_CONF = (
    "spark.master", "spark.app.name", "spark.submit.deployMode",
    "spark.executor.instances", "spark.executor.cores", "spark.executor.memory", "spark.executor.memoryOverhead",
    "spark.driver.cores", "spark.driver.memory", "spark.driver.memoryOverhead",
    "spark.sql.shuffle.partitions", "spark.sql.streaming.checkpointLocation",
    "spark.sql.streaming.stateStore.providerClass",
    "spark.kubernetes.namespace", "spark.kubernetes.container.image",
    REFUSED_FUNCTIONS_CONF, SQL_VARIABLE_SUBSTITUTE,
    *_DRIVER_SCOPE_CONF, *SPARK_DECOMMISSION_CONF, *SPARK_UI_CONF,
)
# spark.authenticate*, spark.network.crypto.*: the operator authenticates and encrypts every app.
_MANAGED_PREFIXES = ("spark.dynamicAllocation.", "spark.authenticate", "spark.network.crypto.")
_SPARK_TRAFFIC_HINT = ("the operator authenticates and encrypts Spark's traffic between driver and executors "
                       "with a key of the app's own (docs/operator.md, 'Spark traffic and network')")
_DECOMMISSION_HINT = ("the operator turns executor decommissioning on, so that executors a node scale-down evicts "
                      "finish their tasks and hand their shuffle blocks over (docs/operator.md, 'Node autoscalers "
                      "and disruption')")
_DRIVER_ROLE_HINT = "the driver's Role allows only what Spark needs with the operator's setting (docs/operator.md)"
_MANAGED_HINT = {
    "spark.sql.shuffle.partitions": "use spec.shufflePartitions",
    "spark.executor.instances": "use spec.executors or spec.scaling",
    "spark.executor.cores": "use spec.executor.cores",
    "spark.executor.memory": "use spec.executor.memory",
    "spark.driver.cores": "use spec.driver.cores",
    "spark.driver.memory": "use spec.driver.memory",
    "spark.kubernetes.container.image": "use spec.image",
    "spark.sql.streaming.stateStore.providerClass": "use spec.state.store",
    REFUSED_FUNCTIONS_CONF: "the operator's policy (functions.refuse) decides which functions the driver refuses",
    SQL_VARIABLE_SUBSTITUTE: "Spark would substitute ${...} into SQL text after the admission check has read it",
    **dict.fromkeys(_DRIVER_SCOPE_CONF, _DRIVER_ROLE_HINT),
    **dict.fromkeys(SPARK_DECOMMISSION_CONF, _DECOMMISSION_HINT),
    **dict.fromkeys(SPARK_UI_CONF, "the operator serves the Spark UI on port 4040 behind the Service <app>-ui, "
                    "without kill links; spark.ui.enabled turns it off (docs/operator.md, 'Spark UI')"),
}


def _hint(key: str) -> str:
    if key.startswith(("spark.authenticate", "spark.network.crypto.")):
        return _SPARK_TRAFFIC_HINT
    return _MANAGED_HINT.get(key, "the operator sets it")


def _columns_ok(mapping: dict[str, str] | None, path: str) -> Iterator[Issue]:
    for key in mapping or {}:
        if not re.match(COLUMN_PATTERN, key):
            yield Issue(f"{path}[{key}]", f"{key!r} is not a column name: use {COLUMN_HELP}")


def _key_ok(source: Source | Table, path: str) -> Iterator[Issue]:
    """The twins of sources._KEY_RULES."""
    kind = source.key_format_kind
    if kind.needs_schema and source.key_schema is None:
        yield Issue(f"{path}.keySchema", KEY_SCHEMA_NEEDED.format(source.key_format))
    if source.key_schema is not None and not kind.needs_schema:
        yield Issue(f"{path}.keySchema", KEY_SCHEMA_UNUSED)
    if source.key_subject is not None and kind.registry_type is None:
        yield Issue(f"{path}.keySubject", KEY_SUBJECT_UNUSED)
    if any(k in METADATA_COLUMNS or k in (source.schema_ or {}) for k in source.key_schema or {}):
        yield Issue(f"{path}.keySchema", KEY_COLUMN_TAKEN)


def _writer_schema_ok(source: Source | Table, path: str) -> Iterator[Issue]:
    """Plain Avro values: the writer schema is a record the runtime can read, and has the schema's columns."""
    assert source.avro is not None
    try:
        fields = writer_schema_columns(source.avro.writer_schema)
    except ValueError as exc:
        yield Issue(f"{path}.avro.writerSchema", f"the values cannot be read with this schema: {exc}")
        return
    for column in source.schema_ or {}:
        if column not in fields:
            yield Issue(f"{path}.schema[{column}]", f"{column!r} is not a field of avro.writerSchema (its fields: "
                        f"{', '.join(fields)})")


def check_source(source: Source | Table, path: str) -> Iterator[Issue]:
    if isinstance(source, Source) and (source.topic is None) == (source.topics is None):
        yield Issue(f"{path}.topic", "set exactly one of topic or topics")
    problem = source.value_format.schema_problem(source.format, source.schema_ is not None)
    if problem:
        yield Issue(f"{path}.schema", problem)
    if source.subject is not None and not source.value_format.needs_registry:  # twin of sources._SUBJECT_RULE
        yield Issue(f"{path}.subject", SUBJECT_NEEDS_A_REGISTRY_FORMAT)
    for name, kind in VALUE_FORMATS.items():  # twins of sources._OPTIONS_RULES
        key = kind.options_field
        if key is not None and kind.options_of(source) is not None:
            if source.format != name:
                yield Issue(f"{path}.{key}", options_need_their_format(name, key))
            if source.subject is not None:
                yield Issue(f"{path}.subject", subject_without_a_registry(key))
    if source.avro is not None:
        yield from _writer_schema_ok(source, path)
    yield from _key_ok(source, path)
    for field_name, mapping in (("schema", source.schema_), ("keySchema", source.key_schema)):
        yield from _columns_ok(mapping, f"{path}.{field_name}")
        for column, type_text in (mapping or {}).items():
            try:
                parse_spark_type(type_text)
            except SparkTypeError as exc:
                yield Issue(f"{path}.{field_name}.{column}", f"{type_text!r} is not a Spark SQL type ({exc}); "
                            f"use {SCHEMA_TYPE_HELP}")
    if isinstance(source, Source) and source.event_time is not None:
        columns = source.columns()
        declared = (source.schema_ or {}).get(source.event_time)
        if source.event_time not in columns:
            yield Issue(f"{path}.eventTime", f"column {source.event_time!r} is not in the schema; "
                        f"use a timestamp column of the schema or omit it for the record timestamp")
        elif declared is not None and declared.strip().lower() not in ("timestamp", "timestamp_ntz"):
            yield Issue(f"{path}.eventTime", f"column {source.event_time!r} has type {declared!r}; "
                        "the event time must be a timestamp")
    if isinstance(source, Table) and source.key not in source.columns():
        yield Issue(f"{path}.key", f"column {source.key!r} is not in the table's schema; "
                    "use a schema column or _key (the record key)")


def check_window(window: Window, path: str) -> Iterator[Issue]:
    if window.type != "session" and window.size is None:
        yield Issue(f"{path}.size", f"a {window.type} window needs size")
    if window.type == "session" and window.size is not None:
        yield Issue(f"{path}.size", "a session window has no size (it lasts until gap passes without events); remove size")
    if window.type == "hopping" and window.advance is None:
        yield Issue(f"{path}.advance", "a hopping window needs advance (how often a window starts)")
    if window.type != "hopping" and window.advance is not None:
        yield Issue(f"{path}.advance", f"advance is only for hopping windows, this one is {window.type}; remove it")
    if window.type == "session" and window.gap is None:
        yield Issue(f"{path}.gap", "a session window needs gap (the inactivity that closes a session)")
    if window.type != "session" and window.gap is not None:
        yield Issue(f"{path}.gap", f"gap is only for session windows, this one is {window.type}; remove it")
    if window.size and window.advance and parse_duration(window.advance) > parse_duration(window.size):
        yield Issue(f"{path}.advance", f"advance {window.advance} is longer than size {window.size}; "
                    "advance must not be longer than size (windows would leave gaps)")


def check_join(join: Join, path: str) -> Iterator[Issue]:
    if (join.table is None) == (join.stream is None):
        yield Issue(f"{path}", "set exactly one of table or stream")
        return
    if join.stream is not None:
        if join.within is None:
            yield Issue(f"{path}.within", "within is required for a stream join (the time bound between the two records)")
        if join.using is None:
            yield Issue(f"{path}.using", "using is required for a stream join (columns equal on both sides)")
        if join.key is not None:
            yield Issue(f"{path}.key", "key is only for table joins; a stream join matches the columns listed in using")
    else:
        if join.within is not None:
            yield Issue(f"{path}.within", "within is not allowed for a table join: it sees the table's current row")
        if join.using is not None:
            yield Issue(f"{path}.using", "using is not allowed for a table join (a table is joined by key, default _key)")


def check_step(step: Step, path: str) -> Iterator[Issue]:
    keys = step.set_keys()
    if len(keys) != 1:
        what = "no key" if not keys else "keys " + ", ".join(keys)
        yield Issue(path, f"a step has exactly one key, this one has {what}; use one of {', '.join(STEP_KEYS)}")
        return
    kind, value = step.kind, step.value
    if kind == "window":
        yield from check_window(value, f"{path}.window")
    elif kind == "join":
        yield from check_join(value, f"{path}.join")
    elif kind == "withColumns":
        yield from _columns_ok(value, f"{path}.withColumns")
    elif kind in ("aggregate", "accumulate"):
        yield from _columns_ok(value.columns, f"{path}.{kind}.columns")
    elif kind == "sql":
        yield from (Issue(f"{path}.sql", problem) for problem in sql_problems(value))
    elif kind == "python":
        yield from _columns_ok(value.schema_, f"{path}.python.schema")
        for column, type_text in value.schema_.items():
            try:
                parse_spark_type(type_text)
            except SparkTypeError as exc:
                yield Issue(f"{path}.python.schema.{column}",
                            f"{type_text!r} is not a Spark SQL type ({exc}); use {SCHEMA_TYPE_HELP}")


def check_settings(app: StreamApp) -> Iterator[Issue]:
    spec = app.spec
    if not re.match(APP_NAME_PATTERN, app.metadata.name):
        yield Issue("metadata.name", f"{app.metadata.name!r}: must be {APP_NAME_HELP}")
    scaling = spec.scaling
    if scaling.max_executors is not None and scaling.min_executors > scaling.max_executors:
        yield Issue("spec.scaling.minExecutors", f"minExecutors {scaling.min_executors} exceeds "
                    f"maxExecutors {scaling.max_executors}; minExecutors must not exceed maxExecutors")
    if spec.executors is not None and scaling.mode not in (None, "manual"):
        yield Issue("spec.executors", f"executors is the manual count, but scaling.mode is {scaling.mode}: remove "
                    "executors, or set scaling.mode to manual")
    if scaling.mode == "manual" and spec.executors is None:
        yield Issue("spec.scaling.mode", "manual needs spec.executors (kubectl scale sets it)")
    if spec.executors is not None:
        high = scaling.max_executors
        if spec.executors < scaling.min_executors or (high is not None and spec.executors > high):
            yield Issue("spec.executors", f"executors {spec.executors} must lie within scaling.minExecutors and "
                        f"scaling.maxExecutors (here {scaling.min_executors}..{high or 'unbounded'}); "
                        "use suspend to stop the app")
    policy = spec.restart_policy
    if parse_duration(policy.backoff) > parse_duration(policy.max_backoff):
        yield Issue("spec.restartPolicy.backoff", f"backoff {policy.backoff} exceeds maxBackoff "
                    f"{policy.max_backoff}; backoff must not exceed maxBackoff")
    if spec.kafka.schema_registry is None:  # the twin of spec.py's _FORMATS_NEED_A_REGISTRY
        for kind in ("sources", "tables"):
            for i, item in enumerate(getattr(spec, kind)):
                if item.reads_registry:
                    key = item.value_format.options_field
                    yield Issue(f"spec.{kind}[{i}].format", f"format {item.format} reads each record's schema "
                                "from a registry: set spec.kafka.schemaRegistry"
                                + (f", or describe the records with {key}" if key else ""))
                elif item.key_format_kind.registry_type is not None:
                    yield Issue(f"spec.{kind}[{i}].keyFormat", f"keyFormat {item.key_format} reads each key's "
                                "schema from a registry: set spec.kafka.schemaRegistry")
        for i, sink in enumerate(spec.sinks):  # the twin of sinks.py's SINKS_NEED_A_REGISTRY
            for kind, target in sink.targets():
                for field in target.registry_fields():
                    yield Issue(f"spec.sinks[{i}].{kind}{field}", SINK_FORMAT_NEEDS_A_REGISTRY)
    for key in spec.kafka.options or {}:
        if key in SPARK_MANAGED_KAFKA_OPTIONS or key.startswith("kafka."):
            hint = KAFKA_OPTION_HINTS.get(key, "options are plain Kafka client settings without the 'kafka.' prefix")
            yield Issue(f"spec.kafka.options[{key}]", f"{key!r} is managed by Spark or the operator and "
                        f"cannot be set; {hint}")
    for key, value in (spec.spark_conf or {}).items():
        path = f"spec.sparkConf[{key}]"
        if any(c in key for c in "=: "):  # line breaks and other controls: limits.py, before the models
            yield Issue(path, "a Spark setting's key has no '=', ':' or spaces (Spark's keys are dotted names)")
        elif not key.startswith("spark."):
            yield Issue(path, f"{key!r} is not a Spark setting; keys start with 'spark.'")
        elif key in SPARK_MANAGED_CONF or key.startswith(_MANAGED_PREFIXES):
            hint = _hint(key)
            yield Issue(path, f"{key!r} is managed by the operator and cannot be set here; {hint}")
        elif key == STATE_FUNCTION_CONF and value not in STATE_FUNCTIONS:
            yield Issue(path, f"{value!r} is not a state function: use one of {', '.join(STATE_FUNCTIONS)} "
                        "(it applies to a new checkpoint only)")
    yield from _check_checkpoint(app)
    yield from _check_snapshots(app)
    yield from _check_capacity(app)
    for role in ("driver", "executor"):
        yield from (Issue(path, message) for path, message in placement_issues(getattr(spec, role), f"spec.{role}"))


def _check_checkpoint(app: StreamApp) -> Iterator[Issue]:
    """The twins of Checkpoint's CEL rules: a location or a volume, and s3 settings only with a location."""
    checkpoint = app.spec.state.checkpoint
    given = [key for key in VOLUME_FIELDS if key in checkpoint.model_dump(by_alias=True, exclude_none=True)]
    if checkpoint.location is not None and given:
        yield Issue("spec.state.checkpoint.location", "location (object storage) and size, storageClassName, "
                    f"accessModes (a volume) are exclusive; remove {', '.join(given)} or the location")
    if checkpoint.s3 is not None and checkpoint.location is None:
        yield Issue("spec.state.checkpoint.s3", "s3 settings need a location (s3a://bucket/prefix)")


def _check_snapshots(app: StreamApp) -> Iterator[Issue]:
    """The twin of SnapshotSchedule's CEL rule."""
    schedule = app.spec.state.snapshots
    if schedule is not None and parse_duration(schedule.every).total_seconds() < SNAPSHOT_EVERY_MIN_SECONDS:
        yield Issue("spec.state.snapshots.every", f"{schedule.every}: {SNAPSHOT_EVERY_MESSAGE}")
    window = app.spec.upgrade.health_window
    if parse_duration(window).total_seconds() < HEALTH_WINDOW_MIN_SECONDS:  # the twin of Upgrade's CEL rule
        yield Issue("spec.upgrade.healthWindow", f"{window}: {HEALTH_WINDOW_MESSAGE}")


def check_change(old_spec: object, new_spec: object) -> list[Issue]:
    """Checks of an update, old spec against new (as the API server holds them): the twin of State's
    transition rule. spec.state.restoreFrom is read only when a state generation starts, so it is set
    or changed only together with spec.state.resetNonce; removing it alone is fine."""
    def state(spec: object) -> dict[str, object]:
        found = spec.get("state") if isinstance(spec, dict) else None
        return found if isinstance(found, dict) else {}

    before, after = state(old_spec), state(new_spec)
    restore = after.get("restoreFrom")
    if restore is None or restore == before.get("restoreFrom") or after.get("resetNonce") != before.get("resetNonce"):
        return []
    return [Issue("spec.state.restoreFrom", RESTORE_WITHOUT_RESET)]


def _check_capacity(app: StreamApp) -> Iterator[Issue]:
    spec = app.spec
    most = spec.executors or spec.scaling.max_executors
    stateful = any(step.kind in SHUFFLING_STEPS
                   for stream in spec.streams for step in stream.steps if len(step.set_keys()) == 1)
    if spec.shuffle_partitions is not None:
        if not stateful:
            yield Issue("spec.shufflePartitions", "has no effect: no step shuffles (aggregate, accumulate, "
                        "dedupe, join, sql)", "warning")
        elif most is not None and spec.shuffle_partitions < most * spec.executor.cores:
            yield Issue("spec.shufflePartitions", f"{spec.shuffle_partitions} partitions keep at most "
                        f"{spec.shuffle_partitions} of the {most * spec.executor.cores} executor cores busy in "
                        "stateful stages; it cannot be raised later without a state reset", "warning")
    checkpoint = spec.state.checkpoint
    asked = max(spec.executors or 0, spec.scaling.max_executors or 0, spec.scaling.min_executors)
    if checkpoint.executors_on_driver_node and asked > 1:  # said only where several executors are asked for
        modes = ", ".join(checkpoint.claim_access_modes)
        yield Issue("spec.state.checkpoint.accessModes", f"a {modes} claim is mounted on one node: every executor "
                    "runs on the driver's node, so the app cannot scale out beyond that node's CPU and memory; "
                    "use ReadWriteMany or an object-store location (s3a://) to spread executors", "warning")
    source_topics = {t for s in spec.sources for t in s.topic_list} | {t.topic for t in spec.tables}
    dlq = app.dead_letter_topic
    if dlq in source_topics:
        yield Issue("spec.deadLetter.topic", f"{dlq!r} is also an input topic; use a topic of its own")
    for i, sink in enumerate(spec.sinks):
        for kind, target in sink.targets():
            topic = target.topic_written()
            if topic is not None and topic in source_topics:
                yield Issue(f"spec.sinks[{i}].{kind}.topic", f"{topic!r} is also an input topic of this "
                            "app: its output would be read back as input", "warning")


def check_udfs(app: StreamApp) -> Iterator[Issue]:
    seen: set[str] = set()
    for k, udf in enumerate(app.spec.udfs or []):
        if udf.name.lower() in seen:  # Spark's function names ignore case
            yield Issue(f"spec.udfs[{k}].name", f"{udf.name!r} is the name of another udf; give each its own")
        seen.add(udf.name.lower())
        try:
            parse_spark_type(udf.returns)
        except SparkTypeError as exc:
            yield Issue(f"spec.udfs[{k}].returns",
                        f"{udf.returns!r} is not a Spark SQL type ({exc}); use {SCHEMA_TYPE_HELP}")


def check_objects(app: StreamApp) -> list[Issue]:
    """Every single-object rule (the CEL twins) and settings check."""
    issues: list[Issue] = []
    for i, source in enumerate(app.spec.sources):
        issues.extend(check_source(source, f"spec.sources[{i}]"))
    for i, table in enumerate(app.spec.tables):
        issues.extend(check_source(table, f"spec.tables[{i}]"))
    for i, stream in enumerate(app.spec.streams):
        for j, step in enumerate(stream.steps):
            issues.extend(check_step(step, f"spec.streams[{i}].steps[{j}]"))
    for i, sink in enumerate(app.spec.sinks):
        if len(sink.targets()) != 1:
            issues.append(Issue(f"spec.sinks[{i}]", ONE_TARGET_MESSAGE))
        for kind, target in sink.targets():
            issues.extend(Issue(f"spec.sinks[{i}].{kind}{f.field}", f.message, f.severity) for f in target.rule_findings())
    issues.extend(check_udfs(app))
    issues.extend(check_settings(app))
    return issues
