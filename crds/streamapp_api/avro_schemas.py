"""Avro schemas as the columns they give: the Spark SQL type of each field of a record. Pure, and without
an Avro library: the API checks a source's avro.writerSchema with it, the runtime and ``streamapp
validate`` the schemas a registry holds (schema_registry.py, registry_columns.py).
"""

from __future__ import annotations

import json
from typing import Any

from .limits import bracket_depth

# Avro's primitive types -> Spark SQL types of the columns they become.
_SPARK_TYPES = {"string": "string", "long": "bigint", "int": "int", "double": "double", "float": "float",
                "boolean": "boolean", "bytes": "binary"}
# Logical types whose values fastavro gives as Python objects Spark reads as its own.
_SPARK_LOGICAL = {"timestamp-millis": "timestamp", "timestamp-micros": "timestamp", "date": "date"}


def spark_type(avro_type: Any) -> str:
    """The Spark SQL type of an Avro field type (a nullable union is its other branch). Pure."""
    if isinstance(avro_type, list):
        branches = [t for t in avro_type if t != "null"]
        if len(branches) != 1:
            raise ValueError(f"union {avro_type}: only a union of null and one type becomes a column")
        return spark_type(branches[0])
    if isinstance(avro_type, dict):
        if avro_type.get("logicalType") in _SPARK_LOGICAL:
            return _SPARK_LOGICAL[avro_type["logicalType"]]
        kind = avro_type["type"]
        if kind == "record":
            return "struct<" + ",".join(f"`{f['name']}`:{spark_type(f['type'])}" for f in avro_type["fields"]) + ">"
        if kind == "array":
            return f"array<{spark_type(avro_type['items'])}>"
        if kind == "map":
            return f"map<string,{spark_type(avro_type['values'])}>"
        if kind == "enum":
            return "string"
        return spark_type(kind)
    if avro_type in _SPARK_TYPES:
        return _SPARK_TYPES[avro_type]
    raise ValueError(f"Avro type {avro_type!r} has no column type here")


def avro_columns(schema: Any, subject: str) -> dict[str, str]:
    """Column name -> Spark SQL type, one per field of an Avro record schema. Pure."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise ValueError(f"subject {subject!r}: the value schema is not an Avro record")
    return {f["name"]: spark_type(f["type"]) for f in schema["fields"]}


# How deep brackets may nest in a writer schema's JSON: records in records a few levels deep need a few
# brackets each; the bound keeps the parse and spark_type's recursion short for any text.
MAX_SCHEMA_NESTING = 64


def writer_schema_columns(text: str) -> dict[str, str]:
    """Column name -> Spark SQL type of each field of the Avro record schema ``text`` (JSON), as the runtime
    reads plain Avro values of it; ValueError saying why it is not one. Pure: checked by hand, so that the
    API needs no Avro library."""
    deepest = bracket_depth(text, "[{", "]}")  # a bound, not a parse: brackets inside names count too
    if deepest > MAX_SCHEMA_NESTING:
        raise ValueError(f"nests brackets {deepest} deep; at most {MAX_SCHEMA_NESTING} are allowed")
    try:
        schema = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise ValueError('not an Avro record schema: write {"type": "record", "name": ..., "fields": [...]}')
    fields = schema.get("fields")
    if not isinstance(schema.get("name"), str) or not isinstance(fields, list) or not fields:
        raise ValueError("an Avro record needs a name and a list of fields")
    columns: dict[str, str] = {}
    for index, avro_field in enumerate(fields):
        if not isinstance(avro_field, dict) or not isinstance(avro_field.get("name"), str) or "type" not in avro_field:
            raise ValueError(f"field {index} needs a name and a type")
        name = avro_field["name"]
        if name in columns:
            raise ValueError(f"field {name!r} is declared twice")
        try:
            columns[name] = spark_type(avro_field["type"])
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"field {name!r}: not an Avro type ({type(exc).__name__}: {exc})") from None
        except ValueError as exc:
            raise ValueError(f"field {name!r}: {exc}") from None
    return columns
