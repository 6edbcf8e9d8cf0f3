"""Python steps and spec.userCode: the model, the columns a step leaves, and the operator policy that
allows them per namespace, module and ConfigMap (docs/security.md, "User code")."""

from __future__ import annotations

import pytest
import yaml

from streamapp_api import InvalidSpec, Policy, check_policy, load, resolve, validate
from streamapp_api.policy.code import canonical_module, module_allowed
from streamapp_testbed.paths import REPO_DIR
from streamapp_testkit.operator_apps import manifest

pytestmark = pytest.mark.unit

TAG = {"python": {"module": "acme.pricing", "function": "tag",
                  "schema": {"customer": "string", "amount": "double", "big": "boolean"}}}
ALLOWED = Policy.from_mapping({"userCode": {"namespaces": ["shop"], "modules": ["acme"], "configMaps": ["pricing-*"]}})


def document(*steps: dict, namespace: str = "shop", **spec) -> dict:
    doc = manifest(streams=[{"name": "big", "from": "orders", "steps": list(steps), "emit": "updates"}], **spec)
    doc["metadata"]["namespace"] = namespace
    return doc


def errors(doc: dict, policy: Policy = ALLOWED) -> list[str]:
    return [str(i) for i in validate(doc, policy) if i.severity == "error"]


def test_a_python_step_declares_its_columns_and_the_rest_of_the_pipeline_is_checked_against_them():
    doc = document(TAG, {"filter": "big"}, {"aggregate": {"groupBy": ["customer"], "columns": {"total": "sum(amount)"}}})
    assert errors(doc) == []
    flow = resolve(load(doc)).steps["big"][0]
    # the declared columns and the metadata the input had; the event time does not survive the function
    assert flow.columns == {"customer", "amount", "big", "_key", "_timestamp", "_topic", "_partition", "_offset"}
    assert (flow.type_of("big"), flow.type_of("_key"), flow.event_time, flow.watermark) == ("boolean", "string", None, False)


@pytest.mark.parametrize("step, path, fragment", [
    ({"filter": "id = 'x'"}, "spec.streams[0].steps[1].filter", "column 'id' does not exist in 'big'"),
    ({"aggregate": {"groupBy": ["id"], "columns": {"n": "count(*)"}}}, "spec.streams[0].steps[1].aggregate.groupBy[0]",
     "column 'id' does not exist"),
    ({"window": {"type": "tumbling", "size": "1m"}}, "spec.streams[0].steps[1].window", "no event-time column left"),
])
def test_what_the_function_does_not_return_is_gone_after_it(step, path, fragment):
    found = errors(document(TAG, step, {"aggregate": {"columns": {"n": "count(*)"}}}))
    assert any(e.startswith(path) and fragment in e for e in found), found


@pytest.mark.parametrize("python, path, fragment", [
    ({"module": "os;import", "function": "f"}, "python.module", "a dotted Python module name of ASCII identifiers"),
    ({"module": "ｏs", "function": "system"}, "python.module", "ASCII"),  # fullwidth: NFKC folds it to os
    ({"module": "acme..x", "function": "f"}, "python.module", "a dotted Python module name"),
    ({"module": "acme", "function": "a.b"}, "python.function", "a Python name of ASCII letters"),
    ({"module": "acme", "function": "f", "schema": {"x": "strin"}}, "python.schema.x", "not a Spark SQL type"),
    ({"module": "acme", "function": "f", "schema": {}}, "python.schema", "at least 1"),
])
def test_a_python_step_is_refused_naming_the_field(python, path, fragment):
    step = {"python": {"schema": {"x": "long"}, **python}}
    with pytest.raises(InvalidSpec) as refused:
        load(document(step))
    assert any(i.path == f"spec.streams[0].steps[0].{path}" and fragment in i.message for i in refused.value.issues), \
        [str(i) for i in refused.value.issues]


def test_the_default_policy_refuses_user_code_naming_the_step_and_why():
    app = load(document(TAG, userCode={"configMaps": ["pricing-v1"]}))
    found = {i.path: i.message for i in check_policy(app)}
    assert set(found) == {"spec.userCode.configMaps[0]", "spec.streams[0].steps[0].python"}
    message = found["spec.streams[0].steps[0].python"]
    assert "user code is refused in namespace 'shop'" in message
    assert "service account and Secrets" in message and "'userCode.namespaces'" in message
    assert check_policy(app, ALLOWED) == []


@pytest.mark.parametrize("namespace, module, config_map, refused", [
    ("other", "acme.pricing", "pricing-v1", ["spec.userCode.configMaps[0]", "spec.streams[0].steps[0].python"]),
    ("shop", "acmeevil.pricing", "pricing-v1", ["spec.streams[0].steps[0].python.module"]),
    ("shop", "os", "pricing-v1", ["spec.streams[0].steps[0].python.module"]),
    ("shop", "acme.pricing", "secrets", ["spec.userCode.configMaps[0]"]),
    ("shop", "acme", "pricing-v2", []),
])
def test_user_code_is_allowed_by_namespace_module_and_config_map(namespace, module, config_map, refused):
    step = {"python": {**TAG["python"], "module": module}}
    app = load(document(step, namespace=namespace, userCode={"configMaps": [config_map]}))
    issues = check_policy(app, ALLOWED)
    assert [i.path for i in issues] == refused
    if "module" in "".join(refused):
        assert f"module {module!r} is not allowed" in issues[0].message and "'userCode.modules': acme" in issues[0].message


@pytest.mark.parametrize("module, allowed, expected", [
    ("acme.pricing", ("acme",), True),
    ("acme.pricing", ("acme.*",), True),
    ("acme.pricing", (" acme.pricing ",), True),
    ("acme", ("acme.pricing",), False),
    ("acmeevil", ("acme",), False),
    ("os", ("*",), True),
    ("os", (), False),
    ("os", ("o?",), False),  # no globs inside a module name: a dotted name or '*'
    ("acme.pricing", ("ａcme",), False),  # an entry in another spelling allows nothing
])
def test_module_allow_list_compares_whole_dotted_parts(module, allowed, expected):
    assert module_allowed(module, allowed) is expected


@pytest.mark.parametrize("entry, canonical", [("acme.x", "acme.x"), ("acme.*", "acme"), ("acme.", None),
                                              ("acme/x", None), ("ｏs", None), ("", None)])
def test_canonical_module_names(entry, canonical):
    assert canonical_module(entry) == canonical


def test_an_unknown_user_code_policy_key_is_refused_with_its_path():
    with pytest.raises(InvalidSpec, match=r"userCode\.module"):
        Policy.from_mapping({"userCode": {"module": ["acme"]}})


def test_the_user_code_example_is_valid_under_its_policy_and_its_function_returns_the_declared_columns():
    """examples/user-code (beside the examples every cluster admits: this one needs the admin's
    policy.yaml): the ConfigMap's module, loaded as the runtime loads it, returns the step's columns."""
    import pandas as pd

    folder = REPO_DIR / "examples" / "user-code"
    config_map, document = yaml.safe_load_all((folder / "order-totals.yaml").read_text())
    document["metadata"]["namespace"] = "shop"
    assert errors(document, Policy.from_mapping(yaml.safe_load((folder / "policy.yaml").read_text())["policy"])) == []
    assert errors(document, Policy()) != []  # a cluster's default: no user code
    app = load(document)
    assert app.spec.user_code is not None and app.spec.user_code.config_maps == [config_map["metadata"]["name"]]
    step = app.spec.streams[0].steps[0].python
    module: dict = {}
    exec(compile(config_map["data"][f"{step.module}.py"], f"{step.module}.py", "exec"), module)  # noqa: S102
    orders = pd.DataFrame({"order_id": ["o1"], "customer": ["ann"], "country": ["DE"], "amount": [200.0]})
    out = module[step.function](orders)
    assert set(step.schema_) <= set(out.columns) and out["gross"].tolist() == [238.0]
    with pytest.raises(KeyError):
        module[step.function](orders.assign(country="XX"))
    (udf,) = app.spec.udfs or []
    assert module[udf.function](1190.0) == "large"


def test_real_time_mode_refuses_a_python_step_naming_it():
    with pytest.raises(InvalidSpec, match=r"spec\.streams\[0\]\.steps\[0\]\.python: real-time mode runs Spark's own "
                                          r"steps only .* a python step takes records in batches"):
        load(document(TAG, trigger="realtime"))


UDFS = [{"name": "tier", "module": "acme.pricing", "function": "tier", "returns": "string"}]


def test_udfs_are_called_in_expressions_and_need_the_policy_like_python_steps():
    doc = document({"filter": "tier(amount) = 'gold'"},
                   {"aggregate": {"groupBy": ["customer"], "columns": {"gold": "count_if(tier(amount) = 'gold')"}}},
                   udfs=UDFS)
    assert errors(doc) == []
    found = {i.path: i.message for i in check_policy(load(doc))}
    assert list(found) == ["spec.udfs[0]"] and "user code is refused in namespace 'shop'" in found["spec.udfs[0]"]
    other_module = Policy.from_mapping({"userCode": {"namespaces": ["shop"], "modules": ["acme.other"]}})
    assert [i.path for i in check_policy(load(doc), other_module)] == ["spec.udfs[0].module"]


@pytest.mark.parametrize("udfs, path, fragment", [
    ([{**UDFS[0], "returns": "strin"}], "spec.udfs[0].returns", "not a Spark SQL type"),
    ([UDFS[0], {**UDFS[0], "name": "Tier"}], "spec.udfs[1].name", "the name of another udf"),
    ([{**UDFS[0], "name": "tier(x)"}], "spec.udfs[0].name", "a Python name of ASCII letters"),
    ([{**UDFS[0], "module": "acme/pricing"}], "spec.udfs[0].module", "a dotted Python module name"),
])
def test_a_udf_is_refused_naming_the_field(udfs, path, fragment):
    with pytest.raises(InvalidSpec) as refused:
        load(document({"filter": "amount > 0"}, udfs=udfs))
    assert any(i.path == path and fragment in i.message for i in refused.value.issues), \
        [str(i) for i in refused.value.issues]


def test_real_time_mode_refuses_udfs():
    with pytest.raises(InvalidSpec, match=r"spec\.udfs: real-time mode runs Spark's own functions only"):
        load(document({"filter": "amount > 0"}, udfs=UDFS, trigger="realtime"))
