"""User mistakes (tests/manifests/mistakes/): each is refused by `streamapp validate`, naming the field,
with the message its header promises; most of them say what was probably meant ("did you mean").

Same header as tests/manifests/invalid/ (see test_api_manifests). These are complete StreamApps with
unique names, so the same files can be sent to an API server through the admission webhook.
"""

import pytest
import yaml

from streamapp_testbed.manifests import header, manifests
from test_api_manifests import assert_refused_naming_the_field

pytestmark = pytest.mark.unit
MISTAKES = manifests("mistakes")


def test_enough_mistakes_most_with_a_suggestion():
    fields = [header(p) for p in MISTAKES]
    assert len(MISTAKES) >= 15
    assert sum("did you mean" in f.get("message", "") for f in fields) >= 15
    names = [yaml.safe_load(p.read_text())["metadata"]["name"] for p in MISTAKES]
    assert len(set(names)) == len(names) and all(n.startswith("mistake-") for n in names)


@pytest.mark.parametrize("path", MISTAKES, ids=lambda p: p.stem)
def test_mistake_is_refused_naming_the_field(path):
    document = yaml.safe_load(path.read_text())
    assert (document["apiVersion"], document["kind"]) == ("streamapp.io/v1alpha1", "StreamApp")
    assert_refused_naming_the_field(path, refused_by=("validate",))
