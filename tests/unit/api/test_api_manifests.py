"""Every example validates; every invalid manifest is refused with a message naming its field.

Invalid manifests live in tests/manifests/invalid/, each starting with the comment lines
streamapp_testbed.manifests describes (apiserver: `kubectl apply --dry-run=server` must fail too).
`streamapp validate` must refuse all of them: it checks everything the API server checks and more.
"""

from pathlib import Path

import pytest
import yaml

from streamapp_api import load, validate
from streamapp_api.validate_cli import check_file
from streamapp_testbed.manifests import HEADER_FIELDS, header, manifests, names_field

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
INVALID = manifests("invalid")
SEED_SCENARIOS = {
    "click-sessions", "not-looking-at-facebook", "pos-invoices", "word-count", "log-routing",
    "stock-stats", "search-clicks", "profile-enrichment",
}


def test_one_example_per_seed_scenario():
    assert {p.stem for p in EXAMPLES} >= SEED_SCENARIOS


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_is_valid_and_commented(path):
    assert path.read_text().startswith("# "), "each example starts with a short comment"
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert documents
    for document in documents:
        issues = validate(document)
        assert [str(i) for i in issues] == []
        app = load(document)
        assert app.metadata.name == path.stem


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_says_in_its_header_what_a_default_cluster_lacks(path):
    """A user applies an example on kind, EKS or GKE as they come: whatever it needs beyond Kafka and
    the default StorageClass's ReadWriteOnce claim is said before the manifest starts."""
    head = path.read_text().split("\napiVersion:", 1)[0]
    assert "Before applying:" in head
    for document in (d for d in yaml.safe_load_all(path.read_text()) if d):
        app = load(document)
        checkpoint = app.spec.state.checkpoint
        for mode in checkpoint.access_modes or ():
            assert mode == "ReadWriteOnce" or mode in head, f"the header does not say it needs {mode}"
        secrets = {env.secret for sink in app.spec.sinks for env in sink.target.secret_env()}
        for name in secrets:
            assert f"Secret {name}" in head, f"the header does not say it needs the Secret {name}"


def test_enough_invalid_manifests_for_both_refusers():
    by = [header(p).get("refused-by") for p in INVALID]
    assert len(INVALID) >= 30
    assert set(by) == {"apiserver", "validate"}
    assert by.count("apiserver") >= 15


def assert_refused_naming_the_field(path: Path, refused_by: tuple[str, ...] = ("apiserver", "validate")) -> None:
    """``streamapp validate`` refuses the manifest at ``path`` as its header says, every finding on a line."""
    fields = header(path)
    assert set(HEADER_FIELDS) <= set(fields), f"{path.name}: header incomplete"
    assert fields["refused-by"] in refused_by
    (report,) = check_file(str(path))
    errors = [issue for issue, _ in report.issues if issue.severity == "error"]
    assert errors, f"{path.name} was accepted"
    matching = [i for i in errors if names_field(i.path, fields["expect"])]
    assert matching, f"no error names {fields['expect']}: {[str(i) for i in errors]}"
    assert any(fields["message"].lower() in i.message.lower() for i in matching), [str(i) for i in matching]
    assert all(line is not None for _, line in report.issues), "every finding points at a line"


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_manifest_is_refused_naming_the_field(path):
    assert_refused_naming_the_field(path)
