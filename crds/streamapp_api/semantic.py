"""Checks across the pipeline: what the resolution found (names and references, cycles, columns,
event time, Spark's output modes; see ``resolve``), then the sinks against the streams they write.
Pure functions, no I/O.
"""

from __future__ import annotations

from .errors import Issue
from .flow import Flow
from .realtime import check_realtime
from .resolve import Graph, resolve
from .rules import check_objects
from .sinks import is_relative_table_path
from .spec import StreamApp


def check_semantics(app: StreamApp) -> list[Issue]:
    """Cross-references, columns and output modes. Assumes the document parsed into the model."""
    resolved = resolve(app)
    return [*resolved.issues, *_check_sinks(app, resolved.flows), *_unused(app, resolved.graph), *check_realtime(app)]


def _check_sinks(app: StreamApp, flows: dict[str, Flow]) -> list[Issue]:
    issues: list[Issue] = []
    names: dict[str, int] = {}
    uri_envs: dict[str, tuple[int, str, str]] = {}  # driver env variable -> first sink, Secret, key
    for i, sink in enumerate(app.spec.sinks):
        base = f"spec.sinks[{i}]"
        if len(sink.targets()) != 1:
            continue
        kind, target = sink.targets()[0]
        for ref in target.secret_env():
            first = uri_envs.setdefault(ref.env, (i, ref.secret, ref.key))
            if first[1:] != (ref.secret, ref.key):
                # The driver receives each connection URI in one variable named after the Secret.
                issues.append(Issue(f"{base}.{kind}{ref.field}", f"Secret {ref.secret!r} key {ref.key!r} would "
                                    f"reach the driver in the same variable {ref.env} as spec.sinks[{first[0]}] (Secret "
                                    f"{first[1]!r} key {first[2]!r}); use one key per Secret, or another Secret"))
        table = target.table_path()
        if table is not None and not is_relative_table_path(table) and not app.spec.state.checkpoint.on_object_store:
            # A warning: Hadoop's defaults (AWS's endpoint, its default credential chain, such as a pod
            # identity) and spec.sparkConf's fs.s3a.* may well reach the bucket.
            issues.append(Issue(f"{base}.{kind}.path", "the operator gives driver and executors the S3 settings of "
                                "spec.state.checkpoint.s3 only, and this app's checkpoint is on a volume: the table "
                                "is reached with Hadoop's defaults (AWS's endpoint and default credentials) and "
                                "spec.sparkConf's spark.hadoop.fs.s3a.*; for another S3 server keep the checkpoint "
                                "on it, or use a relative path (kept on the volume)", "warning"))
        query = sink.query_name
        if query in names:
            issues.append(Issue(f"{base}.name", f"query name {query!r} is also used by spec.sinks[{names[query]}]; "
                                "give the sinks distinct names"))
        names.setdefault(query, i)
        flow = flows.get(sink.from_)
        if flow is None or flow.columns is None:
            continue
        findings = target.stream_findings(flow.columns, flow.group_columns,
                                          lambda column: flow.missing(column, sink.from_))
        findings += target.emit_findings(flow.emit or "final")
        issues.extend(Issue(f"{base}.{kind}{f.field}", f.message, f.severity) for f in findings)
    return issues


def _unused(app: StreamApp, graph: Graph) -> list[Issue]:
    read = {s.from_ for s in app.spec.streams} | {s.from_ for s in app.spec.sinks}
    read |= {step.join.stream for s in app.spec.streams for step in s.steps if step.join and step.join.stream}
    read |= {step.join.table for s in app.spec.streams for step in s.steps if step.join and step.join.table}
    issues = []
    for kind in ("sources", "tables", "streams"):
        for name, i in getattr(graph, kind).items():
            if name not in read:
                issues.append(Issue(f"spec.{kind}[{i}].name", f"{name!r} is never read by a stream, join or sink",
                                    "warning"))
    return issues


def check(app: StreamApp) -> list[Issue]:
    """All checks on a parsed StreamApp: object rules, then cross-references and modes. Sorted, no repeats."""
    issues = check_objects(app)
    if not any(i.severity == "error" for i in issues):
        issues.extend(check_semantics(app))
    unique: list[Issue] = []
    for issue in issues:
        if issue not in unique:
            unique.append(issue)
    return unique

