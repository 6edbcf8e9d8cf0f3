"""The driver's refused-function guard as decisions over plain data (run/plan_guard.py); what Spark
reads is a dict here. tests/runtime/test_plan_guard.py runs it on real Spark."""

from __future__ import annotations

import pytest

from streamapp_api import contract
from streamapp_runtime.run import plan_guard, termination
from streamapp_runtime.run.plan_guard import CALL_METHOD_VIA_REFLECTION, AppRefused, Refusal

pytestmark = pytest.mark.unit
REGISTRY = {"reflect": CALL_METHOD_VIA_REFLECTION, "java_method": CALL_METHOD_VIA_REFLECTION,
            "try_reflect": "org.apache.spark.sql.catalyst.expressions.TryReflect",
            "upper": "org.apache.spark.sql.catalyst.expressions.Upper"}
TRY_REFLECT = "org.apache.spark.sql.catalyst.expressions.TryReflect"


def reads(calls: dict[str, set[tuple[str, ...]]]):
    """What Spark's parser reads in each text; a text not listed does not parse."""
    def calls_of(text: str, statement: bool):
        if text not in calls:
            raise ValueError(f"[PARSE_SYNTAX_ERROR] {text}")
        return calls[text]
    return calls_of


@pytest.mark.parametrize("value, refused", [
    (None, {"reflect", "java_method", "try_reflect"}),  # no setting: a laptop run refuses the default list
    ("", set()),  # a policy that refuses nothing
    ("Reflect, java_method ,,UPPER", {"reflect", "java_method", "upper"}),
])
def test_the_refused_list_comes_from_the_operator_setting(value, refused):
    assert contract.parse_refused_functions(value) == refused


def test_the_operator_writes_what_the_runtime_reads():
    names = ("java_method", " Reflect ", "")
    assert contract.parse_refused_functions(contract.format_refused_functions(names)) == {"java_method", "reflect"}
    assert contract.format_refused_functions(()) == ""


@pytest.mark.parametrize("functions, classes", [
    ({"reflect"}, {CALL_METHOD_VIA_REFLECTION: "reflect"}),
    ({"java_method"}, {CALL_METHOD_VIA_REFLECTION: "java_method"}),
    # try_reflect analyses into TryReflect over CallMethodViaReflection: both refused
    ({"try_reflect"}, {TRY_REFLECT: "try_reflect", CALL_METHOD_VIA_REFLECTION: "try_reflect"}),
    ({"reflect", "java_method", "try_reflect"}, {CALL_METHOD_VIA_REFLECTION: "reflect", TRY_REFLECT: "try_reflect"}),
    ({"java_method", "try_reflect"}, {CALL_METHOD_VIA_REFLECTION: "java_method", TRY_REFLECT: "try_reflect"}),
    ({"upper", "no_such_function"}, {"org.apache.spark.sql.catalyst.expressions.Upper": "upper"}),
    (set(), {}),
])
def test_refused_names_map_to_expression_classes(functions, classes):
    assert plan_guard.refused_classes(frozenset(functions), REGISTRY.get) == classes


def test_each_site_is_read_as_spark_reads_it_and_named_by_its_field():
    sites = [("spec.streams[0].steps[0].filter", "a"), ("spec.streams[0].steps[1].sql", "b"),
             ("spec.streams[0].steps[2].select[0]", "c"), ("spec.streams[0].steps[3].keyBy", "does not parse")]
    statements = []

    def calls_of(text, statement):
        statements.append(statement)
        return reads({"a": {("upper",), ("SYSTEM", "builtin", "REFLECT")}, "b": {("java_method",)}, "c": {("lower",)}})(
            text, statement)

    found = plan_guard.site_refusals(sites, frozenset(contract.DEFAULT_REFUSED_FUNCTIONS), calls_of)
    assert [(r.where, r.function) for r in found] == [("spec.streams[0].steps[0].filter", "reflect"),
                                                      ("spec.streams[0].steps[1].sql", "java_method")]
    assert statements == [False, True, False, False], "an sql step is read as a statement, the rest as expressions"
    assert str(found[0]) == ("spec.streams[0].steps[0].filter: function reflect() is refused on this cluster "
                             "(Spark's parser reads a call the admission check did not see)")


def test_check_sites_refuses_nothing_when_the_policy_refuses_nothing():
    sites = [("spec.streams[0].steps[0].filter", "a")]
    calls_of = reads({"a": {("reflect",)}})
    plan_guard.check_sites(sites, {contract.REFUSED_FUNCTIONS_CONF: ""}, calls_of)
    with pytest.raises(AppRefused, match=r"steps\[0\].filter: function reflect\(\)"):
        plan_guard.check_sites(sites, {}, calls_of)


def test_a_plan_holding_a_refused_class_refuses_its_query():
    frames = {"counts-0": "plan a", "counts-1": "plan b"}
    classes = {"plan a": {"org.apache.spark.sql.catalyst.plans.logical.Project", CALL_METHOD_VIA_REFLECTION},
               "plan b": {"org.apache.spark.sql.catalyst.plans.logical.Project"}}
    with pytest.raises(AppRefused) as refused:
        plan_guard.check_plans(frames, {}, REGISTRY.get, classes.__getitem__)
    assert [(r.where, r.function) for r in refused.value.refusals] == [("query counts-0", "reflect")]
    plan_guard.check_plans({"counts-1": "plan b"}, {}, REGISTRY.get, classes.__getitem__)


def test_a_plan_that_cannot_be_walked_refuses_the_app():
    def broken(df):
        raise RuntimeError("py4j: the gateway went away\nat ...")

    with pytest.raises(AppRefused) as refused:
        plan_guard.check_plans({"counts-0": "plan"}, {}, REGISTRY.get, broken)
    assert str(refused.value) == ("query counts-0: refused: its plan could not be checked for refused functions "
                                  "(py4j: the gateway went away)")


def test_the_termination_message_names_each_field_under_the_refused_reason():
    refusals = [Refusal("spec.streams[0].steps[1].filter", "reflect", plan_guard.WHY_PARSER),
                Refusal("query counts-0", "java_method", plan_guard.WHY_PLAN)]
    text = termination.refused(refusals)
    assert text.splitlines() == [
        "Refused: spec.streams[0].steps[1].filter: function reflect() is refused on this cluster (Spark's parser "
        "reads a call the admission check did not see)",
        "query counts-0: function java_method() is refused on this cluster (the query's analysed plan calls it, "
        "whatever its text said)"]
    assert text.split(": ")[0] == contract.REFUSED_REASON and contract.REFUSED_REASON in contract.TERMINATION_REASONS
