"""Two parsers, one verdict: whenever Spark's own parser reads a call of a refused function in a text,
the admission check (sqlglot, ``streamapp validate`` under the default policy) refuses that text.

Admission reads expressions with sqlglot; the driver runs what Spark's parser reads. Where they differ
(Spark nests block comments, continues a ``--`` comment after a trailing backslash, reads ``/*+`` as a
hint, raw strings r'..' and backslash escapes its own way), a call could hide from the check and run.
Each text goes in a filter and, wrapped in a SELECT, in an sql step of a small valid app; Spark's side
is read under the SQL settings every app runs with (no ${...} substitution: contract.app_sql_conf).
Hand-written cases around a reflect()/java_method() call, then generated ones (hypothesis).

The JVM: one local Spark for this module (the session's, when a test run has one already), only for
its parser: nothing is analysed or run.
"""

from __future__ import annotations

import copy
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamapp_api import Policy, contract, validate
from streamapp_runtime import spark_compat

pytestmark = pytest.mark.unit

REFUSED = frozenset(contract.DEFAULT_REFUSED_FUNCTIONS)
BASE = {
    "apiVersion": "streamapp.io/v1alpha1",
    "kind": "StreamApp",
    "metadata": {"name": "differential"},
    "spec": {
        "kafka": {"bootstrapServers": "kafka:9092"},
        "sources": [{"name": "clicks", "topic": "clicks",
                     "schema": {"user": "string", "event": "string", "amount": "double", "ts": "timestamp"}}],
        "streams": [{"name": "picked", "from": "clicks", "steps": [{"filter": "event = 'click'"},
                                                                   {"sql": "SELECT * FROM input"}]}],
        "sinks": [{"from": "picked", "kafka": {"topic": "picked", "key": "user"}}],
    },
}
FILTER = "spec.streams[0].steps[0].filter"
SQL = "spec.streams[0].steps[1].sql"
CALL = "reflect('java.lang.System', 'getenv', 'HOME')"
JAVA = "java_method('java.lang.System', 'getenv', 'HOME')"

# Each around a call Spark reads (or might read): comments, hints, quotes, escapes, raw strings, case,
# qualified names, separators inside comments, subqueries.
HAND_WRITTEN = [
    f"{CALL} IS NOT NULL",
    "REFLECT('java.lang.System', 'getenv', 'HOME') IS NOT NULL",
    "Java_Method('java.lang.System', 'getenv', 'HOME') IS NOT NULL",
    "system.builtin.reflect('java.lang.System', 'getenv', 'HOME') IS NOT NULL",
    "`reflect`('java.lang.System', 'getenv', 'HOME') IS NOT NULL",
    "try_reflect('java.lang.System', 'getenv', 'HOME') IS NOT NULL",
    # Spark nests block comments: the first */ does not end the comment for Spark, the -- line does not
    # start one for Spark (it is inside the comment) ...
    f"event = 'click' AND /* /* */ -- */ {CALL} IS NULL AND\n event <> ''",
    f"event = 'click' AND /* /* */ */ {CALL} IS NULL",
    # ... a '--' comment ending in a backslash goes on to the next line for Spark
    f"event = 'click' -- note \\\n/*\nAND {CALL} IS NULL\n-- */",
    f"event = 'click' -- note \\\r\n/*\nAND {CALL} IS NULL\n-- */",
    # '/*+' is a hint for Spark, not a nested comment
    f"event = 'click' /* /*+ */ AND {CALL} IS NULL -- */\n",
    f"coalesce(user /* /*+ */, {JAVA} -- */\n) IS NOT NULL",
    f"event = 'click' /*+ REPARTITION(2) */ AND {CALL} IS NULL",
    # raw strings and backslash escapes
    f"r'\\' <> user OR {CALL.replace(chr(39), chr(34))} IS NULL OR user = r'\\'",
    f"R'\\' <> user AND {CALL} IS NULL",
    f"'\\\\' <> user AND {CALL} IS NULL",
    f"'\\'' <> user AND {CALL} IS NULL",
    f"\"\\\"\" <> user AND {CALL} IS NULL",
    f"user <> 'it''s' AND {CALL} IS NULL",
    # separators a line comment may or may not end at
    f"event = 'click' -- x\u2028AND {CALL} IS NULL",
    f"event = 'click' -- x\u2029AND {CALL} IS NULL",
    f"event = 'click' -- x\u0085AND {CALL} IS NULL",
    f"event = 'click' -- x\rAND {CALL} IS NULL",
    f"event = 'click' -- x\x0bAND {CALL} IS NULL",
    f"event = 'click' -- x\x0cAND {CALL} IS NULL",
    f"event = 'click' /* x\u2028*/ AND {CALL} IS NULL",
    # unclosed and odd comment ends
    f"event = 'click' AND {CALL} IS NULL /*",
    f"event = 'click' AND {CALL} IS NULL --",
    f"event = 'click' AND {CALL}/**/IS NULL",
    # subqueries and the function's name computed
    f"EXISTS (SELECT {CALL})",
    f"user IN (SELECT {JAVA})",
    f"(SELECT max({CALL}) FROM (SELECT 1 AS x)) IS NOT NULL",
    "IDENTIFIER('reflect')('java.lang.System', 'getenv', 'HOME') IS NOT NULL",
    "IDENTIFIER('system.builtin.java_method')('java.lang.System', 'getenv', 'HOME') IS NOT NULL",
    # ${...}: not substituted for apps, but refused at admission whatever it holds
    f"'${{x}}' = user AND {CALL} IS NULL",
]


@pytest.fixture(scope="module")
def spark():
    """Spark's parser under the SQL settings every app runs with."""
    from pyspark.sql import SparkSession

    from streamapp_runtime.run.session import bind_to_loopback

    bind_to_loopback()  # no address lookup when the JVM starts
    # pyspark logs each ParseException with its JVM stack; most generated texts do not parse
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)

    active = SparkSession.getActiveSession()
    session = active or (SparkSession.builder.master("local[1]").appName("parser-differential")
                         .config("spark.ui.enabled", "false").config("spark.driver.memory", "512m").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    before = {key: session.conf.get(key, None) for key in contract.app_sql_conf("rocksdb")}
    for key, value in contract.app_sql_conf("rocksdb").items():
        session.conf.set(key, value)
    try:
        yield session
    finally:
        if active is None:
            spark_compat.shut_down_jvm(session)
        else:
            for key, value in before.items():
                if value is None:
                    session.conf.unset(key)
                else:
                    session.conf.set(key, value)


def spark_sees_refused(spark, text: str, statement: bool) -> set[str]:
    """The refused functions Spark's parser reads a call of in ``text`` (none when it does not parse)."""
    try:
        calls = spark_compat.functions_spark_reads(spark, text, statement)
    except Exception:  # noqa: BLE001 - Spark cannot parse it: nothing runs
        return set()
    return {part.lower() for parts in calls for part in parts} & REFUSED


def admission_errors(text: str, site: str) -> list[str]:
    document = copy.deepcopy(BASE)
    steps = document["spec"]["streams"][0]["steps"]
    if site == FILTER:
        steps[0]["filter"] = text
    else:
        steps[1]["sql"] = as_sql_step(text)
    return [str(i) for i in validate(document, Policy()) if i.severity == "error"]


def as_sql_step(text: str) -> str:
    return f"SELECT * FROM input WHERE {text}\n"  # a newline: a trailing '--' comment must not eat the end


def differential(spark, text: str) -> list[str]:
    """Where Spark reads a refused call that admission lets through: 'filter' and/or 'sql'."""
    missed = []
    if spark_sees_refused(spark, text, statement=False) and not admission_errors(text, FILTER):
        missed.append("filter")
    if spark_sees_refused(spark, as_sql_step(text), statement=True) and not admission_errors(text, SQL):
        missed.append("sql")
    return missed


def test_the_base_app_is_valid_and_spark_reads_calls(spark):
    assert admission_errors("event = 'click'", FILTER) == []
    assert spark_sees_refused(spark, f"{CALL} IS NULL", statement=False) == {"reflect"}
    assert spark_sees_refused(spark, as_sql_step(f"{JAVA} IS NULL"), statement=True) == {"java_method"}


@pytest.mark.parametrize("text", HAND_WRITTEN, ids=lambda t: repr(t)[:60])
def test_admission_refuses_what_spark_reads_as_a_refused_call(spark, text):
    assert differential(spark, text) == [], f"Spark reads a refused call in {text!r}; admission lets it through"


# Generated: pieces that are whole for at least one parser (comments, strings, separators) and pieces
# that open or close one (a lone '/*', quote, backslash), around and inside a refused call; texts
# Spark cannot parse count for nothing (nothing of them runs).
_WHOLE = ["/* x */", "-- x\n", "/* /* */ */", "/*+ x */", "-- x \\\n", "/**/", "\n", "\r\n", "\t", "\u2028",
          "\u00a0", "AND 'a' = 'a'", "AND r'\\' <> user", "AND '\\'' <> user", "AND \"x\" <> user",
          "AND 'it''s' <> user", "AND e'\\'' <> user", "AND X'00' IS NOT NULL", "AND user IN ('a', 'b')",
          "/* /*+ */", "-- */\n", "-- x \\\n/*"]
_OPEN = ["/*", "*/", "/*+", "--", "\\", "'", '"', "`", "r'", "${", "}", ";", "(", ")"]
_CALLS = ["reflect", "REFLECT", "Reflect", "java_method", "JAVA_METHOD", "try_reflect", "`reflect`",
          "system.builtin.reflect", "builtin.java_method"]
# Where comments open and close: drawn often, so that openers and closers meet around the call.
_EDGES = ["/* x */", "-- x\n", "/* /* */ */", "/*+ x */", "-- x \\\n", "/* /*+ */", "-- */\n", "-- x \\\n/*",
          "/*", "*/", "--", "\u2028"]
_PIECES = st.one_of(st.sampled_from(_WHOLE), st.sampled_from(_WHOLE), st.sampled_from(_WHOLE), st.sampled_from(_OPEN))


@st.composite
def tangled(draw) -> str:
    name = draw(st.sampled_from(_CALLS))
    before = draw(st.lists(st.one_of(st.sampled_from(_EDGES), _PIECES), max_size=3))
    between = draw(st.lists(_PIECES, max_size=2))
    inside = draw(st.lists(st.sampled_from(_WHOLE[:10] + _OPEN), max_size=2))
    after = draw(st.lists(st.one_of(st.sampled_from(_EDGES), _PIECES), max_size=3))
    call = f"{name}('java.lang.System', {' '.join(inside)} 'getenv', 'HOME')"
    return " ".join(["event = 'click'", *before, "AND", *between, call, "IS NULL", *after])


@settings(max_examples=400, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=tangled())
def test_admission_refuses_what_spark_reads_in_generated_texts(spark, text):
    assert differential(spark, text) == [], f"Spark reads a refused call in {text!r}; admission lets it through"
