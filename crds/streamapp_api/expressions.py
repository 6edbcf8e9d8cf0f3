"""Spark SQL expressions read without a JVM (sqlglot, Spark dialect): which columns and functions an
expression uses, what a select item is named, and whether an ``sql`` step is one SELECT over its input.

Pure and cached: the operator validates on every reconcile. Column names are reported as written;
Spark resolves them case-insensitively (``spark.sql.caseSensitive`` is false), so compare them folded.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

from .suggest import did_you_mean

if TYPE_CHECKING:
    from .spec import StreamApp

DIALECT = "spark"
# The view a sql step reads (the runtime registers the step's input under this name).
SQL_INPUT_VIEW = "input"
# Spark resolves these bare words as functions when no column has the name (grammar rule currentLike).
NO_PAREN_FUNCTIONS = frozenset({"user", "current_user", "session_user", "current_date", "current_timestamp",
                                "current_time"})
# Formats Spark reads a path with, as in ``SELECT * FROM text.`/etc/passwd```.
FILE_FORMATS = frozenset({"text", "csv", "json", "parquet", "orc", "avro", "binaryfile", "delta", "xml", "jdbc",
                          "hive", "iceberg", "libsvm", "image"})
# Table-valued functions that only generate rows from their arguments (none reads data).
GENERATOR_TVFS = frozenset({"range", "explode", "explode_outer", "inline", "inline_outer", "posexplode",
                            "posexplode_outer", "stack", "json_tuple", "variant_explode", "variant_explode_outer"})
_QUERY_STARTS = (TokenType.SELECT, TokenType.WITH, TokenType.FROM, TokenType.L_PAREN, TokenType.VALUES)
# sqlglot reads ``GROUP BY window(...)`` as a WINDOW clause; an equally long name parses everywhere.
_WINDOW_CALL = re.compile(r"\b(window)(\s*\()", re.IGNORECASE)
_WINDOW_STAND_IN = "__win_"


class _QuietFallback(logging.Filter):
    """sqlglot warns when it reads a statement it does not know as a raw command; we refuse those."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Falling back to parsing as a 'Command'" not in record.getMessage()


logging.getLogger("sqlglot").addFilter(_QuietFallback())


@dataclass(frozen=True)
class Expression:
    """What one expression text uses. ``error`` is set (and the rest empty) when it does not parse."""

    text: str
    references: tuple[tuple[str, ...], ...] = ()  # each column reference as its dotted parts: ('a', 'b')
    functions: frozenset[str] = frozenset()
    star: bool = False  # '*' or 't.*' (count(*) is not a star: it reads no column)
    name: str | None = None  # output name as a select item: the alias, or the column's (last) name
    tables: tuple[str, ...] = ()  # tables read by subqueries, as written
    error: str | None = None

    @property
    def columns(self) -> frozenset[str]:
        """Columns referenced (the first part of each reference: ``a.b`` is column ``a``)."""
        return frozenset(parts[0] for parts in self.references)


def _parse_message(exc: Exception) -> str:
    """sqlglot's error in a few words: what is wrong, near which text, at which column."""
    if isinstance(exc, TokenError):
        return "does not parse: a quote (' \" or `) is not closed"
    first = (getattr(exc, "errors", None) or [{}])[0]
    description = str(first.get("description") or exc).split("\n")[0]
    near = first.get("highlight")
    if re.search(r"missing for <class", description):
        what = "an operand is missing"
    elif description.startswith("Expecting"):
        what = f"{description[len('Expecting'):].strip()!r} is missing"
    elif description.startswith("Invalid expression / Unexpected token"):
        what = "unexpected text"
    else:
        what = description
    where = (f" near {near!r}" if near else "") + (f" (column {first['col']})" if first.get("col") else "")
    return f"does not parse: {what}{where}"


# Spark's IDENTIFIER('name') clause: a name this check cannot read (``IDENTIFIER('ref' || 'lect')(...)``).
_IDENTIFIER_CLAUSE = re.compile(r"\bidentifier\s*\(", re.IGNORECASE)
_BACKSLASH_AT_LINE_END = re.compile(r"\\\r?\n|\\\r")


def text_problem(text: str) -> str | None:
    """Why an SQL text is refused before it is parsed: what Spark reads differently from this check.

    Spark substitutes ``${...}`` variables into SQL text before parsing it (from settings and the
    environment); it nests block comments (``/* /* */ ... */`` is one comment) and reads ``/*+`` as
    a hint; a backslash at the end of a line continues a ``--`` comment. In each case a call the
    check sees as commented out, or as text, could run in Spark, or the reverse; so none is allowed.
    The driver checks the plans Spark analysed as well (docs/security.md)."""
    if "${" in text:
        return "holds '${': Spark would substitute variables into the text; not allowed"
    if _IDENTIFIER_CLAUSE.search(text):
        return "holds IDENTIFIER(...), which names a function or column by a string Spark computes; not allowed"
    if "/*+" in text:
        return "holds a hint comment ('/*+'); comments other than plain ones are not allowed"
    if _BACKSLASH_AT_LINE_END.search(text):
        return "holds a backslash at the end of a line (Spark continues a '--' comment there); not allowed"
    start = text.find("/*")
    while start != -1:
        end = text.find("*/", start + 2)
        inner = text[start + 2:len(text) if end == -1 else end]
        if "/*" in inner:
            return "holds a comment inside a comment (Spark nests them, this check does not); not allowed"
        start = -1 if end == -1 else text.find("/*", end + 2)
    return None


def _tokens(text: str) -> list[Token]:
    return sqlglot.Dialect.get_or_raise(DIALECT).tokenize(text)


def _parse(text: str) -> list[exp.Expr | None]:
    try:
        return _parse_once(text)
    except RecursionError:  # sqlglot's parser recurses per nesting level (parentheses, NOT, unary minus)
        raise ParseError("it nests too deeply to be read (split it into several steps or withColumns)") from None


def _parse_once(text: str) -> list[exp.Expr | None]:
    try:
        return sqlglot.parse(text, read=DIALECT)
    except ParseError:
        if not _WINDOW_CALL.search(text):
            raise
        return sqlglot.parse(_WINDOW_CALL.sub(lambda m: _WINDOW_STAND_IN + m.group(2), text), read=DIALECT)


def _function_names(tree: exp.Expr, text: str) -> frozenset[str]:
    """Functions as the user wrote them, lower-case (``nvl``, not sqlglot's ``coalesce``)."""
    tokens = _tokens(text)
    calls, names = set(), set()
    for k, token in enumerate(tokens[:-1]):
        if tokens[k + 1].token_type != TokenType.L_PAREN or token.token_type == TokenType.STRING:
            continue
        calls.add(token.text.lower())
        after_as = k > 0 and tokens[k - 1].token_type == TokenType.ALIAS  # AS t(a, b): column names
        if token.token_type in (TokenType.VAR, TokenType.IDENTIFIER) and not after_as:
            names.add(token.text.lower())  # a plain name followed by '(' is a call
    for node in tree.find_all(exp.Func):
        if isinstance(node, exp.Anonymous):
            names.add(str(node.name).lower())
            continue
        start, end = node.meta.get("start"), node.meta.get("end")
        if start is not None and end is not None:
            names.add(text[start:end + 1].lower())
            continue
        if isinstance(node, (exp.Binary, exp.Unary)):
            continue  # an operator (AND, NOT, ...), even when followed by '('
        sql_names = [n.lower() for n in type(node).sql_names()]
        written = set(sql_names) & calls  # keywords such as IF, FILTER, LEFT: only when called
        names |= written
        if not written and sql_names and sql_names[0] in NO_PAREN_FUNCTIONS:
            names.add(sql_names[0])
    return frozenset("window" if n == _WINDOW_STAND_IN else n for n in names)


def _reference(column: exp.Column) -> tuple[str, ...]:
    parts = [str(p.name) for p in column.parts]
    node: exp.Expression = column
    while isinstance(node.parent, exp.Dot) and node.parent.this is node:
        node = node.parent
        parts.append(str(node.expression.name))
    return tuple(parts)


def _describe(tree: exp.Expression, text: str) -> Expression:
    references = []
    for node in tree.find_all(exp.Column):
        if not isinstance(node.this, exp.Star) and not node.find_ancestor(exp.Query):
            references.append(_reference(node))  # a subquery's columns are its tables'
    top = tree.this if isinstance(tree, exp.Alias) else tree
    star = isinstance(top, exp.Star) or (isinstance(top, exp.Column) and isinstance(top.this, exp.Star))
    name = None
    if isinstance(tree, exp.Alias):
        name = str(tree.alias)
    elif isinstance(tree, exp.Column) and not star:
        name = str(tree.name)
    elif isinstance(tree, exp.Dot) and isinstance(tree.expression, exp.Identifier):
        name = str(tree.expression.name)  # a.b.c is named c
    queries = list(tree.find_all(exp.Query))
    tables = tuple(dict.fromkeys(_table_text(t) for q in queries for t in q.find_all(exp.Table)))
    return Expression(text, tuple(references), _function_names(tree, text), star, name, tables)


@lru_cache(maxsize=4096)
def parse_expression(text: str) -> Expression:
    """One Spark SQL expression (a filter, a select item, a withColumns value, ...), described."""
    if not text.strip():
        return Expression(text, error="is empty")
    problem = text_problem(text)
    if problem is not None:
        return Expression(text, error=problem)
    try:
        trees = [t for t in _parse(text) if t is not None]
    except (ParseError, TokenError) as exc:
        return Expression(text, error=_parse_message(exc))
    if len(trees) != 1:
        return Expression(text, error="must be one expression, not several separated by ';'")
    tree = trees[0]
    if isinstance(tree, (exp.Query, exp.Command)) or not isinstance(tree, exp.Expression) or isinstance(tree, exp.DDL):
        return Expression(text, error="must be an expression, not a statement (a query goes in an sql step)")
    return _describe(tree, text)


_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.IntDiv)


def filter_value_type(text: str, type_of: Callable[[str], str | None]) -> str | None:
    """What a filter condition evaluates to when it is plainly not a boolean (Spark refuses those:
    FILTER_NOT_BOOLEAN): arithmetic, a number or string literal, a bare column of a known
    non-boolean type (``type_of(name)``); None when it is or may be a boolean."""
    try:
        trees = [t for t in _parse(text) if t is not None]
    except (ParseError, TokenError):
        return None
    if len(trees) != 1:
        return None
    tree = trees[0]
    while isinstance(tree, exp.Paren):
        tree = tree.this
    if isinstance(tree, _ARITHMETIC):
        return "a number (arithmetic)"
    if isinstance(tree, exp.Literal):
        return "a string" if tree.is_string else "a number"
    if isinstance(tree, exp.Column) and not tree.table:
        column_type = type_of(tree.name)
        if column_type and column_type != "boolean":
            return f"column {tree.name!r} of type {column_type}"
    return None


def functions_in(text: str) -> frozenset[str]:
    """Lower-case names of the functions an expression or sql step calls (empty if it does not parse)."""
    return _functions_cached(text)


@lru_cache(maxsize=4096)
def _functions_cached(text: str) -> frozenset[str]:
    try:
        trees = [t for t in _parse(text) if t is not None]
    except (ParseError, TokenError):
        return frozenset()
    found: set[str] = set()
    for tree in trees:
        found |= _function_names(tree, text)
    return frozenset(found)


def _table_text(table: exp.Table) -> str:
    return ".".join(str(p.name) for p in table.parts) if not isinstance(table.this, exp.Func) else \
        f"{table.this.name}(...)"


def _statement_kind(tree: exp.Expr, tokens: list[Token]) -> str:
    if isinstance(tree, exp.Command):
        return str(tree.this).upper()
    words = [t.text.upper() for t in tokens[:2] if t.token_type != TokenType.L_PAREN]
    return " ".join(words) or type(tree).__name__.upper()


def _table_problem(table: exp.Table, views: set[str]) -> str | None:
    if isinstance(table.this, exp.Func):
        name = str(table.this.name).lower()
        if name in GENERATOR_TVFS:
            return None
        return f"reads from the table-valued function {name}(); an sql step reads only its input view {SQL_INPUT_VIEW!r}"
    name, qualifier = str(table.name), [str(p.name) for p in table.parts[:-1]]
    if qualifier:
        if qualifier[-1].lower() in FILE_FORMATS or "/" in name or ":" in name:
            return (f"reads files ({qualifier[-1]}.`{name}`); an sql step reads only its input view "
                    f"{SQL_INPUT_VIEW!r}")
        return f"reads the table {'.'.join(qualifier + [name])}; an sql step reads only its input view {SQL_INPUT_VIEW!r}"
    if name.lower() in views:
        return None
    return (f"reads {name!r}, which is not defined{did_you_mean(name, sorted(views))}; an sql step reads its "
            f"input as {SQL_INPUT_VIEW!r}")


@lru_cache(maxsize=1024)
def sql_problems(text: str) -> tuple[str, ...]:
    """Why an ``sql`` step's text would be refused: it must be exactly one SELECT statement (or a set
    operation of SELECTs) reading only the input view, common table expressions of its own, and
    generator functions, and running no script (TRANSFORM ... USING). Empty when it is fine."""
    problem = text_problem(text)
    if problem is not None:
        return (problem,)
    try:
        tokens = _tokens(text)
    except TokenError as exc:
        return (_parse_message(exc),)
    if not tokens:
        return ("is empty; write one SELECT statement reading 'input'",)
    if tokens[0].token_type not in _QUERY_STARTS:
        return (f"must be one SELECT statement; {tokens[0].text.upper()} statements are not allowed",)
    try:
        trees = [t for t in _parse(text) if t is not None]
    except (ParseError, TokenError) as exc:
        return (_parse_message(exc),)
    if len(trees) != 1:
        return (f"must be exactly one SELECT statement, found {len(trees)} (separated by ';')",)
    tree = trees[0]
    query = tree.unnest() if isinstance(tree, exp.Subquery) else tree
    if not isinstance(query, (exp.Select, exp.SetOperation)):
        return (f"must be one SELECT statement, not {_statement_kind(tree, tokens)}",)
    views = {SQL_INPUT_VIEW} | {str(cte.alias).lower() for cte in tree.find_all(exp.CTE)}
    problems = []
    if tree.find(exp.QueryTransform):
        problems.append("runs an external program (SELECT TRANSFORM ... USING 'command'); not allowed")
    tables = list(tree.find_all(exp.Table))
    for table in tables:
        problem = _table_problem(table, views)
        if problem and problem not in problems:
            problems.append(problem)
    if not problems and not any(str(t.name).lower() == SQL_INPUT_VIEW and not t.parts[:-1] for t in tables):
        problems.append(f"the query must read the step's input as the table {SQL_INPUT_VIEW!r} (... FROM input ...)")
    return tuple(problems)


def sql_state(text: str) -> tuple[str, ...]:
    """What in an ``sql`` step keeps state across records (GROUP BY, aggregate functions, DISTINCT,
    joins, window functions), in words; empty when it is stateless or does not parse (sql_problems
    says why then)."""
    try:
        trees = [t for t in _parse(text) if t is not None]
    except (ParseError, TokenError):
        return ()
    found: list[str] = []
    for tree in trees:
        kinds = ((exp.Group, "groups rows (GROUP BY)"), (exp.AggFunc, "aggregates rows"),
                 (exp.Distinct, "removes duplicates (DISTINCT)"), (exp.Join, "joins"),
                 (exp.Window, "uses a window function (OVER)"))
        found += [words for node, words in kinds if tree.find(node) and words not in found]
    return tuple(found)


def expression_problems(expression: Expression) -> list[str]:
    """Why an expression cannot run: it does not parse, or a subquery in it reads a table or files
    (an expression sees its row; nothing else is defined for it)."""
    if expression.error:
        return [expression.error]
    return [f"a subquery here reads {t!r}; an expression sees only its row's columns (read other streams "
            "with a join step)" for t in expression.tables if t.split("(")[0].lower() not in GENERATOR_TVFS]


def unknown_columns(expression: Expression, columns: frozenset[str] | set[str], also: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """References whose column is not among ``columns`` (nor ``also``: names visible besides the
    columns, such as aliases given earlier in the same select), compared as Spark does, ignoring case.
    Internal columns (``__...``) and bare words Spark reads as functions are never reported."""
    known = {c.lower() for c in columns} | {c.lower() for c in also}
    out: list[str] = []
    for parts in expression.references:
        column = parts[0]
        folded = column.lower()
        if folded in known or column.startswith("__") or column in out:
            continue
        if len(parts) == 1 and folded in NO_PAREN_FUNCTIONS:
            continue
        out.append(column)
    return out


def expression_sites(app: "StreamApp") -> list[tuple[str, str]]:
    """Every SQL text of a StreamApp with its field path: filters, select items, withColumns values,
    keyBy, aggregate and accumulate columns, and sql steps. (Nothing else in the spec is SQL: sources,
    tables and sinks name columns, they hold no expressions.)"""
    sites: list[tuple[str, str]] = []
    for i, stream in enumerate(app.spec.streams):
        for j, step in enumerate(stream.steps):
            path = f"spec.streams[{i}].steps[{j}]"
            if step.filter is not None:
                sites.append((f"{path}.filter", step.filter))
            if step.key_by is not None:
                sites.append((f"{path}.keyBy", step.key_by))
            if step.sql is not None:
                sites.append((f"{path}.sql", step.sql))
            sites.extend((f"{path}.select[{k}]", item) for k, item in enumerate(step.select or ()))
            sites.extend((f"{path}.withColumns.{name}", text) for name, text in (step.with_columns or {}).items())
            if step.aggregate is not None:
                sites.extend((f"{path}.aggregate.columns.{n}", t) for n, t in step.aggregate.columns.items())
            if step.accumulate is not None:
                sites.extend((f"{path}.accumulate.columns.{n}", t) for n, t in step.accumulate.columns.items())
    return sites
