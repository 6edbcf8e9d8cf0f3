"""Spark SQL expressions read without a JVM: columns, functions, names, parse errors, sql steps."""

import pytest

from streamapp_api import StreamApp
from streamapp_api.expressions import (
    expression_problems, expression_sites, functions_in, parse_expression, sql_problems, unknown_columns,
)
from streamapp_api.flow import select_names
from test_api_semantic import app_with, errors

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text, columns", [
    ("usr = 'alice' AND amount > 10", {"usr", "amount"}),
    ("`my col` + 1", {"my col"}),
    ("a.b.c > 1", {"a"}),  # struct field access reads column a
    ("e.payload['k'] = 'v'", {"e"}),
    ("transform(xs, x -> x + 1)", {"xs"}),  # lambda variables are not columns
    ("filter(xs, x -> x > limit_)", {"xs", "limit_"}),
    ("aggregate(xs, 0, (acc, x) -> acc + x)", {"xs"}),
    ("transform(items, user -> user.price * qty)", {"items", "qty"}),  # a lambda variable hides a column
    ("exists(tags, t -> t = 'vip')", {"tags"}),
    ("zip_with(a, b, (x, y) -> x + y)", {"a", "b"}),
    ("count(*)", set()),
    ("count(DISTINCT user)", {"user"}),
    ("count(*) FILTER (WHERE amount > 1)", {"amount"}),
    ("struct(a AS x, b AS y)", {"a", "b"}),  # x and y are field names
    ("CAST(ts AS date) = current_date", {"ts"}),
    ("ts > current_timestamp() - INTERVAL 5 MINUTES", {"ts"}),
    ("CASE WHEN level = 'ERROR' THEN 1 ELSE 0 END", {"level"}),
    ("count_if(event = \"click\")", {"event"}),  # double quotes are a string in Spark
    ("x IN (SELECT y FROM input)", {"x"}),  # a subquery's columns are its tables'
    ("'usr' = _key", {"_key"}),
])
def test_columns(text, columns):
    parsed = parse_expression(text)
    assert parsed.error is None
    assert parsed.columns == columns


@pytest.mark.parametrize("text, functions", [
    ("java_method('java.lang.System', 'getenv', 'HOME')", {"java_method"}),
    ("reflect('java.lang.Runtime', 'getRuntime')", {"reflect"}),
    ("try_reflect('a', 'b')", {"try_reflect"}),
    ("upper(REFLECT('a', 'b'))", {"upper", "reflect"}),
    ("nvl(a, 0) + ifnull(b, 0)", {"nvl", "ifnull"}),  # as written, not sqlglot's coalesce
    ("substr(s, 1, 2) || left(s, 1)", {"substr", "left"}),
    ("if(a > 0, 1, 2) AND (b OR c)", {"if"}),  # AND ( ... ) is not a call
    ("filter(xs, x -> x > 0)", {"filter"}),
    ("count(*) FILTER (WHERE a > 1)", {"count"}),
    ("int(x) + CAST(y AS INT)", {"int", "cast"}),
    ("lenght(user)", {"lenght"}),  # unknown to sqlglot: still reported
    ("window(ts, '1 minute')", {"window"}),
    ("current_date", {"current_date"}),
    ("a + b", set()),
    ("'reflect(x)'", set()),  # inside a string
])
def test_functions(text, functions):
    assert functions_in(text) == frozenset(functions)


def test_functions_in_sql_and_in_text_that_does_not_parse():
    assert functions_in("SELECT java_method('a', 'b') AS x FROM input") == {"java_method"}
    assert functions_in("SELECT user, count(*) AS n FROM input GROUP BY window(ts, '1 minute'), user") == {"count", "window"}
    assert functions_in("a +") == frozenset()


@pytest.mark.parametrize("text, fragment", [
    ("amount > 10 AND", "an operand is missing near 'AND'"),
    ("sum(amount", "')' is missing"),
    ("if(event = 'click, 1, 0)", "is not closed"),
    ("a, b", "does not parse"),
    ("a; b", "one expression"),
    ("SELECT 1", "not a statement"),
    ("   ", "empty"),
])
def test_parse_errors(text, fragment):
    parsed = parse_expression(text)
    assert parsed.error and fragment in parsed.error
    assert expression_problems(parsed) == [parsed.error]


def test_subquery_reading_a_table_or_files_is_a_problem():
    assert "text./etc/passwd" in expression_problems(parse_expression("x IN (SELECT value FROM text.`/etc/passwd`)"))[0]
    assert expression_problems(parse_expression("x IN (SELECT 1)")) == []


@pytest.mark.parametrize("items, names, star", [
    (["a", "b AS c", "upper(x) as Y", "a.b.c", "x `y`"], ["a", "c", "Y", "c", "y"], False),
    (["*", "1 AS one"], ["one"], True),
    (["t.*"], [], True),
    (["f(x)", "a +"], [None, None], False),
])
def test_select_names(items, names, star):
    assert select_names(items) == (names, star)


def test_unknown_columns_ignore_case_and_spark_words():
    parsed = parse_expression("USER = 'a' AND Amount > 1 AND current_date > d AND __internal IS NULL AND b = later")
    assert sorted(unknown_columns(parsed, {"user", "amount"}, {"later"})) == ["b", "d"]
    assert unknown_columns(parse_expression("user = 'x'"), set()) == []  # Spark reads a bare 'user' as current_user


@pytest.mark.parametrize("sql", [
    "SELECT user, count(*) AS n FROM input GROUP BY user",
    "select * from INPUT",
    "SELECT * FROM `input` WHERE amount > 1",
    "WITH big AS (SELECT * FROM input WHERE amount > 100) SELECT user FROM big",
    "SELECT * FROM input UNION ALL SELECT * FROM input",
    "SELECT x FROM input LATERAL VIEW explode(xs) t AS x",
    "SELECT user, count(*) AS n FROM input GROUP BY window(ts, '1 minute'), user",
    "SELECT i.user, r.id FROM input i CROSS JOIN range(3) r",
    "(SELECT * FROM input)",
    "SELECT * FROM input;",
])
def test_sql_accepted(sql):
    assert sql_problems(sql) == ()


@pytest.mark.parametrize("sql, fragment", [
    ("ADD JAR /tmp/evil.jar", "ADD JAR statements are not allowed"),
    ("CREATE TEMPORARY FUNCTION f AS 'x.Y' USING JAR '/tmp/x.jar'", "CREATE statements are not allowed"),
    ("SET spark.sql.ansi.enabled=false", "SET statements are not allowed"),
    ("INSERT INTO t SELECT * FROM input", "INSERT statements"),
    ("DROP TABLE input", "DROP statements"),
    ("CACHE TABLE input", "CACHE statements"),
    ("EXPLAIN SELECT * FROM input", "EXPLAIN statements"),
    ("SELECT * FROM input; DROP TABLE x", "exactly one SELECT statement, found 2"),
    ("SELECT * FROM text.`/etc/passwd`", "reads files (text.`/etc/passwd`)"),
    ("SELECT * FROM input WHERE user IN (SELECT value FROM csv.`/data/x.csv`)", "reads files (csv."),
    ("SELECT * FROM `parquet`.`/tmp/p`", "reads files"),
    ("SELECT * FROM orc.`s3a://bucket/key`", "reads files"),
    ("SELECT * FROM default.input", "reads the table default.input"),
    ("SELECT * FROM read_files('/x')", "table-valued function read_files()"),
    # new in Spark 4.2: the Python workers' log lines as a table
    ("SELECT i.*, l.msg FROM input i, python_worker_logs() l", "table-valued function python_worker_logs()"),
    ("SELECT TRANSFORM(user) USING '/bin/sh -c id' AS (out) FROM input", "runs an external program"),
    ("SELECT * FROM input WHERE user IN (SELECT TRANSFORM(user) USING 'cat' FROM input)", "runs an external program"),
    ("SELECT * FROM inptu", "(did you mean 'input'?)"),
    ("SELECT * FROM clicks", "reads its input as 'input'"),
    ("SELECT 1 AS one", "must read the step's input"),
    ("SELECT * FROM input WHERE", "does not parse"),
    ("", "is empty"),
])
def test_sql_refused(sql, fragment):
    problems = sql_problems(sql)
    assert any(fragment in p for p in problems), problems


def test_expression_sites_cover_every_expression():
    doc = app_with([
        {"filter": "amount > 1"}, {"select": ["user", "amount * 2 AS double", "ts"]},
        {"withColumns": {"big": "double > 10"}}, {"keyBy": "user"},
        {"accumulate": {"key": ["user"], "columns": {"total": "sum(double)"}}},
        {"window": {"type": "tumbling", "size": "1m"}}, {"aggregate": {"groupBy": ["user"], "columns": {"n": "count(*)"}}},
        {"sql": "SELECT * FROM input"},
    ], "updates")
    sites = expression_sites(_model(doc))
    base = "spec.streams[0].steps"
    assert sites == [
        (f"{base}[0].filter", "amount > 1"), (f"{base}[1].select[0]", "user"),
        (f"{base}[1].select[1]", "amount * 2 AS double"), (f"{base}[1].select[2]", "ts"),
        (f"{base}[2].withColumns.big", "double > 10"), (f"{base}[3].keyBy", "user"),
        (f"{base}[4].accumulate.columns.total", "sum(double)"), (f"{base}[6].aggregate.columns.n", "count(*)"),
        (f"{base}[7].sql", "SELECT * FROM input"),
    ]


def _model(doc):
    return StreamApp.model_validate(doc)  # the shape only: this pipeline need not be valid


WINDOW = {"window": {"type": "tumbling", "size": "1m"}}


@pytest.mark.parametrize("steps, emit", [
    ([{"filter": "USER = 'a' AND amount > 1 AND _key IS NOT NULL AND _offset > 0"}], None),  # case as Spark
    ([{"filter": "user = current_user() AND ts < current_timestamp"}], None),
    ([{"withColumns": {"x": "amount * 2", "y": "x + 1"}}], None),  # a lateral alias: not refused
    ([{"select": ["amount * 2 AS x", "x + 1 AS y", "ts"]}], None),
    ([{"sql": "SELECT user AS u FROM input"}, {"filter": "anything_goes > 1"}], None),  # columns unknown after sql
    ([WINDOW, {"aggregate": {"groupBy": ["user"], "columns": {"n": "count(*)", "avg": "sum(amount) / n"}}},
      {"keyBy": "user"}, {"filter": "_key = 'a' AND n > 1 AND window_end IS NOT NULL"}], "final"),
    ([{"join": {"stream": "views", "using": ["user"], "within": "5s"}}, {"filter": "views_ts IS NOT NULL AND page > ''"}],
     None),
])
def test_expressions_accepted_in_a_pipeline(steps, emit):
    assert errors(app_with(steps, emit)) == []


@pytest.mark.parametrize("steps, emit, path, fragment", [
    ([{"filter": "usr = 'alice'"}], None, "spec.streams[0].steps[0].filter", "'usr' does not exist in 'out' (did you mean 'user'?)"),
    ([{"select": ["user", "ts"]}, {"filter": "amount > 1"}], None, "spec.streams[0].steps[1].filter", "'amount' does not exist"),
    ([{"withColumns": {"x": "upper(evnt)"}}], None, "spec.streams[0].steps[0].withColumns.x", "did you mean 'event'?"),
    ([{"keyBy": "usr"}], None, "spec.streams[0].steps[0].keyBy", "did you mean 'user'?"),
    ([WINDOW, {"aggregate": {"columns": {"n": "sum(amnt)"}}}], "final", "spec.streams[0].steps[1].aggregate.columns.n",
     "did you mean 'amount'?"),
    ([WINDOW, {"aggregate": {"columns": {"n": "count(*)"}}}, {"filter": "event = 'a'"}], "final",
     "spec.streams[0].steps[2].filter", "'event' does not exist"),  # gone after the aggregate
    ([{"accumulate": {"key": ["user"], "columns": {"t": "sum(amout)"}}}], None,
     "spec.streams[0].steps[0].accumulate.columns.t", "did you mean 'amount'?"),
    ([{"select": ["user", "upper(evnt) AS e"]}], None, "spec.streams[0].steps[0].select[1]", "did you mean 'event'?"),
    ([{"filter": "amount >"}], None, "spec.streams[0].steps[0].filter", "does not parse"),
    ([{"sql": "SELECT * FROM text.`/etc/passwd`"}], None, "spec.streams[0].steps[0].sql", "reads files"),
])
def test_expressions_refused_in_a_pipeline(steps, emit, path, fragment):
    found = errors(app_with(steps, emit))
    assert any(p == path and fragment in m for p, m in found), found


NESTED = {"name": "orders", "topic": "orders", "eventTime": "ts", "watermark": "30s",
          "schema": {"id": "string", "ts": "timestamp", "payload": "struct<amount:double,currency:string>",
                     "items": "array<struct<price:double,qty:int>>", "attrs": "map<string,string>",
                     "deep": "struct<a:struct<b:int>>"}}


def nested_app(steps):
    doc = app_with(steps)
    doc["spec"]["sources"].append(NESTED)
    doc["spec"]["streams"][0]["from"] = "orders"
    return doc


@pytest.mark.parametrize("steps", [
    [{"filter": "payload.amount > 1 AND Payload.CURRENCY = 'EUR' AND deep.a.b = 1 AND attrs.color = 'red'"}],
    [{"withColumns": {"prices": "items.price", "n": "size(items)"}}],  # a field of every array element
    [{"explode": {"column": "items", "as": "item"}}, {"filter": "item.price * item.qty > 10"}],
    [{"select": ["payload", "ts"]}, {"filter": "payload.currency = 'EUR'"}],
    [{"withColumns": {"payload": "named_struct('x', 1)"}}, {"filter": "payload.x = 1"}],  # type no longer known
    [{"filter": "transform(items, i -> i.prise) IS NOT NULL"}],  # lambda fields are not followed
])
def test_struct_fields_accepted(steps):
    assert errors(nested_app(steps)) == []


@pytest.mark.parametrize("steps, path, fragment", [
    ([{"filter": "payload.amout > 1"}], "spec.streams[0].steps[0].filter",
     "'payload' has no field 'amout' (did you mean 'amount'?); its fields are: amount, currency"),
    ([{"withColumns": {"p": "items.prise"}}], "spec.streams[0].steps[0].withColumns.p", "'items' has no field 'prise'"),
    ([{"filter": "deep.a.c = 1"}], "spec.streams[0].steps[0].filter", "'deep.a' has no field 'c'"),
    ([{"explode": {"column": "items", "as": "item"}}, {"keyBy": "item.qtty"}], "spec.streams[0].steps[1].keyBy",
     "(did you mean 'qty'?)"),
])
def test_struct_fields_refused(steps, path, fragment):
    found = errors(nested_app(steps))
    assert any(p == path and fragment in m for p, m in found), found


@pytest.mark.parametrize("text, found", [
    ("amount + 1", "a number (arithmetic)"),
    ("(points * 2)", "a number (arithmetic)"),
    ("'click'", "a string"),
    ("1", "a number"),
    ("amount", "column 'amount' of type double"),
    ("EVENT", "column 'EVENT' of type string"),
    ("is_bot", None),  # a boolean column
    ("unknown_type", None),  # a column whose type is not known: no guess
    ("event = 'click'", None),
    ("NOT is_bot", None),
    ("amount > 1 AND is_bot", None),
    ("coalesce(is_bot, false)", None),
    ("event IN ('a', 'b')", None),
    ("amount +", None),  # does not parse: reported by the parse check, not here
])
def test_filter_value_that_is_no_condition(text, found):
    from streamapp_api.expressions import filter_value_type

    types = {"amount": "double", "points": "long", "event": "string", "is_bot": "boolean"}
    assert filter_value_type(text, lambda name: types.get(name.lower())) == found
