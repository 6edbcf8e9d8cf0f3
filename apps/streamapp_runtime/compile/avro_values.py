"""Avro record values in the Confluent wire format, read through a schema registry; or plain Avro values
of one writer schema the spec holds (FixedSchema).

Each value is a zero byte, the writer schema's id (4 bytes, big-endian) and the record encoded with
that schema. The reader schema is the subject's latest version when the app starts (its columns are
the app's); each record is decoded with its own writer schema, fetched from the registry by id and
cached for the life of the process, and resolved to the reader schema by Avro's rules (a field the
writer lacks takes the reader's default, a field the reader lacks is skipped, int widens to long...).
So a writer schema registered mid-stream that the registry accepted as compatible is read without a
restart, and a record that cannot be read gets a reason instead of stopping the query: its schema
id is unknown to the registry, its writer schema does not resolve to the reader schema, or its bytes
are not the wire format.

Why decoding is in Python (fastavro, in a pandas UDF) and not in Spark's ``from_avro``: from_avro
takes one writer schema fixed when the query is planned, so the writer schemas would have to be known
at the start; a record of a schema registered later would not be readable until a restart. Decoding
here resolves any writer schema the registry knows when the record arrives.

Plain Avro values (a source's avro.writerSchema, as Flink's avro format writes them) have no header: a
record is read with the one schema, and a value it does not decode, or that has bytes left after the
record, gets a reason the same way.
"""

from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass, field

# At module level: pandas_udf reads the decoder's type hints (pd.Series -> pd.DataFrame) in this
# module's globals.
import pandas as pd
from streamapp_api.avro_schemas import avro_columns, writer_schema_columns
from streamapp_api.schema_registry import Registry, RegistryError, schema_type

MAGIC = 0
HEADER = struct.Struct(">bI")  # the magic byte and the schema id


@dataclass(frozen=True)
class ReaderSchema:
    """The schema records are read as: a subject's version, fixed when the app starts."""

    subject: str
    version: int
    schema_id: int
    schema: dict

    @classmethod
    def latest(cls, registry: Registry, subject: str) -> "ReaderSchema":
        answer = registry.latest(subject)
        if answer is None:
            raise RegistryError(f"schema registry {registry.url} has no subject {subject!r}: register the "
                                f"value schema (a producer's serializer does on its first record)")
        if schema_type(answer) != "AVRO":
            raise RegistryError(f"subject {subject!r} holds a {answer['schemaType']} schema, not Avro")
        return cls(subject, answer["version"], answer["id"], json.loads(answer["schema"]))

    def columns(self) -> dict[str, str]:
        """Column name -> Spark SQL type, one per field of the reader's record. Pure."""
        return avro_columns(self.schema, self.subject)


@dataclass(frozen=True)
class FixedSchema:
    """The one writer schema of plain Avro values (no header, no registry), which is their reader schema
    too; ``where`` names it in errors (the spec's field)."""

    text: str  # the schema's JSON, as the spec holds it (hashable: it keys the decoders)
    where: str

    @property
    def schema(self) -> dict:
        return json.loads(self.text)

    def columns(self) -> dict[str, str]:
        """Column name -> Spark SQL type, one per field of the record; ValueError naming ``where``. Pure."""
        try:
            return writer_schema_columns(self.text)
        except ValueError as exc:
            raise ValueError(f"{self.where}: {exc}") from None

    def check(self) -> None:
        """ValueError unless fastavro reads the schema (the admission check reads it by hand), raised on the
        driver at the start rather than in a task."""
        from fastavro import parse_schema

        self.columns()
        try:
            parse_schema(self.schema)
        except Exception as exc:  # noqa: BLE001 - fastavro raises several kinds for a schema it refuses
            raise ValueError(f"{self.where}: not an Avro schema fastavro reads: {type(exc).__name__}: {exc}") from None


# What a record's bytes that do not decode with its writer schema raise in fastavro.
_MALFORMED = (EOFError, ValueError, IndexError, UnicodeDecodeError, struct.error)


@dataclass
class AvroDecoder:
    """Decodes values to the reader schema's fields: wire-format values with writer schemas by id from the
    registry, cached; or, without a registry (``reader`` a FixedSchema), plain Avro values of one schema."""

    registry: Registry | None
    reader: ReaderSchema | FixedSchema
    # id -> parsed writer schema: a schema id never changes its schema, so this lives as long as the process.
    _writers: dict[int, object] = field(default_factory=dict)
    # Ids the registry did not know, asked again after `forget_unknown` (each batch): an id may be
    # registered after its first record was read (a registry behind a replica, say).
    _unknown: set[int] = field(default_factory=set)
    _parsed_reader: object = None

    def forget_unknown(self) -> None:
        self._unknown.clear()

    def _writer(self, schema_id: int):
        if schema_id not in self._writers and schema_id not in self._unknown:
            from fastavro import parse_schema

            answer = self.registry.get(f"/schemas/ids/{schema_id}")
            if answer is None or schema_type(answer) != "AVRO":
                # No schema of that id, or one of a Protobuf or JSON schema: no writer of an Avro record.
                self._unknown.add(schema_id)
            else:
                self._writers[schema_id] = parse_schema(json.loads(answer["schema"]))
        return self._writers.get(schema_id)

    def decode(self, value: bytes | None) -> tuple[dict | None, str | None]:
        """(the record's fields, None), or (None, why it cannot be read). RegistryError when the
        registry does not answer: the caller's batch fails rather than losing records."""
        from fastavro import parse_schema, schemaless_reader
        from fastavro.read import SchemaResolutionError

        if value is None:
            return None, "null value: a stream record needs an Avro value"
        if self._parsed_reader is None:
            self._parsed_reader = parse_schema(self.reader.schema)
        if isinstance(self.reader, FixedSchema):
            return self._plain(value, self.reader.where)
        assert self.registry is not None
        if len(value) < HEADER.size or value[0] != MAGIC:
            return None, "not in the Confluent wire format (a zero byte, then a 4-byte schema id)"
        _, schema_id = HEADER.unpack_from(value)
        writer = self._writer(schema_id)
        if writer is None:
            return None, f"unknown schema id {schema_id}: the registry has no Avro schema of that id"
        reader_name = f"{self.reader.subject} version {self.reader.version} (id {self.reader.schema_id})"
        try:
            record = schemaless_reader(io.BytesIO(value[HEADER.size:]), writer, self._parsed_reader)
        except SchemaResolutionError as exc:
            return None, f"incompatible: writer schema id {schema_id} cannot be read as {reader_name}: {exc}"
        except _MALFORMED as exc:
            return None, f"malformed Avro for writer schema id {schema_id}: {type(exc).__name__}: {exc}"
        return record, None

    def _plain(self, value: bytes, where: str) -> tuple[dict | None, str | None]:
        """A value of plain Avro of the fixed schema. With no header to tell a record from other bytes, a
        value is one only if it decodes and the record ends where the value does."""
        from fastavro import schemaless_reader

        stream = io.BytesIO(value)
        try:
            record = schemaless_reader(stream, self._parsed_reader, None)
        except _MALFORMED as exc:
            # fastavro's EOFError of a truncated value says nothing
            return None, f"malformed Avro for {where}: {type(exc).__name__}: {str(exc) or 'the value ends inside the record'}"
        left = len(value) - stream.tell()
        if left:
            return None, f"malformed Avro for {where}: {left} byte{'s' if left != 1 else ''} left after the record"
        return record, None


# One decoder per registry and reader schema in each Python worker, so that writer schemas are
# fetched once per process, not once per batch (Spark reuses its Python workers between batches).
_DECODERS: dict[tuple, AvroDecoder] = {}


def decoder(registry: Registry | None, reader: ReaderSchema | FixedSchema) -> AvroDecoder:
    key = (registry, reader.subject, reader.schema_id) if isinstance(reader, ReaderSchema) else (reader.text,)
    if key not in _DECODERS:
        _DECODERS[key] = AvroDecoder(registry, reader)
    return _DECODERS[key]


def avro_values(value, registry: Registry | None, reader: ReaderSchema | FixedSchema, error_column: str):
    """A struct column of the reader schema's fields and ``error_column`` (null for a record that was
    read, else why not) from a column of wire-format values, or of plain Avro values of a FixedSchema
    (``registry`` None). Decoded in a pandas UDF, a batch of
    records to each call, on the executors."""
    from pyspark.sql.functions import pandas_udf

    columns = reader.columns()
    ddl = ", ".join([*(f"`{name}` {type_text}" for name, type_text in columns.items()), f"`{error_column}` string"])

    @pandas_udf(ddl)  # type: ignore[call-overload]
    def decode(values: pd.Series) -> pd.DataFrame:
        avro = decoder(registry, reader)
        avro.forget_unknown()
        rows = []
        for value in values:
            record, error = avro.decode(None if value is None else bytes(value))
            row = {name: None if record is None else record.get(name) for name in columns}
            row[error_column] = error
            rows.append(row)
        # object columns: a column of ints with a null in it stays ints (not floats with NaN).
        return pd.DataFrame(rows, columns=[*columns, error_column], dtype=object)

    # Nondeterministic, so that Spark keeps one evaluation: a deterministic UDF is copied into each
    # filter pushed below the projection that reads its fields (the pipeline's filter on __error, say),
    # and every record was decoded once more for each (two ArrowEvalPython nodes in the plan, now one).
    return decode.asNondeterministic()(value)
