"""Column types as far as the API knows them (schema types, normalised by ``sources.parse_spark_type``):
enough to follow struct field access (``payload.amount``, ``items.price`` on an array of structs)."""

from __future__ import annotations

from .sources import METADATA_COLUMNS, SparkTypeError, parse_spark_type

METADATA_TYPES = dict(zip(METADATA_COLUMNS, ("string", "timestamp", "string", "int", "long")))


def normalised(type_text: str) -> str | None:
    try:
        return parse_spark_type(type_text)
    except SparkTypeError:
        return None


def _split_top(text: str) -> list[str]:
    """'a:int,b:struct<c:int,d:int>' -> ['a:int', 'b:struct<c:int,d:int>'] (commas outside <> and ())."""
    parts, depth, start = [], 0, 0
    for k, char in enumerate(text):
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:k])
            start = k + 1
    parts.append(text[start:])
    return parts


def struct_fields(type_text: str | None) -> dict[str, str] | None:
    """Field name -> type of a normalised struct type; None for any other type."""
    if not type_text or not type_text.startswith("struct<"):
        return None
    fields = {}
    for part in _split_top(type_text[len("struct<"):-1]):
        name, _, inner = part.partition(":")
        fields[name] = inner
    return fields


def element_type(type_text: str | None) -> str | None:
    """The element type of a normalised array type; None for any other type."""
    if not type_text or not type_text.startswith("array<"):
        return None
    return type_text[len("array<"):-1]


def field_problem(parts: tuple[str, ...], column_type: str | None) -> tuple[str, str, list[str]] | None:
    """For a reference such as ('payload', 'amout'): (path so far, the missing field, the fields there)
    when a struct on the way has no such field (ignoring case, as Spark does); else None. Stops at
    types it does not follow (maps, scalars, unknown)."""
    current = column_type
    for k, part in enumerate(parts[1:], start=1):
        fields = struct_fields(current) or struct_fields(element_type(current))  # array<struct>.f: every f
        if fields is None:
            return None
        by_folded = {name.lower(): name for name in fields}
        if part.lower() not in by_folded:
            return ".".join(parts[:k]), part, list(fields)
        current = fields[by_folded[part.lower()]]
    return None
