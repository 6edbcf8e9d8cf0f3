"""User mistakes (tests/manifests/mistakes/): each is refused by `streamapp validate`, naming the field,
with the message its header promises; most of them say what was probably meant ("did you mean").

Same header as tests/manifests/invalid/ (see test_api_manifests). These are complete StreamApps with
unique names, so the same files can be sent to an API server through the admission webhook.
"""

from pathlib import Path

import pytest
import yaml

from streamapp_api.validate_cli import check_file
from test_api_manifests import header, names_field

pytestmark = pytest.mark.unit
MISTAKES = sorted((Path(__file__).resolve().parents[2] / "tests" / "manifests" / "mistakes").glob("*.yaml"))


def test_enough_mistakes_most_with_a_suggestion():
    fields = [header(p) for p in MISTAKES]
    assert len(MISTAKES) >= 15
    assert sum("did you mean" in f.get("message", "") for f in fields) >= 15
    names = [yaml.safe_load(p.read_text())["metadata"]["name"] for p in MISTAKES]
    assert len(set(names)) == len(names) and all(n.startswith("mistake-") for n in names)


@pytest.mark.parametrize("path", MISTAKES, ids=lambda p: p.stem)
def test_mistake_is_refused_naming_the_field(path):
    fields = header(path)
    assert {"expect", "refused-by", "message", "why"} <= set(fields), f"{path.name}: header incomplete"
    assert fields["refused-by"] == "validate"
    document = yaml.safe_load(path.read_text())
    assert (document["apiVersion"], document["kind"]) == ("streamapp.io/v1alpha1", "StreamApp")
    (report,) = check_file(str(path))
    errors = [issue for issue, _ in report.issues if issue.severity == "error"]
    assert errors, f"{path.name} was accepted"
    matching = [i for i in errors if names_field(i.path, fields["expect"])]
    assert matching, f"no error names {fields['expect']}: {[str(i) for i in errors]}"
    assert any(fields["message"].lower() in i.message.lower() for i in matching), [str(i) for i in matching]
    assert all(line is not None for _, line in report.issues), "every finding points at a line"
