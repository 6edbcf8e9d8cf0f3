"""Fold what was decided into the status object: phase, conditions, counters, observedGeneration.

The status is built as the API's status model (``StreamAppStatus``), so a field it does not have or a
value it refuses fails here rather than at the API server, and the keys the operator owns are the
model's. Conditions keep their lastTransitionTime while their status does not change, so a reconcile
that changes nothing produces an identical status and nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from streamapp_api.status import StreamAppStatus


@dataclass(frozen=True)
class Cond:
    type: str
    status: bool
    reason: str
    message: str = ""


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def fold_conditions(old: list[dict[str, Any]] | None, new: list[Cond], now: datetime,
                    generation: int) -> list[dict[str, Any]]:
    previous = {c.get("type"): c for c in old or []}
    out = []
    for cond in new:
        status = "True" if cond.status else "False"
        before = previous.get(cond.type)
        since = before.get("lastTransitionTime") if before and before.get("status") == status else None
        entry = {"type": cond.type, "status": status, "reason": cond.reason,
                 "lastTransitionTime": since or rfc3339(now), "observedGeneration": generation}
        if cond.message:
            entry["message"] = cond.message[:32768]
        out.append(entry)
    return out


def fold_status(old: dict[str, Any], *, phase: str, message: str, conditions: list[Cond], now: datetime,
                generation: int, **fields: Any) -> dict[str, Any]:
    """The complete new status, as written. ``fields`` are the status model's fields by their Python
    names (``desired_executors``; objects inside them as written, camelCase); None leaves a field out."""
    status = StreamAppStatus.model_validate({
        "observed_generation": generation,
        "phase": phase,
        "message": message,
        "conditions": fold_conditions(old.get("conditions"), conditions, now, generation),
        **fields,
    }, by_name=True)
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


# The keys of status the operator writes: a key it no longer sets is removed.
OWNED: tuple[str, ...] = tuple(f.alias or name for name, f in StreamAppStatus.model_fields.items())


def _replacing(before: Any, value: Any) -> Any:
    """``value`` as a merge patch over ``before``: keys of ``before`` it lacks become null, at every depth."""
    if not (isinstance(before, dict) and isinstance(value, dict)):
        return value
    return {**{k: _replacing(before.get(k), v) for k, v in value.items()}, **{k: None for k in before if k not in value}}


def status_patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A merge patch turning ``old`` into ``new`` (keys the operator owns and no longer sets become null,
    also inside objects at any depth, such as lastRestart or scaling.lastRescale: a merge patch would
    otherwise keep their old keys)."""
    patch: dict[str, Any] = {}
    for key, value in new.items():
        before = old.get(key)
        if before == value:
            continue
        patch[key] = _replacing(before, value)
    for key in OWNED:
        if key in old and key not in new:
            patch[key] = None
    return patch
