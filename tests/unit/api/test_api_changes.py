"""Every spec field declares what its change does to a running app (streamapp_api.changes), so a
new field cannot fall into some default class unnoticed; and the check does catch one that does not."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field

from streamapp_api import StreamAppSpec
from streamapp_api.base import ApiModel, Name
from streamapp_api.changes import RESTART, ByField, ByItem, BySteps, ChangeClass, declaration, undeclared
from streamapp_api.spec import Checkpoint, State
from streamapp_api.steps import Step

pytestmark = pytest.mark.unit


def test_every_field_reachable_from_the_spec_declares_its_change_class():
    assert undeclared(StreamAppSpec) == [], (
        "declare a ChangeClass (or how the field is compared) on these fields: see streamapp_api/changes.py"
    )


def test_a_new_top_level_field_without_a_class_is_caught():
    class Spec(StreamAppSpec):
        new_backend: str | None = None

    assert undeclared(Spec) == ["spec.newBackend"]


def test_a_new_field_deep_in_the_state_is_caught():
    class NewCheckpoint(Checkpoint):
        bucket: str | None = None

    class NewState(State):
        checkpoint: Annotated[NewCheckpoint, ByField()] = Field(default_factory=NewCheckpoint)

    class Spec(StreamAppSpec):
        state: Annotated[NewState, ByField()] = Field(default_factory=NewState)

    assert undeclared(Spec) == ["spec.state.checkpoint.bucket"]


class Item(ApiModel):
    name: Name
    kept: Annotated[int, RESTART] = 0
    forgotten: int = 0


class Tiny(ApiModel):
    declared: Annotated[int, ChangeClass("ignore")] = 0
    plain: int = 0
    whole: Annotated[Item | None, RESTART] = None  # compared as a whole: its fields need nothing
    by_field: Annotated[Item | None, ByField()] = None
    items: Annotated[list[Item], ByItem()] = Field(default_factory=list)  # name pairs them: needs nothing
    items_with_rest: Annotated[list[Item], ByItem(rest=RESTART)] = Field(default_factory=list)
    steps: Annotated[list[Item], BySteps(otherwise=RESTART)] = Field(default_factory=list)
    misplaced: Annotated[int, ByField()] = 0


def test_undeclared_fields_are_listed_wherever_they_sit():
    assert undeclared(Tiny, "tiny") == [
        "tiny.plain",
        "tiny.byField.name",
        "tiny.byField.forgotten",
        "tiny.items[].forgotten",
        "tiny.steps[].name",
        "tiny.steps[].forgotten",
        "tiny.misplaced (ByField on a plain value)",
    ]


def test_step_kinds_that_shape_the_state_are_the_ones_a_change_of_refuses():
    shaping = {f.alias for f in Step.model_fields.values() if declaration(f).kind == "incompatible"}
    assert shaping == {"keyBy", "join", "window", "aggregate", "accumulate", "dedupe", "sql"}
