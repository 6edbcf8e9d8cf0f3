"""The generated CRD on the test bed's real API server: the examples are accepted, the schema and
CEL rules refuse what they can with the field named, and kubectl explain / scale / get work."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from streamapp_testbed.paths import REPO_DIR

pytestmark = pytest.mark.integration

CRD = REPO_DIR / "crds" / "streamapp.io_streamapps.yaml"
EXAMPLES = sorted((REPO_DIR / "examples").glob("*.yaml"))
INVALID = sorted((REPO_DIR / "tests" / "manifests" / "invalid").glob("*.yaml"))


def _header(path: Path) -> dict[str, str]:
    """The `# key: value` lines an invalid manifest starts with (expect, refused-by, message, why)."""
    header = {}
    for line in path.read_text().splitlines():
        if not line.startswith("# "):
            break
        key, _, value = line[2:].partition(": ")
        header[key] = value
    return header


def _refused_by(by: str) -> list[Path]:
    return [p for p in INVALID if _header(p)["refused-by"] == by]


@pytest.fixture(scope="module")
def crd(control_plane):
    control_plane.kubectl("apply", "--server-side", "-f", str(CRD))
    control_plane.kubectl("wait", "--for=condition=Established", "crd/streamapps.streamapp.io", "--timeout=60s")
    # Established comes before the schema is published to discovery and OpenAPI (what explain reads).
    deadline = time.monotonic() + 60
    while control_plane.kubectl("explain", "streamapp.spec", check=False).returncode != 0:
        assert time.monotonic() < deadline, "the StreamApp schema never reached the API server's OpenAPI"
        time.sleep(0.5)
    return control_plane


def test_there_are_examples_and_enough_invalid_manifests():
    assert len(EXAMPLES) >= 8
    assert len(INVALID) >= 30
    assert _refused_by("apiserver") and _refused_by("validate")


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_example_is_accepted_by_the_api_server(crd, example):
    result = crd.kubectl("apply", "--dry-run=server", "-n", "default", "-f", str(example), check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("manifest", _refused_by("apiserver"), ids=lambda p: p.stem)
def test_api_server_refuses_and_names_the_field(crd, manifest):
    expect = _header(manifest)["expect"]

    result = crd.kubectl("apply", "--dry-run=server", "-n", "default", "-f", str(manifest), check=False)

    assert result.returncode != 0, f"{manifest.name} was accepted"
    assert "StreamApp" in result.stderr
    assert expect in result.stderr, result.stderr


@pytest.mark.parametrize("manifest", _refused_by("validate"), ids=lambda p: p.stem)
def test_semantic_errors_pass_the_schema_and_are_left_to_validate(crd, manifest):
    # What the schema cannot express (references, emit modes, ...) must not be half-checked by it:
    # the API server accepts these, and `streamapp validate` (tests/unit) refuses them.
    result = crd.kubectl("apply", "--dry-run=server", "-n", "default", "-f", str(manifest), check=False)
    assert result.returncode == 0, result.stderr


def test_kubectl_explain_shows_the_field_documentation(crd):
    out = crd.kubectl("explain", "streamapp.spec.sources").stdout
    assert "KStream" in out
    assert "eventTime" in out and "watermark" in out

    window = crd.kubectl("explain", "streamapp.spec.streams.steps.window").stdout
    assert "tumbling" in window and "hopping" in window and "session" in window


def test_kubectl_scale_sets_executors_and_get_shows_the_printer_columns(crd):
    crd.kubectl("create", "namespace", "api-scale", check=False)
    crd.kubectl("apply", "-n", "api-scale", "-f", str(REPO_DIR / "examples" / "word-count.yaml"))
    name = yaml.safe_load((REPO_DIR / "examples" / "word-count.yaml").read_text())["metadata"]["name"]

    crd.kubectl("scale", "-n", "api-scale", f"sapp/{name}", "--replicas=4")

    app = json.loads(crd.kubectl("get", "-n", "api-scale", f"sapp/{name}", "-o", "json").stdout)
    assert app["spec"]["executors"] == 4
    refused = crd.kubectl("scale", "-n", "api-scale", f"sapp/{name}", "--replicas=0", check=False)
    assert refused.returncode != 0
    header = crd.kubectl("get", "-n", "api-scale", "sapp").stdout.splitlines()[0].split()
    assert header == ["NAME", "PHASE", "REASON", "EXECUTORS", "PARTITIONS", "LAG", "RESTARTS", "AGE"]
    crd.kubectl("delete", "namespace", "api-scale", "--wait=false")
