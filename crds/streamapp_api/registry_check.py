"""The columns a spec declares for sources and tables read through a schema registry, checked against the
subjects' latest schemas, as the runtime checks them when it starts (``streamapp validate``).

Only ``streamapp validate`` calls this: the operator's admission never calls out to a URL an app's author
wrote. Findings name the field: a declared column the schema lacks is an error (the driver would refuse
to start); a subject the registry does not have yet, a column of another type (read with a cast) and a
registry that cannot be reached from here are warnings.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import Issue
from .schema_registry import COLUMNS_OF, Registry, RegistryError, schema_type, topic_subject
from .sources import Source, Table
from .spec import StreamApp

REGISTRY_FIELD = "spec.kafka.schemaRegistry.url"


@dataclass(frozen=True)
class RegistryAccess:
    """How ``validate`` reaches the registry: the spec's URL unless ``url`` overrides it (the registry
    as seen from where validate runs), with HTTP Basic credentials ``user_info`` ('user:password')."""

    url: str | None = None
    user_info: str | None = None
    timeout: float = 5


def _items(app: StreamApp) -> list[tuple[str, Source | Table, list[str]]]:
    sources = [(f"spec.sources[{i}]", s, s.topic_list) for i, s in enumerate(app.spec.sources)]
    tables = [(f"spec.tables[{i}]", t, [t.topic]) for i, t in enumerate(app.spec.tables or [])]
    return [(path, item, topics) for path, item, topics in sources + tables
            if item.value_format.registry_type is not None]


def registry_issues(app: StreamApp, access: RegistryAccess) -> list[Issue]:
    """What the registry says of the app's declared columns; [] when no source or table reads through it."""
    items = _items(app)
    configured = app.spec.kafka.schema_registry
    url = access.url or (configured.url if configured is not None else None)
    if not items or url is None:
        return []
    registry = Registry(url, access.user_info)
    issues: list[Issue] = []
    for path, item, topics in items:
        declared = item.schema_ or {}
        for topic in topics:
            subject = item.subject or topic_subject(topic)
            try:
                answer = registry.latest(subject, access.timeout)
            except RegistryError as exc:
                return [*issues, Issue(REGISTRY_FIELD, f"not reachable from here, so no column was checked against "
                                                       f"the registry ({exc}); --schema-registry URL gives another "
                                                       "address of it, --offline skips this check", "warning")]
            where = f"{path}.subject" if item.subject else path
            if answer is None:
                issues.append(Issue(where, f"the registry has no subject {subject!r} yet: a driver started now "
                                           "would stop until it has (a producer's serializer registers it with "
                                           "its first record)", "warning"))
                continue
            found = schema_type(answer)
            wanted = item.value_format.registry_type
            if found != wanted:
                issues.append(Issue(where, f"subject {subject!r} holds a {found} schema; format {item.format} "
                                           f"reads {wanted} schemas"))
                continue
            try:
                columns = COLUMNS_OF[found](answer, subject)
            except (ValueError, KeyError, TypeError) as exc:
                issues.append(Issue(where, f"subject {subject!r} version {answer.get('version')}: {exc}"))
                continue
            issues += _column_issues(f"{path}.schema", declared, columns, f"{subject} version {answer.get('version')}")
    return issues


def _column_issues(path: str, declared: dict[str, str], columns: dict[str, str], what: str) -> list[Issue]:
    """Pure: each declared column against the registry's fields (name -> Spark SQL type)."""
    issues = []
    for name, type_text in declared.items():
        if name not in columns:
            issues.append(Issue(f"{path}[{name}]", f"not a field of {what} (its fields: {', '.join(columns)})"))
        elif _canonical(type_text) != _canonical(columns[name]):
            issues.append(Issue(f"{path}[{name}]", f"declared {type_text}; {what} has {columns[name]}: each value is "
                                                   "cast, and one that does not cast is null", "warning"))
    return issues


# Spark SQL's other names of one type, as the spec may write them.
_SAME_TYPE = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint", "real": "float"}


def _canonical(type_text: str) -> str:
    text = "".join(type_text.lower().split()).replace("`", "")
    return _SAME_TYPE.get(text, text)
