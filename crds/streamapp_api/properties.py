"""spark.properties, written and read by one codec: Java's ``.properties`` format, whose reader is
exactly the inverse of its writer.

The operator writes an app's Spark settings into its ConfigMap; the driver reads them back. If the
reader split a line where the writer did not (Python's ``str.splitlines`` also breaks on form feeds,
file and record separators, NEL and the Unicode line and paragraph separators), one value could
carry whole settings of its own. So the writer emits printable ASCII only: every other character of
a key or a value is escaped (``\\t``, ``\\n``, ``\\r``, ``\\f``, ``\\uXXXX``), as are a backslash and
what would end a key (``=``, ``:``, whitespace) or start a comment. The reader breaks lines only at
``\\n``, ``\\r`` and ``\\r\\n`` and undoes those escapes, as ``java.util.Properties.load`` does, so
Spark's own loader reads the file the same way. Values the previous writer produced (plain
``key=value`` lines of printable text) read back unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

SPARK_PROPERTIES_FILE = "spark.properties"

_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f", "\\": "\\\\"}
_UNESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WHITESPACE = " \t\f"  # what Java's reader skips around keys and values
_KEY_END = "=:" + _WHITESPACE


class PropertiesError(ValueError):
    """A spark.properties line that cannot be read; the message names the file and the line."""


def _escape_char(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    code = ord(char)
    if 0x20 <= code <= 0x7E:
        return char
    if code > 0xFFFF:  # a UTF-16 surrogate pair, as Java keeps it
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}"
    return f"\\u{code:04X}"


def escape(text: str, key: bool) -> str:
    """``text`` as one line of printable ASCII. In a key, '=', ':', '#', '!' and spaces are escaped
    too; in a value, only a leading space (the reader would skip it)."""
    out = []
    for index, char in enumerate(text):
        if key and char in "=: #!":
            out.append("\\" + char)
        elif not key and index == 0 and char == " ":
            out.append("\\ ")
        else:
            out.append(_escape_char(char))
    return "".join(out)


def format_properties(props: dict[str, str]) -> str:
    """One ``key=value`` line per setting, in the order given; any key and value survive intact."""
    for key in props:
        if not key:
            raise PropertiesError("a spark.properties key is empty")
    return "".join(f"{escape(key, True)}={escape(value, False)}\n" for key, value in props.items())


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(number of the first physical line, logical line): a line ending in an odd number of
    backslashes continues on the next one, whose leading whitespace is dropped."""
    lines = _LINE_BREAK.split(text)
    index = 0
    while index < len(lines):
        number, line = index + 1, lines[index].lstrip(_WHITESPACE)
        index += 1
        if not line or line[0] in "#!":
            continue
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1 and index < len(lines):
            line = line[:-1] + lines[index].lstrip(_WHITESPACE)
            index += 1
        if (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            line = line[:-1]  # a continuation at the end of the file continues nothing
        yield number, line


def _unescape(text: str, origin: str, number: int) -> str:
    out, index = [], 0
    while index < len(text):
        char = text[index]
        if char != "\\":
            out.append(char)
            index += 1
            continue
        following = text[index + 1:index + 2]
        if following == "u":
            digits = text[index + 2:index + 6]
            if not re.fullmatch(r"[0-9A-Fa-f]{4}", digits):
                raise PropertiesError(f"{origin}:{number}: malformed \\uXXXX escape {text[index:index + 6]!r}")
            out.append(chr(int(digits, 16)))
            index += 6
            continue
        out.append(_UNESCAPES.get(following, following))
        index += 2
    joined = "".join(out)
    # Java strings are UTF-16: a surrogate pair escaped as two \u escapes is one character.
    return re.sub("[\ud800-\udbff][\udc00-\udfff]",
                  lambda m: chr(0x10000 + ((ord(m[0][0]) - 0xD800) << 10) + ord(m[0][1]) - 0xDC00), joined)


def _split(line: str) -> tuple[str, str]:
    """The raw (still escaped) key and value of a logical line."""
    index = 0
    while index < len(line) and line[index] not in _KEY_END:
        index += 2 if line[index] == "\\" else 1
    key, rest = line[:index], line[index:]
    rest = rest.lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def parse_properties(text: str, origin: str = SPARK_PROPERTIES_FILE) -> dict[str, str]:
    """The settings of a ``.properties`` text (``key=value``, ``key: value`` or ``key value``; ``#``
    and ``!`` comments and blank lines ignored). A bad escape is named with its line number."""
    conf: dict[str, str] = {}
    for number, line in _logical_lines(text):
        raw_key, raw_value = _split(line)
        if not raw_key:
            raise PropertiesError(f"{origin}:{number}: a setting without a key: {line[:80]!r}")
        conf[_unescape(raw_key, origin, number)] = _unescape(raw_value, origin, number)
    return conf
