"""Turn a manifest (a mapping, as read from YAML or received from the API server) into a checked StreamApp."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from .checkpoint import CheckpointDefault, with_checkpoint_defaults
from .errors import InvalidSpec, Issue, issues_from_validation_error
from .limits import document_issues
from .policy import Policy, check_policy
from .semantic import check
from .spec import StreamApp


def parse(document: Any, policy: Policy | None = None,
          checkpoint: CheckpointDefault | None = None) -> tuple[StreamApp | None, list[Issue]]:
    """The model (None when the shape is wrong) and every finding, errors and warnings: the API's own
    checks, then, when given, a cluster's ``policy`` (docs/security.md). Those who enforce a policy
    pass it (the operator, its webhook, ``streamapp validate``); the driver's runtime checks only the
    API, so that what an admin allows on a cluster also runs. The checkpoint is settled first
    (``with_checkpoint_defaults``: the operator passes its default location)."""
    if not isinstance(document, dict):
        return None, [Issue("(document)", f"a StreamApp manifest is a mapping, got {type(document).__name__}")]
    bounds = document_issues(document)  # before any parser sees it: size, depth, characters
    if bounds:
        return None, bounds
    try:
        return _checked(document, policy, checkpoint)
    except RecursionError:  # a bound above should have said which field; never fail without an answer
        return None, [Issue("(document)", "nests too deeply to be checked; simplify the expressions")]


def _checked(document: dict[str, Any], policy: Policy | None,
             checkpoint: CheckpointDefault | None) -> tuple[StreamApp | None, list[Issue]]:
    try:
        app = StreamApp.model_validate(with_checkpoint_defaults(document, checkpoint))
    except ValidationError as exc:
        return None, issues_from_validation_error(exc, StreamApp)
    issues = check(app)
    if policy is None:
        return app, issues
    return app, [*issues, *(i for i in check_policy(app, policy, checkpoint) if i not in issues)]


def validate(document: Any, policy: Policy | None = None) -> list[Issue]:
    """Every finding about one manifest; an empty list means valid without warnings."""
    return parse(document, policy)[1]


def load(document: Any, policy: Policy | None = None) -> StreamApp:
    """The checked StreamApp, or InvalidSpec carrying the errors (warnings are not errors)."""
    app, issues = parse(document, policy)
    errors = [i for i in issues if i.severity == "error"]
    if app is None or errors:
        raise InvalidSpec(errors)
    return app
