"""Protobuf record values: in the Confluent wire format through a schema registry, or plain payloads
of one message type described by a descriptor set.

The wire format: a zero byte, the writer schema's id (4 bytes, big-endian), the *message indexes*
(which message of the schema: a zigzag varint count, then that many zigzag varint indexes, the first
into the schema's top-level messages, each next into the nested messages of the one before; a lone
zero byte stands for [0], the first message), then the protobuf payload. The writer schema is fetched
by id as a serialized FileDescriptorProto (streamapp_api.protobuf_schemas: the registry compiles the
.proto text, so no .proto parser is needed; schemas it references are fetched the same way), cached for
the life of the process, and the payload parsed with the message class the ``protobuf`` package builds
from it. So a writer schema registered mid-stream is read without a restart.

The columns are the app's schema (name -> Spark SQL type), matched to the message's fields by name:
- a column whose field the writer's message lacks is null (an older or newer writer);
- a field with presence (a message, a proto3 ``optional``, a oneof member, any proto2 singular field)
  that the record does not set is null; a proto3 scalar without presence reads as its default (0,
  "", false), since its wire form cannot tell "unset" from the default; an unset repeated field or
  map is an empty array or map;
- google.protobuf.Timestamp is a timestamp; the wrappers (Int64Value...) are their value, null when
  unset; an enum is its name for a string column (its number when the name is unknown) or its number
  for an integer column; a message is a struct, a repeated field an array, a map a map.
A field whose protobuf type does not fit its column (a string for a bigint column, say) makes every
record of that writer unreadable, with the reason: no silent cast. Widening that loses nothing is
read (int32 into bigint or double, float into double).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

# At module level: pandas_udf reads the decoder's type hints (pd.Series -> pd.DataFrame) in this
# module's globals.
import pandas as pd
from pyspark.sql.types import (
    ArrayType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from streamapp_api.protobuf_schemas import (COLUMN_TYPES_OF, TIMESTAMP_MESSAGE, WELL_KNOWN_FILES, WRAPPERS,
                                             UnusableSchema, new_pool, registered_file, type_name)
from streamapp_api.schema_registry import Registry

from streamapp_runtime.compile.avro_values import HEADER, MAGIC

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_LONG_MAX = 2**63 - 1
_UINT64 = ("uint64", "fixed64")  # read into bigint with a range check


class UnreadableRecord(ValueError):
    """A record that cannot be read; its message is the reason the dead-letter topic gets."""


# --- the wire format ----------------------------------------------------------------------------


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it. Pure."""
    result = shift = 0
    while True:
        if pos >= len(data):
            raise UnreadableRecord("a truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 64:
            raise UnreadableRecord("a varint of more than 10 bytes")


def zigzag_decode(n: int) -> int:
    """0, 1, 2, 3 ... -> 0, -1, 1, -2 ... Pure."""
    return (n >> 1) ^ -(n & 1)


def message_indexes(data: bytes, pos: int) -> tuple[list[int], int]:
    """The message indexes at ``pos`` (after the schema id) and where the payload starts. Pure."""
    raw, pos = read_varint(data, pos)
    count = zigzag_decode(raw)
    if count == 0:
        return [0], pos  # the first message of the schema, the common case, in one byte
    if count < 0 or count > len(data) - pos:
        raise UnreadableRecord(f"a count of {count} with {len(data) - pos} bytes left")
    indexes = []
    for _ in range(count):
        raw, pos = read_varint(data, pos)
        index = zigzag_decode(raw)
        if index < 0:
            raise UnreadableRecord(f"a negative index {index}")
        indexes.append(index)
    return indexes, pos


def message_name(file: Any, indexes: list[int]) -> str:
    """The full name of the message ``indexes`` point at in a FileDescriptorProto. Pure."""
    messages, names = file.message_type, []
    for depth, index in enumerate(indexes):
        if index >= len(messages):
            where = "top-level messages" if depth == 0 else f"messages nested in {'.'.join(names)}"
            raise UnreadableRecord(f"message indexes {indexes}: the schema has {len(messages)} {where}")
        names.append(messages[index].name)
        messages = messages[index].nested_type
    return ".".join([file.package, *names] if file.package else names)


# --- reading a message's fields into columns ----------------------------------------------------


def _long(value: int) -> int:
    if value > _LONG_MAX:
        raise UnreadableRecord(f"{value} is out of the range of bigint")
    return value


def _timestamp(aware: bool) -> Callable[[Any], datetime]:
    def read(ts: Any) -> datetime:
        at = _EPOCH + timedelta(seconds=ts.seconds, microseconds=ts.nanos // 1000)
        return at if aware else at.replace(tzinfo=None)
    return read


def _identity(value: Any) -> Any:
    return value


def value_reader(fd: Any, column: DataType) -> Callable[[Any], Any]:
    """How one (non-repeated) value of field ``fd`` becomes a value of a ``column`` column; raises
    TypeError when the types do not fit. Pure."""
    kind = type_name(fd)
    if fd.type == fd.TYPE_MESSAGE:
        if kind == TIMESTAMP_MESSAGE and isinstance(column, (TimestampType, TimestampNTZType)):
            return _timestamp(aware=isinstance(column, TimestampType))
        if kind in WRAPPERS:
            inner = value_reader(fd.message_type.fields_by_name["value"], column)
            return lambda wrapper: inner(wrapper.value)
        if isinstance(column, StructType):
            return struct_reader(fd.message_type, column)
    elif fd.type == fd.TYPE_ENUM:
        if isinstance(column, StringType):
            names = {v.number: v.name for v in fd.enum_type.values}
            return lambda number: names.get(number, str(number))
        if isinstance(column, (IntegerType, LongType)):
            return _identity
    elif isinstance(column, LongType) and kind in _UINT64:
        return _long
    elif _fits(kind, column):
        return _identity
    raise TypeError(f"{kind} does not fit a {column.simpleString()} column")


def _fits(kind: str, column: DataType) -> bool:
    # simpleString: the Spark SQL name of the type (bigint, int, double ...), as COLUMN_TYPES_OF lists them
    return column.simpleString() in COLUMN_TYPES_OF.get(kind, ())


def field_reader(fd: Any, column: DataType) -> Callable[[Any], Any]:
    """The value of a ``column`` column from a message that has field ``fd``; TypeError when the
    types do not fit. Pure."""
    name = fd.name
    if fd.is_repeated and fd.type == fd.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry:
        if not isinstance(column, MapType):
            raise TypeError(f"a map does not fit a {column.simpleString()} column")
        entry = fd.message_type.fields_by_name
        key, value = value_reader(entry["key"], column.keyType), value_reader(entry["value"], column.valueType)
        return lambda message: {key(k): value(v) for k, v in getattr(message, name).items()}
    if fd.is_repeated:
        if not isinstance(column, ArrayType):
            raise TypeError(f"a repeated {type_name(fd)} does not fit a {column.simpleString()} column")
        element = value_reader(fd, column.elementType)
        return lambda message: [element(v) for v in getattr(message, name)]
    one = value_reader(fd, column)
    if fd.has_presence:
        return lambda message: one(getattr(message, name)) if message.HasField(name) else None
    return lambda message: one(getattr(message, name))


def struct_reader(descriptor: Any, columns: StructType) -> Callable[[Any], dict]:
    """A dict of ``columns`` from a message of type ``descriptor``: null for a field it lacks. Raises
    TypeError naming every field whose type does not fit. Pure."""
    readers, problems = {}, []
    for column in columns.fields:
        fd = descriptor.fields_by_name.get(column.name)
        if fd is None:
            continue
        try:
            readers[column.name] = field_reader(fd, column.dataType)
        except TypeError as exc:
            problems.append(f"field {column.name!r}: {exc}")
    if problems:
        raise TypeError("; ".join(problems))
    names = [c.name for c in columns.fields]

    def read(message: Any) -> dict:
        row = dict.fromkeys(names)
        for name, reader in readers.items():
            try:
                row[name] = reader(message)
            except UnreadableRecord as exc:
                raise UnreadableRecord(f"field {name!r}: {exc}") from None
        return row
    return read


def missing_fields(descriptor: Any, columns: StructType) -> list[str]:
    """The columns ``descriptor`` has no field for (nested structs included, as 'a.b'). Pure."""
    missing = []
    for column in columns.fields:
        fd = descriptor.fields_by_name.get(column.name)
        if fd is None:
            missing.append(column.name)
        elif isinstance(column.dataType, StructType) and fd.type == fd.TYPE_MESSAGE and not fd.is_repeated:
            missing += [f"{column.name}.{m}" for m in missing_fields(fd.message_type, column.dataType)]
    return missing


# --- where each record's message type comes from ------------------------------------------------


@dataclass(frozen=True)
class Message:
    """A message type that records are read as, and where the payload starts in the record."""

    key: tuple  # names the type among all a decoder has seen: its readers are kept by it
    descriptor: Any
    payload_at: int


@dataclass
class RegistryMessages:
    """Each record's message type from the wire format: writer schemas by id from the registry."""

    registry: Registry
    # id -> (pool, the schema's FileDescriptorProto), or why it cannot be built; an id never changes its schema.
    _schemas: dict[int, tuple[Any, Any] | str] = field(default_factory=dict)
    # Ids the registry did not know, asked again after `forget_unknown` (each batch).
    _unknown: set[int] = field(default_factory=set)

    def __getstate__(self) -> dict:
        return {"registry": self.registry}  # what travels to the executors: the caches are built there

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def forget_unknown(self) -> None:
        self._unknown.clear()

    def _schema(self, schema_id: int) -> tuple[Any, Any] | None:
        if schema_id not in self._schemas and schema_id not in self._unknown:
            try:
                built = registered_file(self.registry, f"/schemas/ids/{schema_id}", f"streamapp-writer-{schema_id}.proto")
            except UnusableSchema as exc:
                built = f"writer schema id {schema_id}: {exc}"
            if built is None:
                self._unknown.add(schema_id)
            else:
                self._schemas[schema_id] = built
        schema = self._schemas.get(schema_id)
        if isinstance(schema, str):
            raise UnreadableRecord(schema)
        return schema

    def locate(self, value: bytes) -> Message:
        if len(value) < HEADER.size or value[0] != MAGIC:
            raise UnreadableRecord("not in the Confluent wire format (a zero byte, then a 4-byte schema id)")
        _, schema_id = HEADER.unpack_from(value)
        schema = self._schema(schema_id)
        if schema is None:
            raise UnreadableRecord(f"unknown schema id {schema_id}: the registry has no Protobuf schema of that id")
        pool, file = schema
        try:
            indexes, payload_at = message_indexes(value, HEADER.size)
        except UnreadableRecord as exc:
            raise UnreadableRecord(f"malformed message indexes after schema id {schema_id}: {exc}") from None
        try:
            name = message_name(file, indexes)
        except UnreadableRecord as exc:
            raise UnreadableRecord(f"writer schema id {schema_id}: {exc}") from None
        return Message((schema_id, name), pool.FindMessageTypeByName(name), payload_at)

    def describe(self, message: Message) -> str:
        return f"writer schema id {message.key[0]} ({message.key[1]})"


@dataclass
class DescriptorSetMessages:
    """Every record is a plain payload of one message type, found in a FileDescriptorSet."""

    descriptor_set: bytes
    message: str
    _descriptor: Any = None

    def __getstate__(self) -> dict:
        # What travels to the executors: a descriptor is no object pickle takes, each builds its own.
        return {"descriptor_set": self.descriptor_set, "message": self.message}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def descriptor(self) -> Any:
        """The message's descriptor; ValueError when the set does not hold it."""
        if self._descriptor is None:
            from google.protobuf import descriptor_pb2

            files = descriptor_pb2.FileDescriptorSet.FromString(self.descriptor_set).file
            pool = new_pool()
            for file in _in_dependency_order(files):
                if file.name not in WELL_KNOWN_FILES:  # protoc's --include_imports copies them: the pool has them
                    pool.Add(file)
            try:
                self._descriptor = pool.FindMessageTypeByName(self.message)
            except KeyError:
                names = sorted(f"{f.package}.{m.name}" if f.package else m.name for f in files for m in f.message_type
                               if f.name not in WELL_KNOWN_FILES)
                raise ValueError(f"message {self.message!r} is not in the descriptor set (its top-level messages: "
                                 f"{', '.join(names) or 'none'})") from None
        return self._descriptor

    def forget_unknown(self) -> None:
        pass

    def locate(self, value: bytes) -> Message:
        return Message((self.message,), self.descriptor(), 0)

    def describe(self, message: Message) -> str:
        return self.message


def _in_dependency_order(files: Any) -> list:
    """protoc writes a set's files dependencies first; a set put together by hand may not. Pure."""
    by_name = {f.name: f for f in files}
    ordered: list = []
    done: set[str] = set()

    def visit(file: Any) -> None:
        if file.name in done:
            return
        done.add(file.name)
        for dependency in file.dependency:
            if dependency in by_name:
                visit(by_name[dependency])
        ordered.append(file)

    for file in files:
        visit(file)
    return ordered


# --- the decoder ---------------------------------------------------------------------------------


@dataclass
class ProtobufDecoder:
    """Reads values into ``columns`` by the message type ``messages`` finds for each."""

    messages: RegistryMessages | DescriptorSetMessages
    columns: StructType
    # Message.key -> (message class, struct reader) or the reason its records cannot be read.
    _readers: dict[tuple, tuple[Any, Callable[[Any], dict]] | str] = field(default_factory=dict)

    def _reader(self, message: Message) -> tuple[Any, Callable[[Any], dict]] | str:
        if message.key not in self._readers:
            from google.protobuf.message_factory import GetMessageClass

            try:
                self._readers[message.key] = (GetMessageClass(message.descriptor),
                                              struct_reader(message.descriptor, self.columns))
            except TypeError as exc:
                self._readers[message.key] = f"wrong type in {self.messages.describe(message)}: {exc}"
        return self._readers[message.key]

    def decode(self, value: bytes | None) -> tuple[dict | None, str | None]:
        """(the record's columns, None), or (None, why it cannot be read). RegistryError when the
        registry does not answer: the caller's batch fails rather than losing records."""
        from google.protobuf.message import DecodeError

        if value is None:
            return None, "null value: a stream record needs a Protobuf value"
        try:
            message = self.messages.locate(value)
            reader = self._reader(message)
            if isinstance(reader, str):
                return None, reader
            message_class, read = reader
            try:
                parsed = message_class.FromString(value[message.payload_at:])
            except DecodeError as exc:
                return None, f"malformed Protobuf for {self.messages.describe(message)}: {exc}"
            return read(parsed), None
        except UnreadableRecord as exc:
            return None, str(exc)


# One decoder per message source and columns in each Python worker, so that writer schemas are
# fetched once per process, not once per batch (Spark reuses its Python workers between batches).
_DECODERS: dict[tuple, ProtobufDecoder] = {}


def decoder(key: tuple, make: Callable[[], ProtobufDecoder]) -> ProtobufDecoder:
    if key not in _DECODERS:
        _DECODERS[key] = make()
    return _DECODERS[key]


def protobuf_values(value, messages: RegistryMessages | DescriptorSetMessages, columns: StructType, error_column: str):
    """A struct column of ``columns`` and ``error_column`` (null for a record that was read, else why
    not) from a column of Protobuf values. Decoded in a pandas UDF, a batch of records to each call,
    on the executors; ``messages`` travels with the function (a descriptor set's bytes too)."""
    import hashlib

    from pyspark.sql.functions import pandas_udf
    from pyspark.sql.types import StructField

    names = [c.name for c in columns.fields]
    result = StructType([*columns.fields, StructField(error_column, StringType())])
    if isinstance(messages, RegistryMessages):
        key: tuple = ("registry", messages.registry, columns.json())
    else:
        key = ("set", hashlib.sha256(messages.descriptor_set).hexdigest(), messages.message, columns.json())

    @pandas_udf(result)  # type: ignore[call-overload]
    def decode(values: pd.Series) -> pd.DataFrame:
        protobuf = decoder(key, lambda: ProtobufDecoder(messages, columns))
        protobuf.messages.forget_unknown()
        rows = []
        for value in values:
            record, error = protobuf.decode(None if value is None else bytes(value))
            row = dict.fromkeys(names) if record is None else record
            row[error_column] = error
            rows.append(row)
        # object columns: a column of ints with a null in it stays ints (not floats with NaN).
        return pd.DataFrame(rows, columns=[*names, error_column], dtype=object)

    # Nondeterministic, so that Spark keeps one evaluation (avro_values says why).
    return decode.asNondeterministic()(value)


def check_columns(descriptor: Any, columns: StructType, where: str) -> None:
    """ValueError when a column is no field of the message, or its type does not fit (the app's start)."""
    missing = missing_fields(descriptor, columns)
    if missing:
        raise ValueError(f"{', '.join(map(repr, missing))} not a field of {where} "
                         f"(fields: {', '.join(f.name for f in descriptor.fields)})")
    try:
        struct_reader(descriptor, columns)
    except TypeError as exc:
        raise ValueError(f"{where}: {exc}") from None


def read_descriptor_set(config_map: str, key: str) -> bytes:
    """The bytes of a descriptor-set ConfigMap's key, as mounted in the driver (the operator mounts it;
    STREAMAPP_DESCRIPTOR_SET_DIR moves the root for a local run)."""
    import os

    from streamapp_api import contract

    root = os.environ.get(contract.ENV_DESCRIPTOR_SET_DIR, contract.DESCRIPTOR_SET_DIR)
    path = os.path.join(contract.descriptor_set_dir(config_map, root), key)
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:
        raise ValueError(f"the descriptor set of ConfigMap {config_map!r} key {key!r} cannot be read at {path}: "
                         f"{exc.strerror}") from exc
