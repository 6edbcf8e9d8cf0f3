"""Protobuf schemas for tests, without protoc: a FileDescriptorProto built field by field, the message
classes the `protobuf` package makes of it (what generated code would be), a FileDescriptorSet as
`protoc --include_imports --descriptor_set_out` writes it, and the .proto text of the same file for a
schema registry (which compiles the text itself)."""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2, wrappers_pb2
from google.protobuf.message_factory import GetMessageClass

F = descriptor_pb2.FieldDescriptorProto
SCALARS = {"double": F.TYPE_DOUBLE, "float": F.TYPE_FLOAT, "int64": F.TYPE_INT64, "uint64": F.TYPE_UINT64,
           "int32": F.TYPE_INT32, "uint32": F.TYPE_UINT32, "sint64": F.TYPE_SINT64, "bool": F.TYPE_BOOL,
           "string": F.TYPE_STRING, "bytes": F.TYPE_BYTES}
IMPORTS = {"google.protobuf.Timestamp": "google/protobuf/timestamp.proto",
           "google.protobuf.Int64Value": "google/protobuf/wrappers.proto",
           "google.protobuf.StringValue": "google/protobuf/wrappers.proto"}


def proto3_file(name: str, package: str, messages: dict[str, list[tuple]], enums: dict[str, list[str]] | None = None,
                nested: dict[str, dict[str, list[tuple]]] | None = None) -> descriptor_pb2.FileDescriptorProto:
    """A proto3 file. A field is (name, number, type) or (name, number, type, 'repeated' | 'optional');
    a type is a scalar's name, a message's or enum's name of this file, 'map<k,v>' of scalars, or a
    well-known type's full name. ``nested``: message -> its nested messages."""
    file = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto3")
    for enum_name, values in (enums or {}).items():
        enum = file.enum_type.add(name=enum_name)
        for number, value in enumerate(values):
            enum.value.add(name=value, number=number)
    for message_name, fields in messages.items():
        message = file.message_type.add(name=message_name)
        _fields(file, message, fields, set(enums or {}), f".{package}.{message_name}")
        for inner_name, inner_fields in (nested or {}).get(message_name, {}).items():
            inner = message.nested_type.add(name=inner_name)
            _fields(file, inner, inner_fields, set(enums or {}), f".{package}.{message_name}.{inner_name}")
    return file


def _fields(file, message, fields, enums, scope) -> None:
    for spec in fields:
        name, number, kind = spec[:3]
        label = spec[3] if len(spec) > 3 else None
        field = message.field.add(name=name, number=number, label=F.LABEL_REPEATED if label == "repeated" else F.LABEL_OPTIONAL)
        if kind.startswith("map<"):
            key, value = kind[4:-1].split(",")
            entry_name = "".join(p.capitalize() for p in name.split("_")) + "Entry"
            entry = message.nested_type.add(name=entry_name)
            entry.options.map_entry = True
            entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL, type=SCALARS[key])
            entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL, type=SCALARS[value])
            field.label, field.type, field.type_name = F.LABEL_REPEATED, F.TYPE_MESSAGE, f"{scope}.{entry_name}"
        elif kind in SCALARS:
            field.type = SCALARS[kind]
        elif kind in IMPORTS:
            field.type, field.type_name = F.TYPE_MESSAGE, f".{kind}"
            if IMPORTS[kind] not in file.dependency:
                file.dependency.append(IMPORTS[kind])
        elif kind in enums:
            field.type, field.type_name = F.TYPE_ENUM, f".{file.package}.{kind}"
        elif "." in kind:  # a message of another file, by its full name: the caller adds the import
            field.type, field.type_name = F.TYPE_MESSAGE, f".{kind}"
        else:
            field.type, field.type_name = F.TYPE_MESSAGE, f".{file.package}.{kind}"
        if label == "optional":  # proto3 optional: a synthetic oneof of its own
            field.proto3_optional = True
            field.oneof_index = len(message.oneof_decl)
            message.oneof_decl.add(name=f"_{name}")


def _well_known(file: descriptor_pb2.FileDescriptorProto) -> list[descriptor_pb2.FileDescriptorProto]:
    modules = {"google/protobuf/timestamp.proto": timestamp_pb2, "google/protobuf/wrappers.proto": wrappers_pb2}
    out = []
    for dependency in (d for d in file.dependency if d in modules):
        proto = descriptor_pb2.FileDescriptorProto()
        modules[dependency].DESCRIPTOR.CopyToProto(proto)
        out.append(proto)
    return out


def message_classes(file: descriptor_pb2.FileDescriptorProto, *imported: descriptor_pb2.FileDescriptorProto) -> dict[str, type]:
    """Message name (without the package) -> its class, as generated code would give; ``imported``:
    the files of its imports that are not well-known types."""
    pool = descriptor_pool.DescriptorPool()
    for dependency in _well_known(file):
        pool.Add(dependency)
    for other in imported:
        pool.Add(other)
    pool.Add(file)
    return {m.name: GetMessageClass(pool.FindMessageTypeByName(f"{file.package}.{m.name}")) for m in file.message_type}


def descriptor_set(file: descriptor_pb2.FileDescriptorProto) -> bytes:
    """The FileDescriptorSet protoc --include_imports writes for ``file``: its imports first."""
    return descriptor_pb2.FileDescriptorSet(file=[*_well_known(file), file]).SerializeToString()


def proto_text(file: descriptor_pb2.FileDescriptorProto) -> str:
    """The .proto text of a file proto3_file built (what a user keeps and a registry compiles)."""
    lines = ['syntax = "proto3";', f"package {file.package};"]
    lines += [f'import "{d}";' for d in file.dependency]
    for enum in file.enum_type:
        lines.append(f"enum {enum.name} {{ " + " ".join(f"{v.name} = {v.number};" for v in enum.value) + " }")
    for message in file.message_type:
        lines += _message_text(file, message, "")
    return "\n".join(lines) + "\n"


def _message_text(file, message, indent: str) -> list[str]:
    entries = {n.name: n for n in message.nested_type if n.options.map_entry}
    names = {v: k for k, v in SCALARS.items()}
    lines = [f"{indent}message {message.name} {{"]
    for inner in message.nested_type:
        if not inner.options.map_entry:
            lines += _message_text(file, inner, indent + "  ")
    for field in message.field:
        short = field.type_name.rsplit(".", 1)[-1]
        if field.type == F.TYPE_MESSAGE and short in entries:
            key, value = entries[short].field
            kind, label = f"map<{names[key.type]}, {names[value.type]}>", ""
        else:
            kind = names.get(field.type) or field.type_name.lstrip(".")
            label = "repeated " if field.label == F.LABEL_REPEATED else "optional " if field.proto3_optional else ""
        lines.append(f"{indent}  {label}{kind} {field.name} = {field.number};")
    lines.append(f"{indent}}}")
    return lines
