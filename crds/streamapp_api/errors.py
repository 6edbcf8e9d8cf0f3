"""Validation findings with exact field paths, and pydantic errors translated into them."""

from __future__ import annotations

import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from .checkpoint import S3_LOCATION_HELP, S3_LOCATION_PATTERN
from .base import (COLUMN_HELP, COLUMN_PATTERN, K8S_NAME_PATTERN, MODULE_HELP, MODULE_PATTERN, NAME_HELP, NAME_PATTERN,
                   PYTHON_NAME_HELP, PYTHON_NAME_PATTERN, TOPIC_HELP, TOPIC_PATTERN)
from .durations import (
    DURATION_HELP,
    DURATION_PATTERN,
    QUANTITY_HELP,
    QUANTITY_PATTERN,
    SPARK_MEMORY_HELP,
    SPARK_MEMORY_PATTERN,
    TRIGGER_PATTERN,
)
from .sources import BOOTSTRAP_PATTERN, CONFIG_MAP_KEY_HELP, CONFIG_MAP_KEY_PATTERN, PROTOBUF_NAME_HELP, PROTOBUF_NAME_PATTERN
from .spec import APP_NAME_HELP, APP_NAME_PATTERN
from .pods import LABEL_VALUE_PATTERN
from .steps import ACCUMULATE_FUNCTIONS, ACCUMULATE_PATTERN, KAFKA_STREAMS_STEPS, Step
from .suggest import did_you_mean

Loc = tuple[str | int, ...]
_PATTERN_HELP = {
    DURATION_PATTERN: DURATION_HELP,
    TRIGGER_PATTERN: f"{DURATION_HELP}, or 'realtime'",
    QUANTITY_PATTERN: QUANTITY_HELP,
    SPARK_MEMORY_PATTERN: SPARK_MEMORY_HELP,
    NAME_PATTERN: NAME_HELP,
    COLUMN_PATTERN: COLUMN_HELP,
    MODULE_PATTERN: MODULE_HELP,
    PYTHON_NAME_PATTERN: PYTHON_NAME_HELP,
    TOPIC_PATTERN: TOPIC_HELP,
    K8S_NAME_PATTERN: "a Kubernetes object name: lowercase letters, digits, '-' and '.'",
    BOOTSTRAP_PATTERN: "a comma-separated list of host:port",
    PROTOBUF_NAME_PATTERN: PROTOBUF_NAME_HELP,
    CONFIG_MAP_KEY_PATTERN: CONFIG_MAP_KEY_HELP,
    APP_NAME_PATTERN: APP_NAME_HELP,
    S3_LOCATION_PATTERN: S3_LOCATION_HELP,
    LABEL_VALUE_PATTERN: "a label value: at most 63 letters, digits, '-', '_' and '.', starting and ending with a "
                         "letter or digit",
    ACCUMULATE_PATTERN: "one of " + ", ".join(f"{f}(expr)" for f in ACCUMULATE_FUNCTIONS),
}


MAX_SHOWN = 60  # characters of an author's text quoted in a message
MAX_PATH = 300
MAX_MESSAGE = 1000


def shown(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` quoted for a message, cut to ``limit`` characters (a value may be megabytes long)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


@dataclass(frozen=True, order=True)
class Issue:
    """One finding: where (a field path such as spec.streams[0].steps[2].window.advance) and what.
    Both are cut to a bounded length: a path holds the author's keys, a message may quote values."""

    path: str
    message: str
    severity: Literal["error", "warning"] = "error"

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", _cut(self.path, MAX_PATH))
        object.__setattr__(self, "message", _cut(self.message, MAX_MESSAGE))

    def __str__(self) -> str:
        prefix = "" if self.severity == "error" else "warning: "
        return f"{prefix}{self.path}: {self.message}"


class InvalidSpec(ValueError):
    """A StreamApp that the model or the semantic checks refuse."""

    def __init__(self, issues: list[Issue]):
        self.issues = [i for i in issues if i.severity == "error"]
        super().__init__("; ".join(str(i) for i in self.issues) or "invalid StreamApp")


def format_path(loc: Loc) -> str:
    """('spec', 'streams', 0, 'steps', 2, 'window', 'advance') -> 'spec.streams[0].steps[2].window.advance'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{part}]"
    return out


def _unwrap(annotation: Any) -> list[Any]:
    """The non-None members of an annotation (Optional[X] -> [X])."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return [a for arg in typing.get_args(annotation) if arg is not type(None) for a in _unwrap(arg)]
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    return [annotation]


def model_at(root: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The model class describing the object at ``loc`` (used to list allowed field names)."""
    current: Any = root
    for part in loc:
        candidates = _unwrap(current)
        current = None
        for candidate in candidates:
            origin = typing.get_origin(candidate)
            if isinstance(part, int) and origin is list:
                current = typing.get_args(candidate)[0]
            elif isinstance(part, str) and origin is dict:
                current = typing.get_args(candidate)[1]
            elif isinstance(part, str) and isinstance(candidate, type) and issubclass(candidate, BaseModel):
                for name, field in candidate.model_fields.items():
                    if (field.alias or name) == part:
                        current = field.annotation
        if current is None:
            return None
    for candidate in _unwrap(current):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _field_pattern(root: type[BaseModel], loc: Loc) -> str | None:
    """The regular expression the string field at ``loc`` must match, if it declares one."""
    parent = model_at(root, loc[:-1])
    if parent is None:
        return None
    for name, field in parent.model_fields.items():
        if (field.alias or name) == loc[-1]:
            return _pattern_in([*field.metadata, field.annotation])
    return None


def _pattern_in(items: list[Any]) -> str | None:
    """The first ``pattern`` constraint among annotations, their Annotated metadata and union members."""
    for item in items:
        pattern = getattr(item, "pattern", None)
        if isinstance(pattern, str):
            return pattern
        found = _pattern_in(list(getattr(item, "metadata", None) or []))
        origin = typing.get_origin(item)
        if found is None and origin in (typing.Annotated, typing.Union, types.UnionType):
            found = _pattern_in(list(typing.get_args(item)))
        if found is not None:
            return found
    return None


def allowed_fields(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


def _describe(error: ErrorDetails, root: type[BaseModel]) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    value = error.get("input")
    loc = tuple(error["loc"])
    if kind == "extra_forbidden":
        parent = model_at(root, loc[:-1])
        names = allowed_fields(parent) if parent else []
        allowed = ", ".join(names) if parent else "see kubectl explain streamapp"
        if parent is Step and loc[-1] in KAFKA_STREAMS_STEPS:
            return (f"unknown field {loc[-1]!r}: Kafka Streams' {loc[-1]} is the step {KAFKA_STREAMS_STEPS[str(loc[-1])]} "
                    f"here; allowed fields here: {allowed}")
        return f"unknown field {loc[-1]!r}{did_you_mean(str(loc[-1]), names)}; allowed fields here: {allowed}"
    if kind == "missing":
        return "required field is missing"
    if kind == "string_pattern_mismatch":
        pattern = ctx.get("pattern", "")
        help_text = _PATTERN_HELP.get(pattern, f"a string matching {pattern}")
        return f"{value!r} is not allowed here: use {help_text}"
    if kind == "literal_error":
        options = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        close = did_you_mean(str(value), options)
        if close:
            return f"{value!r} is not allowed{close}; use one of {ctx.get('expected')}"
        return f"{value!r} is not supported; use one of {ctx.get('expected')}"
    if kind == "string_type" and isinstance(value, int | float) and not isinstance(value, bool):
        pattern = _field_pattern(root, loc)
        if pattern in _PATTERN_HELP:
            return f"expected text, got the number {value!r}: use {_PATTERN_HELP[pattern]}"
    if kind in ("string_type", "int_type", "bool_type", "dict_type", "list_type", "model_type",
                "float_type", "int_parsing", "bool_parsing", "model_attributes_type"):
        expected = {"string_type": "a string", "int_type": "an integer", "int_parsing": "an integer",
                    "bool_type": "true or false", "bool_parsing": "true or false", "float_type": "a number",
                    "dict_type": "a mapping", "model_type": "a mapping", "model_attributes_type": "a mapping",
                    "list_type": "a list"}[kind]
        if kind == "list_type" and isinstance(value, str):
            write = f": write [{value}]" if len(value) <= MAX_SHOWN and value.isprintable() else ""
            return f"expected a list, got the text {shown(value)}{write}"
        return f"expected {expected}, got {type(value).__name__} {value!r}"
    return f"{error['msg']} (got {value!r})" if value is not None and not isinstance(value, dict | list) else error["msg"]


def issues_from_validation_error(exc: ValidationError, root: type[BaseModel]) -> list[Issue]:
    """Translate pydantic's errors into Issues whose paths use the manifest's field names."""
    issues = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        issues.append(Issue(format_path(loc), _describe(error, root)))
    return sorted(set(issues), key=issues.index)
