"""The columns a registered schema gives, per schema type of the registry: what ``streamapp validate``
checks a spec's declared columns against (registry_check.py), as the runtime checks them at start."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .avro_schemas import avro_columns
from .protobuf_schemas import field_problem, message_columns, top_level_messages
from .schema_registry import Registry


@dataclass(frozen=True)
class RegisteredColumns:
    """The columns one record type of a registered schema (an Avro record, a Protobuf message) gives."""

    name: str  # the record's or message's full name
    columns: dict[str, str]  # field name -> the Spark SQL type it reads as
    # Why a declared column (its name, its Spark SQL type) cannot hold that field's values, so that the
    # app would not start; None: a column of any type is read, each value cast (Avro).
    type_problem: Callable[[str, str], str | None] | None = None


def _avro(registry: Registry, answer: dict[str, Any], subject: str) -> list[RegisteredColumns]:
    schema = json.loads(answer["schema"])
    name = ".".join(part for part in (schema.get("namespace"), schema.get("name")) if part)
    return [RegisteredColumns(name, avro_columns(schema, subject))]


def _protobuf(registry: Registry, answer: dict[str, Any], subject: str) -> list[RegisteredColumns]:
    """Each top-level message of the subject's version, with the runtime's rules of which column types
    fit its fields (the answer is .proto text: the descriptors are fetched ?format=serialized)."""
    def type_problem(descriptor: Any) -> Callable[[str, str], str | None]:
        return lambda column, type_text: field_problem(descriptor.fields_by_name[column], type_text)

    return [RegisteredColumns(d.full_name, message_columns(d), type_problem(d))
            for d in top_level_messages(registry, subject, answer["version"])]


# By the registry's schema type, the columns of a registered schema (an answer of /subjects/.../versions/
# latest, and its subject), one entry per record type a record may be (a Protobuf schema has several
# messages; the wire format says which): what a format's reader reads (VALUE_FORMATS' registry_type).
COLUMNS_OF: dict[str, Callable[[Registry, dict[str, Any], str], list[RegisteredColumns]]] = {
    "AVRO": _avro, "PROTOBUF": _protobuf}
