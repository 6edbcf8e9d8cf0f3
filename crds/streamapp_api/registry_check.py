"""The columns a spec declares for sources and tables read through a schema registry, checked against the
subjects' latest schemas, as the runtime checks them when it starts (``streamapp validate``).

Only ``streamapp validate`` calls this: the operator's admission never calls out to a URL an app's author
wrote. Findings name the field: a declared column the schema lacks, or of a type its field does not fit
(Protobuf), is an error (the driver would refuse to start); a subject the registry does not have yet, an
Avro column of another type (read with a cast) and a registry that cannot be reached from here are
warnings. Of a schema with several messages, the declared columns must fit one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .errors import Issue
from .registry_columns import COLUMNS_OF, RegisteredColumns
from .schema_registry import Registry, RegistryError, schema_type, topic_subject
from .sources import Source, Table, canonical_spark_type
from .spec import StreamApp

REGISTRY_FIELD = "spec.kafka.schemaRegistry.url"


@dataclass(frozen=True)
class RegistryAccess:
    """How ``validate`` reaches the registry: the spec's URL unless ``url`` overrides it (the registry
    as seen from where validate runs), with HTTP Basic credentials ``user_info`` ('user:password')."""

    url: str | None = None
    user_info: str | None = None
    timeout: float = 5


@dataclass(frozen=True)
class _Read:
    """One part (value or key) of a source's or table's records read through the registry."""

    path: str  # the source's or table's, e.g. spec.sources[0]
    item: Source | Table
    topics: list[str]
    part: str  # "value" or "key"

    @property
    def fields(self) -> tuple[str, str, str]:
        """(the subject's field, the declared columns' field, the format's field) in the spec."""
        return ("subject", "schema", "format") if self.part == "value" else ("keySubject", "keySchema", "keyFormat")

    @property
    def registry_type(self) -> str | None:
        """The registry's schema type this part is read as; None when it is not read through the registry
        (a format of no registry, or one whose own settings describe the records)."""
        if self.part == "key":
            return self.item.key_format_kind.registry_type
        kind = self.item.value_format
        return kind.registry_type if kind.reads_registry(self.item) else None

    @property
    def declared(self) -> dict[str, str]:
        return dict(self.item.schema_ or {}) if self.part == "value" else self.item.key_columns()

    @property
    def subject(self) -> str | None:
        return self.item.subject if self.part == "value" else self.item.key_subject


def _reads(app: StreamApp) -> list[_Read]:
    items: list[tuple[str, Source | Table, list[str]]] = [
        (f"spec.sources[{i}]", s, s.topic_list) for i, s in enumerate(app.spec.sources)]
    items += [(f"spec.tables[{i}]", t, [t.topic]) for i, t in enumerate(app.spec.tables or [])]
    reads = [_Read(path, item, topics, part) for path, item, topics in items for part in ("value", "key")]
    return [r for r in reads if r.registry_type is not None]


def registry_issues(app: StreamApp, access: RegistryAccess) -> list[Issue]:
    """What the registry says of the app's declared columns; [] when no source or table reads through it."""
    reads = _reads(app)
    configured = app.spec.kafka.schema_registry
    url = access.url or (configured.url if configured is not None else None)
    if not reads or url is None:
        return []
    registry = Registry(url, access.user_info)
    issues: list[Issue] = []
    for read in reads:
        subject_field, schema_field, format_field = read.fields
        for topic in read.topics:
            subject = read.subject or topic_subject(topic, read.part)
            try:
                answer = registry.latest(subject, access.timeout)
            except RegistryError as exc:
                return [*issues, Issue(REGISTRY_FIELD, f"not reachable from here, so no column was checked against "
                                                       f"the registry ({exc}); --schema-registry URL gives another "
                                                       "address of it, --offline skips this check", "warning")]
            where = f"{read.path}.{subject_field}" if read.subject else read.path
            if answer is None:
                issues.append(Issue(where, f"the registry has no subject {subject!r} yet: a driver started now "
                                           "would stop until it has (a producer's serializer registers it with "
                                           "its first record)", "warning"))
                continue
            found = schema_type(answer)
            if found != read.registry_type:
                issues.append(Issue(where, f"subject {subject!r} holds a {found} schema; this {format_field} "
                                           f"reads {read.registry_type} schemas"))
                continue
            version = f"{subject} version {answer.get('version')}"
            try:
                registered = COLUMNS_OF[found](registry, answer, subject)
            except ImportError as exc:  # the protobuf package: the API's own dependencies do not include it
                issues.append(Issue(where, f"{found} columns were not checked against {version}: {exc} (install "
                                           "the protobuf package where validate runs)", "warning"))
                continue
            except (ValueError, KeyError, TypeError, RegistryError) as exc:
                issues.append(Issue(where, f"{version}: {exc}"))
                continue
            issues += fitting_issues(f"{read.path}.{schema_field}", read.declared, registered, version)
    return issues


def fitting_issues(path: str, declared: dict[str, str], registered: list[RegisteredColumns], what: str) -> list[Issue]:
    """Pure: the declared columns against the record type they fit best (the wire format says which a
    record is, and the runtime needs them to fit one): those of the first with the fewest errors."""
    if not registered:
        return [Issue(path, f"{what} has no message or record to read columns from")]
    several = len(registered) > 1
    found = [_column_issues(path, declared, r.columns, f"{what} {r.name}" if several else what, r.type_problem)
             for r in registered]
    return min(found, key=lambda issues: sum(i.severity == "error" for i in issues))


def _column_issues(path: str, declared: dict[str, str], columns: dict[str, str], what: str,
                   type_problem: Callable[[str, str], str | None] | None = None) -> list[Issue]:
    """Pure: each declared column against the registry's fields (name -> Spark SQL type); ``type_problem``
    (RegisteredColumns') says which types do not fit, else any type is read with a cast."""
    issues = []
    for name, type_text in declared.items():
        if name not in columns:
            issues.append(Issue(f"{path}[{name}]", f"not a field of {what} (its fields: {', '.join(columns)})"))
        elif type_problem is not None:
            problem = type_problem(name, type_text)
            if problem is not None:
                issues.append(Issue(f"{path}[{name}]", f"declared {type_text}; {what} has {columns[name]}: {problem}, "
                                                       "so the app would not start"))
        elif canonical_spark_type(type_text) != canonical_spark_type(columns[name]):
            issues.append(Issue(f"{path}[{name}]", f"declared {type_text}; {what} has {columns[name]}: each value is "
                                                   "cast, and one that does not cast is null", "warning"))
    return issues
