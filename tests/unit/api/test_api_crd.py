"""The checked-in CRD is exactly what the models generate, and it is a structural schema."""

import re
from pathlib import Path

import pytest
import yaml

from streamapp_api import crd as crd_module
from streamapp_api.crd import crd, render

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[3]
CRD_FILE = ROOT / "crds" / "streamapp.io_streamapps.yaml"


def _schema():
    return crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _walk(node, path="openAPIV3Schema"):
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from _walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}{{}}")


def test_checked_in_crd_matches_the_models():
    assert CRD_FILE.read_text() == render(), (
        "crds/streamapp.io_streamapps.yaml is out of date: run "
        "`PYTHONPATH=crds python -m streamapp_api.crd > crds/streamapp.io_streamapps.yaml` (make crds)"
    )


def test_names_scope_and_subresources():
    spec = crd()["spec"]
    assert crd()["metadata"]["name"] == "streamapps.streamapp.io"
    assert (spec["group"], spec["scope"]) == ("streamapp.io", "Namespaced")
    assert spec["names"]["kind"] == "StreamApp" and spec["names"]["plural"] == "streamapps"
    assert spec["names"]["shortNames"] == ["sapp"]
    version = spec["versions"][0]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"]["status"] == {}
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.executors",
        "statusReplicasPath": ".status.executors",
        "labelSelectorPath": ".status.selector",
    }
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns == ["Phase", "Reason", "Executors", "Partitions", "Lag", "Restarts", "Age", "Message", "UI"]
    # why an app is not running (or runs an older spec than applied) shows in `kubectl get`; the
    # whole message in `kubectl get -o wide`
    wide = {c["name"]: c.get("priority", 0) for c in version["additionalPrinterColumns"]}
    assert wide["Reason"] == 0 and wide["Message"] == 1
    assert wide["UI"] == 1  # the Spark UI's address with -o wide


def test_schema_is_structural():
    text = yaml.safe_dump(_schema())
    assert "$ref" not in text and "anyOf" not in text and "oneOf" not in text and "allOf" not in text
    for path, node in _walk(_schema()):
        assert "type" in node, f"{path} has no type"
        assert node.get("additionalProperties") is not False, f"{path}: additionalProperties false is not structural"
        assert not ("properties" in node and "additionalProperties" in node), f"{path}: both properties and additionalProperties"
        assert "x-kubernetes-preserve-unknown-fields" not in node, f"{path}: prefer typed schemas"
        assert "uniqueItems" not in node, f"{path}: uniqueItems is not allowed in CRDs"


def test_every_field_has_a_description():
    missing = [path for path, node in _walk(_schema())
               if not path.endswith(("[]", "{}")) and path.count(".") > 1 and not node.get("description")]
    assert missing == []


def test_strings_and_lists_are_bounded_where_cel_rules_look_at_them():
    for path, node in _walk(_schema()):
        if node.get("type") == "array":
            assert "maxItems" in node, f"{path} needs maxItems for CEL cost estimation"
        if node.get("type") == "object" and "additionalProperties" in node:
            assert "maxProperties" in node, f"{path} needs maxProperties"


@pytest.mark.parametrize(
    "path, rule_fragment",
    [
        ("openAPIV3Schema.spec.streams[].steps[].window", "self.advance"),
        ("openAPIV3Schema.spec.scaling", "self.minExecutors <= self.maxExecutors"),
        ("openAPIV3Schema.spec.streams[].steps[]", ".filter(x, x).size() == 1"),
        ("openAPIV3Schema.spec.sources[]", "has(self.topic) != has(self.topics)"),
        ("openAPIV3Schema.spec.sinks[]", "(has(self.kafka) ? 1 : 0) + (has(self.postgres) ? 1 : 0)"),
        ("openAPIV3Schema.spec.streams[].steps[].join", "has(self.table) != has(self.stream)"),
        ("openAPIV3Schema.spec", "self.executors >= self.scaling.minExecutors"),
        ("openAPIV3Schema.spec", "self.scaling.mode == 'manual'"),
        ("openAPIV3Schema.spec", "self.scaling.mode != 'manual' || has(self.executors)"),
    ],
)
def test_cross_field_rules_are_cel(path, rule_fragment):
    nodes = dict(_walk(_schema()))
    rules = [r["rule"] for r in nodes[path].get("x-kubernetes-validations", [])]
    assert any(rule_fragment in r for r in rules), rules


def test_no_bound_is_exclusive():
    # pydantic writes gt/lt as numbers (JSON Schema 2020-12); Kubernetes' OpenAPI v3 wants booleans and
    # refuses the CRD (seen with scaling.targetUtilization)
    for path, node in _walk(_schema()):
        assert "exclusiveMinimum" not in node and "exclusiveMaximum" not in node, path


def test_defaults_reach_the_schema():
    nodes = dict(_walk(_schema()))
    assert nodes["openAPIV3Schema.spec.sources[].format"]["default"] == "json"
    # the volume fields have none: a defaulted one would make every app a volume app (checkpoint.py)
    assert "default" not in nodes["openAPIV3Schema.spec.state.checkpoint.accessModes"]
    assert nodes["openAPIV3Schema.spec.state.checkpoint"]["default"] == {}
    assert nodes["openAPIV3Schema.spec.state"]["default"] == {}
    assert nodes["openAPIV3Schema.spec.restartPolicy.maxBackoff"]["default"] == "5m"
    assert nodes["openAPIV3Schema.spec.streams[].steps[].accumulate.key"]["default"] == ["_key"]


def test_rules_of_an_object_defaulted_to_empty_guard_every_optional_field_they_read():
    # The API server checks a default against the object's rules before it fills in the fields' own
    # defaults: a rule reading self.x of a {} default without has(self.x) makes the CRD refused.
    for path, node in _walk(_schema()):
        if node.get("default") != {}:
            continue
        required = set(node.get("required", []))
        for rule in (r["rule"] for r in node.get("x-kubernetes-validations", [])):
            if set(re.findall(r"self\.(\w+)", rule)) - required:
                assert "has(self." in rule, f"{path}: {rule}"


def test_duration_pattern_is_shared_and_has_no_days_in_cel_duration():
    nodes = dict(_walk(_schema()))
    pattern = nodes["openAPIV3Schema.spec.restartPolicy.backoff"]["pattern"]
    assert pattern == nodes["openAPIV3Schema.spec.streams[].steps[].window.size"]["pattern"]
    # spec.trigger: a duration of the same form, or realtime
    trigger = nodes["openAPIV3Schema.spec.trigger"]["pattern"]
    assert re.match(trigger, "realtime") and re.match(trigger, "500ms") and not re.match(trigger, "1 minute")
    rules = " ".join(r["rule"] for r in nodes["openAPIV3Schema.spec.streams[].steps[].window"]["x-kubernetes-validations"])
    assert "duration(" not in rules  # CEL's duration() cannot parse '1d'; rules compare milliseconds


def test_structural_conversion_refuses_untyped_nodes():
    with pytest.raises(ValueError):
        crd_module._structural({"properties": {"x": {"description": "no type"}}}, {})
    with pytest.raises(ValueError):
        crd_module._structural({"anyOf": [{"type": "string"}, {"type": "integer"}]}, {})
