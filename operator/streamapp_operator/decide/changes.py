"""Classify a spec change against the spec the running driver was started with.

Kinds, least to most disruptive: ignore (no effect on the running app), rescale (executor count
only), restart (compatible with the checkpoint: graceful restart), reset (state.resetNonce changed:
fresh checkpoint path, old one kept), incompatible (the checkpoint's state cannot be reused; refused
unless a reset is asked for). The declaration of which field is what lives in the tables below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from streamapp_api import StreamAppSpec
from streamapp_api.steps import STATEFUL_STEPS

Kind = Literal["ignore", "rescale", "restart", "reset", "incompatible"]
_RANK = {"ignore": 0, "rescale": 1, "restart": 2, "reset": 3, "incompatible": 4}
# Steps whose change alters the state in the checkpoint (keys, aggregations, windows, joins).
STATE_STEPS = (*STATEFUL_STEPS, "window", "keyBy", "sql")

TOP_LEVEL: dict[str, Kind] = {
    "suspend": "ignore",  # suspend/resume is decided on its own
    "restartPolicy": "ignore",
    "executors": "rescale",
    "scaling": "rescale",
    "shufflePartitions": "incompatible",
}
STATE: dict[str, Kind] = {"retainOnDelete": "ignore", "resetNonce": "reset", "store": "incompatible"}
CHECKPOINT: dict[str, Kind] = {"size": "ignore", "storageClassName": "incompatible", "accessModes": "incompatible"}
SOURCE_STATE_FIELDS = ("topic", "topics", "eventTime")
TABLE_STATE_FIELDS = ("topic", "key")
# Not even a state reset helps: a claim's class and access modes are immutable.
RESET_PROOF = {"spec.state.checkpoint.storageClassName", "spec.state.checkpoint.accessModes"}
WHY = {
    "shufflePartitions": "the checkpoint's state is partitioned by it",
    "store": "the checkpoint's state was written by the other state store provider",
    "storageClassName": "a PersistentVolumeClaim's storage class cannot change; delete the app with retainOnDelete: false",
    "accessModes": "a PersistentVolumeClaim's access modes cannot change; delete the app with retainOnDelete: false",
}


@dataclass(frozen=True)
class Change:
    kind: Kind
    field: str | None = None
    reason: str = ""


def classify_change(old: StreamAppSpec, new: StreamAppSpec) -> Change:
    """The most disruptive change between two specs (with the field that causes it)."""
    changes = list(_changes(old.to_dict(), new.to_dict()))
    reset = any(c.kind == "reset" for c in changes)
    if reset:
        changes = [c if c.kind != "incompatible" or c.field in RESET_PROOF else Change("reset", c.field, c.reason)
                   for c in changes]
    if not changes:
        return Change("ignore")
    return max(changes, key=lambda c: _RANK[c.kind])


def _changes(old: dict, new: dict):
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if key == "state":
            yield from _state(a or {}, b or {})
        elif key == "sources":
            yield from _named(a or [], b or [], "spec.sources", SOURCE_STATE_FIELDS, "the checkpoint records offsets per topic and state per event time")
        elif key == "tables":
            yield from _named(a or [], b or [], "spec.tables", TABLE_STATE_FIELDS, "the join state is keyed by the table's topic and key")
        elif key == "streams":
            yield from _streams(a or [], b or [])
        elif key == "sinks":
            yield from _sinks(a or [], b or [])
        else:
            kind = TOP_LEVEL.get(key, "restart")
            yield Change(kind, f"spec.{key}", WHY.get(key, f"spec.{key} changed"))


def _state(old: dict, new: dict):
    for key in sorted(set(old) | set(new)):
        if old.get(key) == new.get(key):
            continue
        if key == "checkpoint":
            a, b = old.get(key) or {}, new.get(key) or {}
            for sub in sorted(set(a) | set(b)):
                if a.get(sub) != b.get(sub):
                    kind = CHECKPOINT.get(sub, "restart")
                    yield Change(kind, f"spec.state.checkpoint.{sub}", WHY.get(sub, "checkpoint settings changed"))
        else:
            kind = STATE.get(key, "restart")
            yield Change(kind, f"spec.state.{key}", WHY.get(key, f"spec.state.{key} changed"))


def _index(items: list[dict], key: str = "name") -> dict[str, tuple[int, dict]]:
    return {item.get(key): (i, item) for i, item in enumerate(items)}


def _named(old: list[dict], new: list[dict], path: str, state_fields: tuple[str, ...], why: str):
    before, after = _index(old), _index(new)
    for name in sorted(set(before) | set(after)):
        if name not in before or name not in after:
            yield Change("restart", f"{path}[{name}]", "added or removed")
            continue
        (_, a), (i, b) = before[name], after[name]
        for field in sorted(set(a) | set(b)):
            if a.get(field) != b.get(field):
                kind: Kind = "incompatible" if field in state_fields else "restart"
                yield Change(kind, f"{path}[{i}].{field}", why if kind == "incompatible" else f"{field} changed")


def _state_steps(steps: list[dict]) -> list[Any]:
    return [step for step in steps if next(iter(step), None) in STATE_STEPS]


def _streams(old: list[dict], new: list[dict]):
    before, after = _index(old), _index(new)
    for name in sorted(set(before) | set(after)):
        if name not in before or name not in after:
            yield Change("restart", f"spec.streams[{name}]", "stream added or removed")
            continue
        (_, a), (i, b) = before[name], after[name]
        path = f"spec.streams[{i}]"
        if a.get("from") != b.get("from"):
            yield Change("incompatible", f"{path}.from", "the stream's state was built from another input")
        if a.get("emit") != b.get("emit"):
            yield Change("incompatible", f"{path}.emit", "the output mode of a stateful query cannot change")
        if _state_steps(a.get("steps", [])) != _state_steps(b.get("steps", [])):
            yield Change("incompatible", f"{path}.steps",
                         "keys, windows, aggregations, joins or dedupes changed: the checkpoint's state no longer fits")
        elif a.get("steps") != b.get("steps"):
            yield Change("restart", f"{path}.steps", "stateless steps changed")


def _sinks(old: list[dict], new: list[dict]):
    def query(sink: dict) -> str:
        if sink.get("name"):
            return sink["name"]
        target = (sink.get("kafka") or {}).get("topic") or (sink.get("postgres") or {}).get("table")
        return f"{sink.get('from')}-{target}"

    before = {query(s): (i, s) for i, s in enumerate(old)}
    after = {query(s): (i, s) for i, s in enumerate(new)}
    for name in sorted(set(before) | set(after)):
        if name not in before or name not in after:
            yield Change("restart", f"spec.sinks[{name}]", "sink added or removed")
            continue
        (_, a), (i, b) = before[name], after[name]
        if a.get("from") != b.get("from"):
            yield Change("incompatible", f"spec.sinks[{i}].from", "the sink's query state was built from another input")
        elif a != b:
            yield Change("restart", f"spec.sinks[{i}]", "sink settings changed")
