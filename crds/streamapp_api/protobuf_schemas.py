"""Protobuf schemas of a schema registry, as the runtime at start and ``streamapp validate`` read them: the
descriptors of a registered schema, and which Spark SQL column types each field's values fit.

The registry compiles a schema's .proto text and answers ``?format=serialized`` with a FileDescriptorProto
(base64), so no .proto parser is needed; schemas it references are fetched the same way. No pyspark here:
the runtime decodes records (streamapp_runtime/compile/protobuf_values.py) and asks this module whether a
column fits, so that validate and the driver's start refuse the same columns. The ``protobuf`` package is
imported when a schema is read, not with this module: the API's own dependencies do not include it.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import urllib.parse
from typing import Any

from .schema_registry import Registry, RegistryError
from .sources import SparkTypeError, canonical_spark_type, parse_spark_type

_WELL_KNOWN = ("descriptor", "any", "duration", "empty", "field_mask", "source_context", "struct", "timestamp",
               "type", "api", "wrappers")  # dependencies first
WELL_KNOWN_FILES = {f"google/protobuf/{name}.proto" for name in _WELL_KNOWN}
TIMESTAMP_MESSAGE = "google.protobuf.Timestamp"
WRAPPERS = {f"google.protobuf.{name}Value" for name in
            ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")}
# Each scalar field type -> the Spark SQL column types that hold every value of it, the one it reads as
# first: lossless widening only (a uint64 above bigint's range makes its record unreadable).
COLUMN_TYPES_OF = {
    **dict.fromkeys(("int32", "sint32", "sfixed32"), ("int", "bigint", "double")),
    **dict.fromkeys(("uint32", "fixed32"), ("bigint", "double")),
    **dict.fromkeys(("int64", "sint64", "sfixed64", "uint64", "fixed64"), ("bigint",)),
    "float": ("float", "double"), "double": ("double",),
    "bool": ("boolean",), "string": ("string",), "bytes": ("binary",),
}
ENUM_COLUMN_TYPES = ("string", "int", "bigint")  # its name, or its number
TIMESTAMP_COLUMN_TYPES = ("timestamp", "timestamp_ntz")
# FieldDescriptor.TYPE_* numbers -> the names .proto text gives them.
_SCALAR_NAMES = dict(enumerate(("double", "float", "int64", "uint64", "int32", "fixed64", "fixed32", "bool",
                                "string", "group", "message", "bytes", "uint32", "enum", "sfixed32", "sfixed64",
                                "sint32", "sint64"), start=1))


class UnusableSchema(ValueError):
    """A registered Protobuf schema that cannot be built into descriptors; the message says why."""


def type_name(fd: Any) -> str:
    """A field's type as .proto text names it: a scalar's name, a message's full name, 'enum NAME'. Pure."""
    if fd.type == fd.TYPE_MESSAGE:
        return str(fd.message_type.full_name)
    if fd.type == fd.TYPE_ENUM:
        return f"enum {fd.enum_type.full_name}"
    return _SCALAR_NAMES[fd.type]


def is_map(fd: Any) -> bool:
    return bool(fd.is_repeated and fd.type == fd.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry)


# --- which column types a field fits ---------------------------------------------------------------


def _split(type_text: str) -> tuple[str, list[str]]:
    """A normalised Spark SQL type -> its kind and the types inside it ('name:type' for a struct's). Pure."""
    if "<" not in type_text:
        return canonical_spark_type(type_text), []
    kind, inner = type_text[:type_text.index("<")], type_text[type_text.index("<") + 1:-1]
    parts, depth, start = [], 0, 0
    for i, char in enumerate(inner):
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    return kind, [*parts, inner[start:]]


def value_problem(fd: Any, type_text: str) -> str | None:
    """Why one (non-repeated) value of field ``fd`` does not fit a column of ``type_text`` (normalised),
    or None. Pure."""
    kind, inner = _split(type_text)
    name = type_name(fd)
    if fd.type == fd.TYPE_MESSAGE:
        if name == TIMESTAMP_MESSAGE and kind in TIMESTAMP_COLUMN_TYPES:
            return None
        if name in WRAPPERS:
            return value_problem(fd.message_type.fields_by_name["value"], type_text)
        if kind == "struct":
            return struct_problem(fd.message_type, dict(part.split(":", 1) for part in inner))
    elif fd.type == fd.TYPE_ENUM:
        if kind in ENUM_COLUMN_TYPES:
            return None
    elif kind in COLUMN_TYPES_OF.get(name, ()):
        return None
    return f"{name} does not fit a {type_text} column"


def field_problem(fd: Any, type_text: str) -> str | None:
    """Why a column of ``type_text`` cannot hold field ``fd`` of a message (a map, a repeated field, a
    value), or None: what the runtime refuses when the app starts. Pure."""
    try:
        type_text = parse_spark_type(type_text)
    except SparkTypeError as exc:
        return f"{type_text!r} is no Spark SQL type ({exc})"
    kind, inner = _split(type_text)
    if is_map(fd):
        if kind != "map":
            return f"a map does not fit a {type_text} column"
        entry = fd.message_type.fields_by_name
        return value_problem(entry["key"], inner[0]) or value_problem(entry["value"], inner[1])
    if fd.is_repeated:
        if kind != "array":
            return f"a repeated {type_name(fd)} does not fit a {type_text} column"
        return value_problem(fd, inner[0])
    return value_problem(fd, type_text)


def struct_problem(descriptor: Any, columns: dict[str, str]) -> str | None:
    """Why a struct of ``columns`` (name -> Spark SQL type) cannot be read from a message of type
    ``descriptor``: a column it has no field for, a field whose type does not fit. Pure."""
    problems = []
    for column, type_text in columns.items():
        fd = descriptor.fields_by_name.get(column)
        problem = f"no field {column!r} in {descriptor.full_name}" if fd is None else field_problem(fd, type_text)
        if problem is not None:
            problems.append(problem if fd is None else f"field {column!r}: {problem}")
    return "; ".join(problems) or None


def column_type(fd: Any, within: tuple[str, ...] = ()) -> str:
    """The Spark SQL type a field reads as without widening, e.g. 'array<struct<sku:string,qty:int>>'.
    A message within itself is 'struct<...>' (a column declares how deep it reads). Pure."""
    def value(fd: Any) -> str:
        name = type_name(fd)
        if fd.type == fd.TYPE_ENUM:
            return ENUM_COLUMN_TYPES[0]
        if fd.type != fd.TYPE_MESSAGE:
            return COLUMN_TYPES_OF[name][0]
        if name == TIMESTAMP_MESSAGE:
            return TIMESTAMP_COLUMN_TYPES[0]
        if name in WRAPPERS:
            return value(fd.message_type.fields_by_name["value"])
        if name in within:
            return "struct<...>"
        fields = ",".join(f"{f.name}:{column_type(f, (*within, name))}" for f in fd.message_type.fields)
        return f"struct<{fields}>"

    if is_map(fd):
        entry = fd.message_type.fields_by_name
        return f"map<{value(entry['key'])},{value(entry['value'])}>"
    return f"array<{value(fd)}>" if fd.is_repeated else value(fd)


def message_columns(descriptor: Any) -> dict[str, str]:
    """Column name -> Spark SQL type, one per field of a message. Pure."""
    return {fd.name: column_type(fd, (descriptor.full_name,)) for fd in descriptor.fields}


# --- descriptors from the registry ------------------------------------------------------------------


def new_pool() -> Any:
    """A descriptor pool holding protobuf's well-known types, which schemas import without a
    reference (google/protobuf/timestamp.proto ...)."""
    from google.protobuf import descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    for name in _WELL_KNOWN:
        pool.AddSerializedFile(importlib.import_module(f"google.protobuf.{name}_pb2").DESCRIPTOR.serialized_pb)
    return pool


def _serialized(registry: Registry, path: str) -> dict[str, Any] | None:
    answer = registry.get(path + "?format=serialized")
    if answer is not None and answer.get("schemaType") != "PROTOBUF":
        return None  # an Avro or JSON schema: no Protobuf message
    return answer


def _file(registry: Registry, answer: dict[str, Any], name: str, path: str) -> Any:
    from google.protobuf import descriptor_pb2

    try:
        file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(answer["schema"], validate=True))
    except (binascii.Error, ValueError) as exc:
        # .proto text: a registry that does not serve ?format=serialized. Every record would fail alike.
        raise RegistryError(f"schema registry {registry.url}: GET {path}?format=serialized did not answer a "
                            f"serialized FileDescriptorProto ({exc}): the registry must serve Protobuf schemas "
                            "in that form, as Confluent Schema Registry does") from exc
    file.name = name
    return file


def _add_with_references(registry: Registry, pool: Any, answer: dict[str, Any], seen: set[str]) -> None:
    for ref in answer.get("references") or []:
        if ref["name"] in seen:
            continue
        seen.add(ref["name"])
        path = f"/subjects/{urllib.parse.quote(ref['subject'], safe='')}/versions/{ref['version']}"
        referenced = _serialized(registry, path)
        if referenced is None:
            raise UnusableSchema(f"its reference {ref['name']!r} ({ref['subject']} version {ref['version']}) "
                                 "is not a Protobuf schema of the registry")
        _add_with_references(registry, pool, referenced, seen)
        pool.Add(_file(registry, referenced, ref["name"], path))


def registered_file(registry: Registry, path: str, name: str) -> tuple[Any, Any] | None:
    """The descriptor pool and FileDescriptorProto (named ``name``) of the Protobuf schema at ``path``
    (an id's, a subject version's) with the schemas it references; None when the registry has no such
    Protobuf schema. UnusableSchema when it cannot be built, RegistryError when the registry does not
    answer as expected."""
    answer = _serialized(registry, path)
    if answer is None:
        return None
    pool = new_pool()
    try:
        _add_with_references(registry, pool, answer, set())
        file = _file(registry, answer, name, path)
        pool.Add(file)
    except (TypeError, KeyError) as exc:  # the pool refuses it: an import nobody resolves, say
        raise UnusableSchema(f"the schema cannot be built: {exc}") from exc
    return pool, file


def top_level_messages(registry: Registry, subject: str, version: str | int = "latest") -> list[Any]:
    """The descriptors of the top-level messages of a subject's version (which one a record is, its wire
    format says). RegistryError when the registry has no such Protobuf subject, or its schema cannot be
    built."""
    try:
        built = registered_file(registry, f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}",
                                "streamapp-latest.proto")
    except UnusableSchema as exc:
        raise RegistryError(f"schema registry {registry.url}: subject {subject!r}: {exc}") from None
    if built is None:
        raise RegistryError(f"schema registry {registry.url} has no Protobuf subject {subject!r}: register the "
                            "schema (a producer's serializer does on its first record)")
    pool, file = built
    prefix = f"{file.package}." if file.package else ""
    return [pool.FindMessageTypeByName(prefix + message.name) for message in file.message_type]

