"""Classify a spec change against the spec the running driver was started with.

What a change of each field does is declared on the field, in the API models (see
streamapp_api.changes for the kinds and the declarations). This module walks the models' fields and
applies those declarations to two specs; the most disruptive change wins. A state reset makes
incompatible changes acceptable (they become resets), except those declared reset-proof.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from streamapp_api import StreamAppSpec
from streamapp_api.sinks import query_name_of
from streamapp_api.changes import KINDS, ByField, ByItem, BySteps, ChangeClass, Kind, alias, declaration, model_in

_RANK = {kind: rank for rank, kind in enumerate(KINDS)}
SpecPart = dict[str, Any]  # a part of the spec as its dict holds it (camelCase keys)


@dataclass(frozen=True)
class Change:
    kind: Kind
    field: str | None = None
    reason: str = ""
    reset_proof: bool = False  # stays incompatible even when a state reset is asked for


def classify_change(old: StreamAppSpec, new: StreamAppSpec) -> Change:
    """The most disruptive change between two specs (with the field that causes it)."""
    changes = list(_fields(StreamAppSpec, old.to_dict(), new.to_dict(), "spec", _path_changed))
    if any(c.kind == "reset" for c in changes):
        changes = [Change("reset", c.field, c.reason) if c.kind == "incompatible" and not c.reset_proof else c
                   for c in changes]
    if not changes:
        return Change("ignore")
    return max(changes, key=lambda c: _RANK[c.kind])  # the first of equally disruptive ones


# The reason given for a changed field that declares none: (its path, its camelCase name) -> reason.
DefaultWhy = Callable[[str, str], str]


def _path_changed(path: str, _name: str) -> str:
    return f"{path} changed"


def _name_changed(_path: str, name: str) -> str:
    return f"{name} changed"


def _comparison_order(name: str) -> tuple[bool, str]:
    # camelCase names in order, but an item's input ('from') first: the first of equally disruptive
    # changes is the one named, and a new input explains the rest.
    return name != "from", name


def _fields(model: type[BaseModel], old: SpecPart, new: SpecPart, path: str, default_why: DefaultWhy,
            skip: frozenset[str] = frozenset()) -> Iterator[Change]:
    """The changes of the model's fields (as the spec's dicts hold them), each by its declaration."""
    fields = {alias(name, field): field for name, field in model.model_fields.items()}
    for key in sorted(set(fields) - skip, key=_comparison_order):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        where, field = f"{path}.{key}", fields[key]
        declared = declaration(field)
        if isinstance(declared, ChangeClass):
            if declared.set_or_unset is not None and (a is None) != (b is None):
                declared = declared.set_or_unset
            yield Change(declared.kind, where, declared.why or default_why(where, key), declared.reset_proof)
        elif isinstance(declared, ByField):
            nested_why = (lambda _p, _n: declared.why) if declared.why else _path_changed
            a, b = a or {}, b or {}
            switched = declared.switch is not None and a.get(declared.switch) != b.get(declared.switch)
            left_behind = frozenset(k for k in (*a, *b) if k != declared.switch) if switched else frozenset()
            yield from _fields(_model_in(field, where), a, b, where, nested_why, left_behind)
        elif isinstance(declared, ByItem):
            yield from _items(declared, _model_in(field, where), a or [], b or [], where)
        elif isinstance(declared, BySteps):
            yield from _steps(declared, _model_in(field, where), a or [], b or [], where)
        else:  # tests/unit/api/test_api_changes.py keeps this from happening
            raise TypeError(f"{where} declares no change class (see streamapp_api.changes)")


def _model_in(field: FieldInfo, where: str) -> type[BaseModel]:
    model = model_in(field)
    if model is None:  # streamapp_api.changes.undeclared() reports a nested declaration on a plain value
        raise TypeError(f"{where} declares a nested change class but holds no model")
    return model


def _items(items: ByItem, model: type[BaseModel], old: list[SpecPart], new: list[SpecPart], path: str) -> Iterator[Change]:
    """Pair old and new items, then compare each pair field by field; a pair is named by its new index."""
    before, after = _paired(items.match, old), _paired(items.match, new)
    rest = frozenset(alias(n, f) for n, f in model.model_fields.items() if declaration(f) is None) \
        if items.rest is not None else frozenset()
    skip = (rest | {"name"}) if items.match == "name" else rest  # paired by name: the name never differs
    for key in sorted(set(before) | set(after)):
        if key not in before or key not in after:
            yield Change("restart", f"{path}[{key}]", items.added_or_removed)
            continue
        (_, a), (i, b) = before[key], after[key]
        where = f"{path}[{i}]"
        yield from _fields(model, a, b, where, _name_changed, skip)
        if items.rest is not None and any(a.get(k) != b.get(k) for k in rest):
            yield Change(items.rest.kind, where, items.rest.why, items.rest.reset_proof)


def _paired(match: str, items: list[SpecPart]) -> dict[str, tuple[int, SpecPart]]:
    return {_pairing_key(match, item): (i, item) for i, item in enumerate(items)}


def _pairing_key(match: str, item: SpecPart) -> str:
    if match == "name" or item.get("name"):
        return str(item.get("name"))
    return query_name_of(item)  # a sink without a name: its query is named after its input and its target


def _steps(steps: BySteps, model: type[BaseModel], old: list[SpecPart], new: list[SpecPart], path: str) -> Iterator[Change]:
    """Changed steps: those more disruptive than ``steps.otherwise`` compared as a sequence of their own."""
    classes = {alias(n, f): declaration(f) for n, f in model.model_fields.items()}

    def more_disruptive(items: list[SpecPart]) -> list[SpecPart]:
        return [s for s in items if _RANK[_class_of(classes, s).kind] > _RANK[steps.otherwise.kind]]

    a, b = more_disruptive(old), more_disruptive(new)
    if a != b:
        declared = max((_class_of(classes, s) for s in (*a, *b)), key=lambda c: _RANK[c.kind])
        yield Change(declared.kind, path, declared.why, declared.reset_proof)
    else:
        yield Change(steps.otherwise.kind, path, steps.otherwise.why, steps.otherwise.reset_proof)


def _class_of(classes: dict[str, Any], step: SpecPart) -> ChangeClass:
    declared = classes.get(next(iter(step), ""))  # a step is a mapping with one key: its kind
    return declared if isinstance(declared, ChangeClass) else ChangeClass("ignore")  # not a step kind: weighs nothing
