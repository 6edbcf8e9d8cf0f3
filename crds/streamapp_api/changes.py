"""What changing a spec field does to a running app, declared on the field itself.

Flink's ``@SpecDiff`` as pydantic ``Annotated`` metadata: pydantic keeps objects it does not know in
``FieldInfo.metadata`` and leaves validation and the JSON schema (so the CRD) alone. Every field
reachable from StreamAppSpec declares one of the four below, or sits inside a field that is compared
as a whole; ``undeclared`` lists those that do not (a unit test keeps it empty), so a new field
cannot quietly fall into some default class. The operator's ``decide/changes.py`` reads them.

Kinds, least to most disruptive: ignore (no effect on the running app), rescale (executor count
only), restart (compatible with the checkpoint: graceful restart), reset (state.resetNonce changed:
fresh checkpoint path, old one kept), incompatible (the checkpoint's state cannot be reused; refused
unless a reset is asked for).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel
from pydantic.fields import FieldInfo

Kind = Literal["ignore", "rescale", "restart", "reset", "incompatible"]
KINDS: tuple[Kind, ...] = get_args(Kind)  # least to most disruptive


@dataclass(frozen=True)
class ChangeClass:
    """The field's value is compared as a whole (nested fields included); a change is of this kind."""

    kind: Kind
    why: str = ""  # the reason given; empty: '<field> changed' (or its container's ByField.why)
    reset_proof: bool = False  # stays incompatible even with a state reset (what the reset cannot renew)
    # The class instead when the field goes from unset to set or back (rather than from one value to another).
    set_or_unset: "ChangeClass | None" = None


@dataclass(frozen=True)
class ByField:
    """A nested object compared field by field, each by its own declaration."""

    why: str = ""  # the reason given for a nested field that has none of its own
    # A field choosing what the object is (checkpoint: location, else a volume): when it changes, only
    # its change counts, since the other fields belong to the kind left behind or not yet used.
    switch: str | None = None


@dataclass(frozen=True)
class ByItem:
    """A list whose old and new items are paired and compared pair by pair, each field by its own
    declaration. An item only in one of the two lists (added, removed or renamed) is a restart."""

    # How items are paired: by their name, or ("query") by the streaming query a sink runs: its name,
    # else '<from>-<topic or table>'.
    match: Literal["name", "query"] = "name"
    added_or_removed: str = "added or removed"
    # The item's fields that declare nothing of their own, compared together as the item (None: every
    # field but the one items are paired by must declare).
    rest: ChangeClass | None = None


@dataclass(frozen=True)
class BySteps:
    """A list of steps (one key each), whose kinds declare their classes on the Step model.

    The steps more disruptive than ``otherwise`` are compared as a sequence of their own: a change
    there is of their class. Any other change (the other steps, or where they sit among the first
    ones) is ``otherwise``: a filter moved before a keyBy leaves the keyed state as it was."""

    otherwise: ChangeClass


# The common classes, shared by the models.
IGNORE = ChangeClass("ignore")
RESCALE = ChangeClass("rescale")
RESTART = ChangeClass("restart")

Declaration = ChangeClass | ByField | ByItem | BySteps
_DECLARATIONS = (ChangeClass, ByField, ByItem, BySteps)


def declaration(field: FieldInfo) -> Declaration | None:
    """The field's one change declaration (None when it has none)."""
    found = [m for m in field.metadata if isinstance(m, _DECLARATIONS)]
    if len(found) > 1:
        raise TypeError(f"{field.alias}: more than one change declaration: {found}")
    return found[0] if found else None


def alias(name: str, field: FieldInfo) -> str:
    """The field's name in the manifest (camelCase), which is what a spec dict is keyed by."""
    return field.alias or name


def model_in(field: FieldInfo) -> type[BaseModel] | None:
    """The model a field holds, directly or as the items of a list or an optional value."""
    pending = [field.annotation]
    while pending:
        hint = pending.pop(0)
        if isinstance(hint, type) and issubclass(hint, BaseModel):
            return hint
        pending.extend(get_args(hint))
    return None


def undeclared(model: type[BaseModel], path: str = "spec", skip: frozenset[str] = frozenset()) -> list[str]:
    """Fields under ``model`` whose change class is declared neither on them nor by their container,
    and declarations that cannot apply where they are (e.g. ByField on a plain value)."""
    missing: list[str] = []
    for name, field in model.model_fields.items():
        if name in skip:
            continue
        where = f"{path}.{alias(name, field)}"
        found, inner = declaration(field), model_in(field)
        if isinstance(found, ChangeClass):
            continue  # compared as a whole, nested fields included
        if found is None:
            missing.append(where)
        elif inner is None:
            missing.append(f"{where} ({type(found).__name__} on a plain value)")
        elif isinstance(found, ByField):
            missing += undeclared(inner, where)
        elif isinstance(found, ByItem):
            missing += _undeclared_items(inner, found, f"{where}[]")
        else:  # BySteps: each step kind declares the class of its own changes
            missing += [f"{where}[].{alias(n, f)}" for n, f in inner.model_fields.items()
                        if not isinstance(declaration(f), ChangeClass)]
    return missing


def _undeclared_items(item: type[BaseModel], items: ByItem, path: str) -> list[str]:
    covered = set()
    if items.rest is not None:  # what declares nothing is compared together as the item
        covered = {name for name, field in item.model_fields.items() if declaration(field) is None}
    if items.match == "name":
        if "name" not in item.model_fields:
            return [f"{path} (paired by name, but has no name)"]
        covered.add("name")  # paired items never differ in it
    return undeclared(item, path, frozenset(covered))
