"""Steps of a derived stream. Each step is a mapping with exactly one key naming what it does.

The schema keeps one ``Step`` object with every step key optional and a CEL rule requiring exactly
one, so the CRD stays structural (no oneOf with differing types) and ``kubectl explain`` lists them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from .base import (COLUMN_PATTERN, MAX_COLUMNS, MAX_LIST, MODULE_PATTERN, PYTHON_NAME_PATTERN, ApiModel, Column, Expr,
                   Name, api_config, cel)
from .changes import RESTART, ChangeClass
from .durations import Duration, cel_millis

ACCUMULATE_FUNCTIONS = ("sum", "count", "min", "max", "avg", "first", "last")
# Kafka Streams' operator names -> the step that does it here (docs/api.md, "Kafka Streams vocabulary"):
# what an unknown step key named like one of them is told.
KAFKA_STREAMS_STEPS = {
    "map": "select (only these columns) or withColumns (add or replace)",
    "mapValues": "withColumns (add or replace columns) or select",
    "flatMap": "explode", "flatMapValues": "explode",
    "selectKey": "keyBy",
    "groupBy": "keyBy, then aggregate", "groupByKey": "aggregate",
    "windowedBy": "window, then aggregate",
    "count": "aggregate with a column count(*)", "reduce": "aggregate", "transformValues": "accumulate",
    "suppress": "emit: final on the stream",
    "split": "several streams reading the same from", "branch": "several streams reading the same from",
}
ACCUMULATE_PATTERN = r"^(" + "|".join(ACCUMULATE_FUNCTIONS) + r")\(.+\)$"
AccumulateExpr = Annotated[str, Field(pattern=ACCUMULATE_PATTERN, max_length=1024)]
_COLUMN_KEYS = cel(
    f"self.all(k, k.matches('{COLUMN_PATTERN}'))",
    "column names must be SQL identifiers: letters, digits and '_', not starting with a digit",
)


def _column_map(description: str, **kwargs: Any) -> Any:
    extra: dict[str, Any] = {"x-kubernetes-validations": [_COLUMN_KEYS]}
    return Field(description=description, min_length=1, max_length=MAX_LIST,
                 json_schema_extra=extra, **kwargs)


class Explode(ApiModel):
    """Turn each element of an array column into its own row (Kafka Streams: flatMapValues)."""

    column: Column = Field(description="The array column to explode.")
    as_: Column | None = Field(
        default=None,
        alias="as",
        description="Name of the column holding one element. Default: the exploded column's name "
        "(the array is replaced by its element).",
    )
    keep_empty: bool = Field(
        default=False,
        description="Keep rows whose array is null or empty (with a null element) instead of dropping them.",
    )


_TABLE_XOR_STREAM = cel("has(self.table) != has(self.stream)", "set exactly one of table or stream")
_WITHIN_ONLY_STREAM = cel(
    "has(self.stream) == has(self.within)",
    "within is required for a stream join and not allowed for a table join",
    field_path=".within",
)
_USING_ONLY_STREAM = cel(
    "has(self.stream) == has(self.using)",
    "using is required for a stream join and not allowed for a table join (a table is joined by key)",
    field_path=".using",
)
_KEY_ONLY_TABLE = cel(
    "!has(self.key) || has(self.table)",
    "key is only for table joins; a stream join matches the columns listed in using",
    field_path=".key",
)


class Join(ApiModel):
    """Join each record with a table row by key, or with another stream's records within a time bound.

    Columns of the other side are added; on a name clash they are renamed '<table or stream>_<column>'.
    """

    model_config = api_config(_TABLE_XOR_STREAM, _WITHIN_ONLY_STREAM, _USING_ONLY_STREAM, _KEY_ONLY_TABLE)

    table: Name | None = Field(
        default=None,
        description="Name of a table to look the current row up in (Kafka Streams: KStream-KTable "
        "join). Each record sees the table as it is when the record is processed.",
    )
    key: Column | None = Field(
        default=None,
        description="Table join: column of this stream whose value is looked up as the table's key. "
        "Default: the record key (_key).",
    )
    stream: Name | None = Field(
        default=None,
        description="Name of a source or stream to join with (Kafka Streams: KStream-KStream join). "
        "Both sides need a watermark.",
    )
    using: list[Column] | None = Field(
        default=None,
        min_length=1,
        max_length=16,
        description="Stream join: columns present on both sides whose values must be equal (as in SQL's "
        "JOIN ... USING); they appear once in the output.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    within: Duration | None = Field(
        default=None,
        description="Stream join: the event times of two joined records differ by at most this much.",
    )
    type: Literal["inner", "left"] = Field(
        default="inner",
        description="inner: only records with a match. left: every record; missing columns are null "
        "(for stream joins, emitted once the watermark passes the time bound without a match).",
    )


_WINDOW_RULES = (
    cel("self.type == 'session' || has(self.size)", "tumbling and hopping windows need size", field_path=".size"),
    cel("self.type != 'session' || !has(self.size)",
        "a session window has no size (it lasts until gap passes without events); remove size", field_path=".size"),
    cel("self.type != 'hopping' || has(self.advance)",
        "a hopping window needs advance (how often a window starts)", field_path=".advance"),
    cel("self.type == 'hopping' || !has(self.advance)", "advance is only for hopping windows; remove it",
        field_path=".advance"),
    cel("self.type != 'session' || has(self.gap)", "a session window needs gap", field_path=".gap"),
    cel("self.type == 'session' || !has(self.gap)", "gap is only for session windows; remove it", field_path=".gap"),
    cel(
        "!has(self.size) || !has(self.advance) || "
        f"{cel_millis('self.advance')} <= {cel_millis('self.size')}",
        "advance must not be longer than size (windows would leave gaps)",
        field_path=".advance",
    ),
)


class Window(ApiModel):
    """Group records into event-time windows; must be followed by an aggregate step."""

    model_config = api_config(*_WINDOW_RULES)

    type: Literal["tumbling", "hopping", "session"] = Field(
        description="tumbling: fixed, non-overlapping windows of size. hopping: windows of size "
        "starting every advance (they overlap). session: a window per key that closes after gap "
        "without events.",
    )
    size: Duration | None = Field(default=None, description="Window length (tumbling, hopping).")
    advance: Duration | None = Field(
        default=None,
        description="Hopping: how far each window starts after the previous one; at most size.",
    )
    gap: Duration | None = Field(
        default=None,
        description="Session: inactivity that closes a key's session.",
    )


class Aggregate(ApiModel):
    """Group records and compute named aggregates. After a window step the groups are per window.

    Output columns: window_start and window_end (when windowed), the groupBy columns, then the named
    columns.
    """

    group_by: list[Column] = Field(
        default_factory=list,
        max_length=32,
        description="Columns to group by. Empty: one group. Session windows need at least one.",
    )
    columns: dict[str, Expr] = _column_map(
        "Output column name -> Spark SQL aggregate expression, e.g. 'count(*)', 'sum(amount)', "
        "'count_if(event = \"click\")', 'max(price)'.",
    )


class Accumulate(ApiModel):
    """A running aggregate per key that emits every input row with the running values added.

    The loyalty-points pattern: each invoice comes out with the customer's total so far.
    """

    key: list[Column] = Field(
        default_factory=lambda: ["_key"],
        min_length=1,
        max_length=16,
        json_schema_extra={"default": ["_key"]},
        description="Columns identifying whose running values to update. Default: the record key (_key).",
    )
    columns: dict[str, AccumulateExpr] = _column_map(
        "Output column name -> running aggregate, one of sum(expr), count(expr), min(expr), max(expr), "
        "avg(expr), first(expr), last(expr), evaluated over this key's rows so far (this row included).",
    )
    ttl: Duration | None = Field(
        default=None,
        description="Forget a key's running values after this long without records. Default: never.",
    )


class Dedupe(ApiModel):
    """Drop records whose key columns were already seen within a time bound."""

    keys: list[Column] = Field(
        min_length=1,
        max_length=16,
        description="Columns that identify duplicates.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    within: Duration = Field(
        description="How long a key is remembered; a repeat after that passes through again. Needs a watermark.",
    )


class PythonFunction(ApiModel):
    """Call your own Python function on each batch of records (pandas DataFrames); needs the cluster's
    operator policy 'userCode' to allow it in the app's namespace."""

    module: str = Field(
        pattern=MODULE_PATTERN, max_length=256,
        description="The module holding the function, a dotted name of ASCII identifiers (e.g. 'acme.enrich'): "
        "a module of the app's image, or a file of a ConfigMap listed in spec.userCode.configMaps "
        "('enrich.py' is module 'enrich').",
    )
    function: str = Field(
        pattern=PYTHON_NAME_PATTERN, max_length=128,
        description="The function's name in the module. It is called with a pandas DataFrame of the step's input "
        "columns and returns a pandas DataFrame with the columns of schema (any number of rows).",
    )
    schema_: dict[str, str] = Field(
        alias="schema", min_length=1, max_length=MAX_LIST,  # as withColumns: within the CEL cost budget
        description="The columns the function returns: name -> Spark SQL type. Exactly these leave the step, "
        "with the input's metadata columns (_key, _timestamp...: the returned frame's, else the input's). A batch the "
        "function raises on is retried record by record: a record it raises on goes to the dead-letter topic with "
        "the Python error, and the others flow on.",
        json_schema_extra={"x-kubernetes-validations": [_COLUMN_KEYS],
                           "additionalProperties": {"type": "string", "maxLength": 1024}},
    )

    @property
    def qualified_name(self) -> str:
        return f"{self.module}.{self.function}"


# The step keys, in the order of Step's fields (tests/unit/test_step_tables.py): the API's flow.STEP_FLOW
# and the runtime's STEP_COMPILERS have a row for each.
STEP_KEYS = ("filter", "select", "withColumns", "explode", "keyBy", "join", "window",
             "aggregate", "accumulate", "dedupe", "sql", "python")
_ONE_KEY = cel(
    "[" + ", ".join(f"has(self.{k})" for k in STEP_KEYS) + "].filter(x, x).size() == 1",
    "a step has exactly one key: one of " + ", ".join(STEP_KEYS),
)


def _first_line(model: type[ApiModel]) -> str:
    return (model.__doc__ or "").split("\n")[0]


# What changing, adding or removing a step of each kind does (Stream.steps compares them): steps that
# shape the state in the checkpoint (keys, windows, aggregations, joins, dedupes; sql may do any of
# them) leave it unusable; the others only need a restart.
_SHAPES_STATE = ChangeClass(
    "incompatible", "keys, windows, aggregations, joins or dedupes changed: the checkpoint's state no longer fits"
)
_STATELESS = RESTART


class Step(ApiModel):
    """One step of a stream: a mapping with exactly one of the keys below."""

    model_config = api_config(_ONE_KEY)

    filter: Annotated[Expr | None, _STATELESS] = Field(
        default=None,
        description="Keep only rows where this SQL condition is true, e.g. \"level = 'ERROR'\".",
    )
    select: Annotated[list[Expr] | None, _STATELESS] = Field(
        default=None,
        min_length=1,
        max_length=MAX_COLUMNS,
        description="Keep only these columns: each item is a column name, '*', or 'expression AS name'.",
    )
    with_columns: Annotated[dict[str, Expr] | None, _STATELESS] = _column_map(
        "Add or replace columns (name -> SQL expression), keeping the others. Expressions see the "
        "input row, not each other.",
        default=None,
    )
    explode: Annotated[Explode | None, _STATELESS] = Field(default=None, description=Explode.__doc__)
    key_by: Annotated[Expr | None, _SHAPES_STATE] = Field(
        default=None,
        description="SQL expression that becomes the record key (_key) downstream, e.g. 'customer_id'. "
        "Kafka sinks write it as the message key.",
    )
    join: Annotated[Join | None, _SHAPES_STATE] = Field(default=None, description=_first_line(Join))
    window: Annotated[Window | None, _SHAPES_STATE] = Field(default=None, description=Window.__doc__)
    aggregate: Annotated[Aggregate | None, _SHAPES_STATE] = Field(
        default=None, description=_first_line(Aggregate)
    )
    accumulate: Annotated[Accumulate | None, _SHAPES_STATE] = Field(
        default=None, description=_first_line(Accumulate)
    )
    dedupe: Annotated[Dedupe | None, _SHAPES_STATE] = Field(default=None, description=Dedupe.__doc__)
    sql: Annotated[Expr | None, _SHAPES_STATE] = Field(
        default=None,
        description="Escape hatch: a Spark SQL query over the step's input, which it names 'input', "
        "e.g. 'SELECT user, count(*) AS n FROM input GROUP BY user'.",
    )
    python: Annotated[PythonFunction | None, _STATELESS] = Field(
        default=None, description="Call your own Python function on each batch of records (pandas DataFrames); "
        "needs the operator policy 'userCode' to allow it in the app's namespace.",
    )

    @property
    def kind(self) -> str:
        """The step's one key (camelCase, as written)."""
        for key in STEP_KEYS:
            if getattr(self, _ATTR[key]) is not None:
                return key
        raise ValueError("empty step")

    @property
    def value(self) -> Any:
        return getattr(self, _ATTR[self.kind])

    def set_keys(self) -> list[str]:
        return [k for k in STEP_KEYS if getattr(self, _ATTR[k]) is not None]


_ATTR = {field.alias or name: name for name, field in Step.model_fields.items()}  # step key -> attribute
STATEFUL_STEPS = ("join", "aggregate", "accumulate", "dedupe")  # keep state in the checkpoint
SHUFFLING_STEPS = (*STATEFUL_STEPS, "sql")  # may shuffle: spec.shufflePartitions matters (sql: cannot tell)
MAX_STEPS = MAX_LIST
