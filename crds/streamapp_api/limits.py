"""What a manifest may hold before anything parses it: size, nesting, counts and characters.

Every check behind ``streamapp validate``, the admission webhook and the reconcile reads a manifest
that an app author wrote; these bounds keep each check fast and finite for any input (the webhook
answers within its timeout, no parser recurses without end) and refuse characters that readers
disagree on. They run on the plain mapping, before the models, walking it without recursion, and
name the field of every finding. docs/security.md, "The checker".
"""

from __future__ import annotations

import unicodedata
from typing import Any, Iterator

from .base import MAX_EXPR
from .errors import Issue, Loc, format_path, shown
from .sources import MAX_WRITER_SCHEMA

# The whole document as the API server stores it is at most ~1.5 MiB (etcd); a StreamApp's spec is a
# few KiB. Bounds with room for the largest real pipelines, far below what takes a checker seconds.
MAX_TEXT_BYTES = 1024 * 1024  # a YAML file or an admission request's object
MAX_DEPTH = 24  # mappings and lists inside one another (spec.streams[0].steps[0].aggregate.columns.x is 7)
MAX_NODES = 20_000  # values in the spec, aliases expanded
MAX_ENTRIES = 500  # items of one list or one mapping
MAX_KEY = 320  # characters of a mapping key (an annotation key is at most 317)
MAX_STRING = 8 * 1024  # characters of a string that is not SQL
# Characters of SQL in the whole spec (each text: at most base.MAX_EXPR). Checking costs time in
# proportion to the distinct expressions: this keeps every check well within the webhook's timeout.
MAX_SQL_TOTAL = 32 * 1024
MAX_BRACKET_DEPTH = 32  # parentheses and brackets inside one another in one SQL text

# The SQL texts of a step (streamapp_api.expressions.expression_sites): they may span lines.
_SQL_FIELDS = frozenset({"filter", "keyBy", "sql", "select", "withColumns", "aggregate", "accumulate"})
_LINE_BREAKS = frozenset("\t\n\r")
# Texts that may span lines and be longer than MAX_STRING besides SQL: a source's or table's Avro writer
# schema (JSON, pasted as a YAML block).
_LONG_TEXT_FIELDS = {("avro", "writerSchema"): MAX_WRITER_SCHEMA}
# Unicode categories refused in every string: controls, format characters (zero-width, bidi
# overrides, byte-order marks), line and paragraph separators, surrogates, private use, unassigned.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Zs", "Cs", "Co", "Cn"})


def refused_character(text: str, line_breaks: bool = False) -> tuple[int, str] | None:
    """The first character of ``text`` that no field may hold (position, character), else None.
    Plain spaces are fine; tabs and line breaks only where ``line_breaks`` (SQL)."""
    for index, char in enumerate(text):
        if char == " " or (line_breaks and char in _LINE_BREAKS):
            continue
        if unicodedata.category(char) in _REFUSED_CATEGORIES:
            return index, char
    return None


def character_name(char: str) -> str:
    return f"U+{ord(char):04X} ({unicodedata.name(char, unicodedata.category(char))})"


def _is_sql(loc: Loc) -> bool:
    """Whether ``loc`` is (inside) the SQL text of a step: spec.streams[i].steps[j].<sql field>..."""
    return len(loc) >= 6 and loc[:2] == ("spec", "streams") and loc[3] == "steps" and loc[5] in _SQL_FIELDS


def _long_text_limit(loc: Loc) -> int | None:
    """The length limit of a text field that may span lines (spec.sources[i].avro.writerSchema), else None."""
    if len(loc) == 5 and loc[:2] in (("spec", "sources"), ("spec", "tables")):
        return _LONG_TEXT_FIELDS.get((str(loc[3]), str(loc[4])))
    return None


def _text_issues(text: str, loc: Loc, what: str) -> Iterator[Issue]:
    path = format_path(loc)
    sql = what == "value" and _is_sql(loc)
    long_text = _long_text_limit(loc) if what == "value" else None
    limit = MAX_EXPR if sql else (MAX_KEY if what == "key" else long_text or MAX_STRING)
    if len(text) > limit:
        yield Issue(path, f"this {'SQL text' if sql else what} is {len(text)} characters long; at most {limit} "
                    "are allowed")
        return
    found = refused_character(text, line_breaks=sql or long_text is not None)
    if found is not None:
        index, char = found
        allowed = "" if not sql else " (SQL may span lines: tabs and line breaks are fine)"
        yield Issue(path, f"{'key' if what == 'key' else 'value'} {shown(text)} holds {character_name(char)} at "
                    f"position {index}: control, format and separator characters are not allowed in a StreamApp"
                    f"{allowed}")
    elif sql and what == "value":
        depth = bracket_depth(text)
        if depth > MAX_BRACKET_DEPTH:
            yield Issue(path, f"nests parentheses {depth} deep; at most {MAX_BRACKET_DEPTH} are allowed (split it "
                        "into steps or withColumns)")


def bracket_depth(text: str, opening: str = "([", closing: str = ")]") -> int:
    """The deepest nesting of brackets in ``text``, counted without regard to quotes (a bound, not a parse)."""
    depth = deepest = 0
    for char in text:
        if char in opening:
            depth += 1
            deepest = max(deepest, depth)
        elif char in closing and depth:
            depth -= 1
    return deepest


def document_issues(document: dict[str, Any]) -> list[Issue]:
    """Why ``document`` is too large, too deep or holds refused characters; empty when it may be
    checked. Walks ``spec`` and ``metadata.name``/``namespace`` (the rest is the API server's)."""
    issues: list[Issue] = []
    metadata = document.get("metadata")
    roots: list[tuple[Loc, Any]] = [(("spec",), document.get("spec"))]
    if isinstance(metadata, dict):
        roots += [(("metadata", key), metadata[key]) for key in ("name", "namespace") if key in metadata]
    stack = list(reversed(roots))
    nodes = sql_total = 0
    while stack:
        loc, value = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            return [Issue("spec", f"holds more than {MAX_NODES} values (YAML aliases count each time they are "
                          "used); a StreamApp is far smaller")]
        if len(loc) > MAX_DEPTH:
            return [*issues, Issue(format_path(loc[:MAX_DEPTH]), f"nests more than {MAX_DEPTH} levels deep")]
        if isinstance(value, dict):
            if len(value) > MAX_ENTRIES:
                issues.append(Issue(format_path(loc), f"has {len(value)} entries; at most {MAX_ENTRIES} are allowed"))
                continue
            for key, item in reversed(list(value.items())):
                if not isinstance(key, str):
                    issues.append(Issue(format_path(loc), f"key {shown(str(key))} is not a string"))
                    continue
                key_issues = list(_text_issues(key, (*loc, key), "key"))
                issues.extend(key_issues)
                if not key_issues:
                    stack.append(((*loc, key), item))
        elif isinstance(value, list):
            if len(value) > MAX_ENTRIES:
                issues.append(Issue(format_path(loc), f"has {len(value)} items; at most {MAX_ENTRIES} are allowed"))
                continue
            stack.extend(((*loc, index), item) for index, item in reversed(list(enumerate(value))))
        elif isinstance(value, str):
            issues.extend(_text_issues(value, loc, "value"))
            if _is_sql(loc):
                sql_total += len(value)
    if sql_total > MAX_SQL_TOTAL:
        issues.append(Issue("spec.streams", f"holds {sql_total} characters of SQL; at most {MAX_SQL_TOTAL} are "
                            "allowed in one app (split it into several apps)"))
    return issues
