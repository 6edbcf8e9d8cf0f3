"""The checker survives anything: every attack manifest, and inputs built to be as costly as the
bounds allow, get an answer naming a field, without an exception and within the webhook's budget.

CPU time is measured (``time.process_time``), not the clock: the bar is the check's own cost, which
a loaded machine does not change.
"""

import copy
import time

import pytest
import yaml

from streamapp_api import Policy, validate
from streamapp_api.limits import MAX_SQL_TOTAL, document_issues, refused_character
from streamapp_api.validate_cli import check_file, check_text
from streamapp_testbed.manifests import header, manifests

pytestmark = pytest.mark.unit
BUDGET_S = 2.0  # per manifest (the webhook's timeout is 10 s)
ATTACKS = manifests("attacks")
BASE = yaml.safe_load((manifests("attacks")[0]).read_text())
BASE["spec"].pop("image", None)


def timed(check, *args):
    started = time.process_time()
    result = check(*args)
    return result, time.process_time() - started


@pytest.mark.parametrize("path", ATTACKS, ids=lambda p: p.stem)
def test_every_attack_is_refused_naming_a_field_within_the_budget(path):
    reports, seconds = timed(check_file, str(path))
    errors = [(issue, line) for report in reports for issue, line in report.issues if issue.severity == "error"]
    assert errors and all(issue.path and line for issue, line in errors), errors
    assert seconds < BUDGET_S, f"{path.name}: {seconds:.2f} s of CPU"
    assert header(path)["expect"] in {issue.path for issue, _ in errors} or any(
        issue.path.startswith(header(path)["expect"]) for issue, _ in errors)


def with_steps(*steps, **spec) -> dict:
    document = copy.deepcopy(BASE)
    document["spec"]["streams"][0]["steps"][0:1] = list(steps)
    document["spec"].update(spec)
    return document


# Each as costly as its bound allows, or far beyond it.
big = " + ".join(f"abs(amount * {i})" for i in range(400))[:4000].rsplit("+", 1)[0]
NASTY = {
    "a 10 MB value": with_steps({"filter": "amount > 0"}, sparkConf={"spark.sql.ansi.enabled": "x" * 10_000_000}),
    "1,000 NOTs": with_steps({"filter": "NOT " * 1000 + "amount > 0"}),
    "1,000 nested calls": with_steps({"filter": "abs(" * 1000 + "amount" + ")" * 1000 + " > 0"}),
    "30 nested subqueries": with_steps({"filter": "(SELECT " * 30 + "1" + ")" * 30 + " > 0"}),
    "nested lists 100 deep": with_steps({"filter": "amount > 0"}, sparkConf={"x": [[[[[[[[[[[["y"]]]]]]]]]]]] * 5}),
    "distinct 4 KiB select items up to the SQL bound": with_steps(
        {"select": ["user", "event", "ts", "amount", *[f"{big} AS b{i}" for i in range(MAX_SQL_TOTAL // 4000)]]}),
    "distinct 4 KiB sql steps up to the SQL bound": with_steps(*[
        {"sql": f"SELECT *, {big} AS b{i} FROM input"} for i in range(MAX_SQL_TOTAL // 4100)]),
    "64 streams of 64 steps": {**BASE, "spec": {**BASE["spec"], "streams": [
        {"name": f"s{i}", "from": "clicks", "steps": [{"filter": f"amount > {j}"} for j in range(64)]}
        for i in range(64)]}},
    "a separator in every key": with_steps({"filter": "amount > 0"},
                                           sparkConf={f"spark.sql.x{i}\u2028": "1" for i in range(400)}),
}


@pytest.mark.parametrize("name", NASTY)
def test_the_nastiest_inputs_get_an_answer_within_the_budget(name):
    issues, seconds = timed(validate, NASTY[name], Policy())
    assert all(len(str(issue)) < 1400 for issue in issues)  # a 10 MB value is not echoed
    assert seconds < BUDGET_S, f"{name}: {seconds:.2f} s of CPU"


@pytest.mark.parametrize("text, problem", [
    ("a: " + "[" * 100_000 + "]" * 100_000, "deeper than can be read"),
    ("a: &a [" + ",".join(["lol"] * 9) + "]\n" + "".join(
        f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]\n" for p, c in zip("abcdefgh", "bcdefghi")) + "spec: *i\n",
     "aliases"),
    ("a: &a [*a]\n", "refers to itself"),
    ("spec:\n  x: '" + "y" * 1_100_000 + "'\n", "at most 1048576"),
])
def test_yaml_that_cannot_be_read_is_refused_not_a_crash(text, problem):
    reports, seconds = timed(check_text, text, "x.yaml")
    (issue, line), = reports[0].issues
    assert problem in issue.message and line == 1
    assert seconds < BUDGET_S


@pytest.mark.parametrize("text, refused", [
    ("plain text, with: punctuation (and) 'quotes' — é ü 漢字", None),
    ("tab\tand\nnewline", "U+0009"),
    ("a\u2028b", "U+2028"), ("a\u00a0b", "U+00A0"), ("a\u200bb", "U+200B"), ("a\ufeffb", "U+FEFF"),
    ("a\x85b", "U+0085"), ("a\x00b", "U+0000"), ("a\ue000b", "U+E000"),
])
def test_characters_no_field_may_hold(text, refused):
    found = refused_character(text)
    assert (found and f"U+{ord(found[1]):04X}") == (refused or None)


def test_sql_may_span_lines_other_fields_may_not():
    sql = with_steps({"filter": "amount > 0\n\tAND event = 'x'"})
    assert document_issues(sql) == []
    topic = with_steps({"filter": "amount > 0"})
    topic["spec"]["sinks"][0]["kafka"]["topic"] = "counts\n"
    (issue,) = document_issues(topic)
    assert issue.path == "spec.sinks[0].kafka.topic" and "U+000A" in issue.message
