"""The base class of every API model and the small vocabulary shared by all of them."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

# Names of sources, tables and streams: usable as Spark view names, Kafka query names and label values.
NAME_PATTERN = r"^[a-z]([a-z0-9_-]{0,61}[a-z0-9])?$"
NAME_HELP = "lowercase letters, digits, '-' and '_', starting with a letter, at most 63 characters"
# Column names: plain SQL identifiers (no quoting needed in expressions).
COLUMN_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
COLUMN_HELP = "a SQL identifier: letters, digits and '_', not starting with a digit"
# Python names of user code: ASCII identifiers only, so that no two spellings (NFKC folds Unicode
# identifiers) name one module and the policy's allow-list compares what Python imports.
PYTHON_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
PYTHON_NAME_HELP = "a Python name of ASCII letters, digits and '_', not starting with a digit"
MODULE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
MODULE_HELP = "a dotted Python module name of ASCII identifiers, e.g. acme.enrich"
TOPIC_PATTERN = r"^[A-Za-z0-9._-]{1,249}$"
TOPIC_HELP = "letters, digits, '.', '_' and '-', at most 249 characters"
K8S_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"

# Bounds that keep CEL rules within the API server's cost budget.
MAX_EXPR = 4096
MAX_LIST = 64
MAX_COLUMNS = 256

Name = Annotated[str, Field(pattern=NAME_PATTERN, max_length=63)]
Column = Annotated[str, Field(pattern=COLUMN_PATTERN, max_length=128)]
Topic = Annotated[str, Field(pattern=TOPIC_PATTERN, max_length=249)]
Expr = Annotated[str, Field(min_length=1, max_length=MAX_EXPR)]
K8sName = Annotated[str, Field(pattern=K8S_NAME_PATTERN, max_length=253)]


def cel(rule: str, message: str, field_path: str | None = None, reason: str | None = None) -> dict[str, Any]:
    """One ``x-kubernetes-validations`` entry."""
    entry: dict[str, Any] = {"rule": rule, "message": message}
    if field_path:
        entry["fieldPath"] = field_path
    if reason:
        entry["reason"] = reason
    return entry


def api_config(*rules: dict[str, Any], **extra: Any) -> ConfigDict:
    """Model config carrying CEL rules (and any other schema keys) into the generated CRD."""
    schema_extra: dict[str, Any] = dict(extra)
    if rules:
        schema_extra["x-kubernetes-validations"] = list(rules)
    return ConfigDict(json_schema_extra=schema_extra or None)


class ApiModel(BaseModel):
    """Base of all spec models: camelCase on the wire, unknown fields refused, immutable."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
        frozen=True,
        use_attribute_docstrings=False,
    )

    def to_dict(self) -> dict[str, Any]:
        """The model as the JSON-compatible mapping Kubernetes stores (unset optionals left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class SecretRef(ApiModel):
    """A reference to a Secret in the StreamApp's namespace."""

    name: K8sName = Field(description="Name of the Secret in the StreamApp's namespace.")
