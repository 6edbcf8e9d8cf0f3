"""The streamapp.io/pause-reconciliation annotation (as in Strimzi): while it says "true" the operator
creates, patches and deletes nothing of the app (its children, its driver pod), restarts and scales
nothing, and only says in status that it does so. Pure: no I/O."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from .. import names
from .status import Cond, fold_conditions
from .world import Event, Memory, Observed, Plan

PAUSED = "ReconciliationPaused"
PAUSED_TYPE = "Paused"
PAUSED_MESSAGE = (f"{names.ANN_PAUSE_RECONCILIATION} is true: the operator leaves the app, its driver and its "
                  "children as they are (no restart, no scaling); remove the annotation to resume")


def pause_asked(annotations: dict[str, str] | None) -> bool:
    """The annotation says "true" (any case); any other value or none: reconcile as usual."""
    return str((annotations or {}).get(names.ANN_PAUSE_RECONCILIATION, "")).strip().lower() == "true"


def was_paused(status: dict[str, Any]) -> bool:
    return any(c.get("type") == PAUSED_TYPE and c.get("status") == "True" for c in status.get("conditions") or [])


def paused_plan(obs: Observed, memory: Memory, now: datetime) -> Plan:
    """The status as it was (phase, Ready and the rest keep what the last reconcile said), with a
    Paused condition, status.reason and status.message saying why nothing happens; an event the first time."""
    before = [c for c in obs.status.get("conditions") or [] if c.get("type") == PAUSED_TYPE]
    paused = fold_conditions(before, [Cond(PAUSED_TYPE, True, PAUSED, PAUSED_MESSAGE)], now, obs.generation)
    status = {**obs.status, "reason": PAUSED, "message": PAUSED_MESSAGE,
              "conditions": [c for c in obs.status.get("conditions") or [] if c.get("type") != PAUSED_TYPE] + paused}
    events = () if was_paused(obs.status) else (Event("Normal", PAUSED, PAUSED_MESSAGE),)
    return Plan(status=status, events=events, memory=memory)


def resumed(obs: Observed, plan: Plan) -> Plan:
    """The first plan after the annotation went: the Paused condition is gone (plan.py writes only its
    own), and an event says reconciliation resumed."""
    if not was_paused(obs.status):
        return plan
    return replace(plan, events=plan.events + (Event("Normal", "ReconciliationResumed",
                                                     "the operator reconciles the app again"),))
