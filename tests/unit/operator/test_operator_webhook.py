"""The admission webhook's decision and its certificate (pure parts; the webhook on the real API
server: tests/operator/test_operator_admission.py)."""

from __future__ import annotations

import copy
import ssl

import pytest
from cryptography import x509

from streamapp_api import Policy
from streamapp_operator import webhook_tls
from streamapp_operator.webhook import verdict

from streamapp_testkit.operator_apps import BASE

pytestmark = pytest.mark.unit


def app(**spec) -> dict:
    document = copy.deepcopy(BASE)
    document["spec"].update(spec)
    return document


@pytest.mark.parametrize("new, old, refused", [
    (app(), None, []),
    (app(image="evil.example/x:1"), None, ["spec.image"]),
    (app(sparkConf={"spark.jars": "x.jar", "spark.plugins": "X"}), None,
     ["spec.sparkConf[spark.jars]", "spec.sparkConf[spark.plugins]"]),
    # an update is judged by its spec: the same spec passes even when today's policy refuses it
    (app(image="evil.example/x:1"), app(image="evil.example/x:1"), []),
    (app(image="evil.example/x:2"), app(image="evil.example/x:1"), ["spec.image"]),
    (app(sparkConf={"spark.jars": "x.jar"}), app(), ["spec.sparkConf[spark.jars]"]),
    # restoreFrom is read when a state generation starts: set only with a new resetNonce (on an update)
    (app(state={"restoreFrom": {"snapshot": "s1"}}), app(), ["spec.state.restoreFrom"]),
    (app(state={"restoreFrom": {"snapshot": "s1"}, "resetNonce": "2"}), app(), []),
    (app(state={"restoreFrom": {"snapshot": "s1"}}), None, []),  # a new app starts its first generation
    (app(), app(state={"restoreFrom": {"snapshot": "s1"}}), []),
])
def test_verdict(new, old, refused):
    result = verdict(new, old, Policy())
    assert [e.split(": ")[0] for e in result.errors] == refused
    assert all(path in result.message for path in refused)


def test_warnings_pass_and_are_reported():
    document = app(state={"checkpoint": {"size": "1Gi", "accessModes": ["ReadWriteOnce"]}}, executors=2)
    result = verdict(document, None, Policy())
    assert result.errors == () and any("ReadWriteMany" in w for w in result.warnings)


def cyclic() -> dict:
    document = app()
    document["spec"]["sparkConf"] = {"spark.sql.ansi.enabled": document["spec"]}  # only a client's bug makes one
    return document


@pytest.mark.parametrize("new, path", [
    (app(sparkConf={"spark.sql.ansi.enabled": "x" * 10_000_000}), "spec.sparkConf[spark.sql.ansi.enabled]"),
    (app(sparkConf={f"spark.sql.x{i}": "\u2028" for i in range(500)}), "spec.sparkConf[spark.sql.x0]"),
    ({**app(), "spec": ["not", "a", "mapping"]}, "spec"),
    (cyclic(), "spec"),
    (app(streams=[{"name": "s", "from": "clicks", "steps": [{"filter": "NOT " * 2000 + "true"}]}]),
     "spec.streams[0].steps[0].filter"),
])
def test_every_input_gets_an_answer_naming_a_field_never_an_exception(new, path):
    result = verdict(new, None, Policy())
    assert result.errors and result.errors[0].startswith(path)
    assert len(result.errors) <= 41 and len(result.message) < 50_000  # the answer stays small


def test_a_check_that_fails_is_a_refusal(monkeypatch):
    def broken(document, policy):
        raise KeyError("a bug of ours")

    monkeypatch.setattr("streamapp_operator.webhook.parse", broken)
    assert verdict(app(), None, Policy()).errors == ("(document): could not be checked (KeyError); refused",)


def test_the_operators_own_certificate_serves_the_service_and_loopback(tmp_path):
    files = webhook_tls.make_serving_files(tmp_path, webhook_tls.service_dns_names("op-webhook.ops"), ["127.0.0.1"])
    cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
    ca = x509.load_pem_x509_certificate(files.ca.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.DNSName)) == {
        "op-webhook", "op-webhook.ops", "op-webhook.ops.svc", "op-webhook.ops.svc.cluster.local"}
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    cert.verify_directly_issued_by(ca)
    assert files.key.stat().st_mode & 0o077 == 0
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(files.cert, files.key)  # a key that matches the certificate


def test_ca_bundle_patch_touches_only_webhooks_without_our_ca():
    ca = b"-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"
    ours = webhook_tls.ca_bundle_patch({"webhooks": [{"clientConfig": {}}]}, ca)[0]["value"]
    configuration = {"webhooks": [{"clientConfig": {"caBundle": ours}}, {"clientConfig": {"url": "https://x"}}]}
    assert webhook_tls.ca_bundle_patch(configuration, ca) == [
        {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": ours}]
    assert webhook_tls.ca_bundle_patch({"webhooks": [{"clientConfig": {"caBundle": ours}}]}, ca) == []


def test_replicas_sharing_the_ca_secret_inject_one_bundle_that_trusts_each_ones_certificate(tmp_path):
    secret = webhook_tls.ca_secret("ops", "op-webhook-ca", webhook_tls.new_ca())
    assert secret["metadata"] == {"name": "op-webhook-ca", "namespace": "ops",
                                  "labels": {"app.kubernetes.io/component": "webhook-ca"}}
    first, second = (webhook_tls.make_serving_files(tmp_path / replica, ["op-webhook.ops.svc"], [],
                                                    webhook_tls.ca_from_secret(secret)) for replica in ("a", "b"))
    assert first.ca.read_bytes() == second.ca.read_bytes()  # the bundle each injects: nothing flaps
    assert webhook_tls.ca_bundle_patch({"webhooks": [{"clientConfig": {}}]}, first.ca.read_bytes()) == \
        webhook_tls.ca_bundle_patch({"webhooks": [{"clientConfig": {}}]}, second.ca.read_bytes())
    assert first.cert.read_bytes() != second.cert.read_bytes()  # each signs its own
    ca = x509.load_pem_x509_certificate(first.ca.read_bytes())
    for files in (first, second):
        x509.load_pem_x509_certificate(files.cert.read_bytes()).verify_directly_issued_by(ca)


def test_a_secret_without_a_usable_ca_is_refused_by_name():
    good = webhook_tls.ca_secret("ops", "ca", webhook_tls.new_ca())
    other = webhook_tls.ca_secret("ops", "ca", webhook_tls.new_ca())
    mismatched = {**good, "data": {"ca.crt": good["data"]["ca.crt"], "ca.key": other["data"]["ca.key"]}}
    for secret, says in (({"metadata": {"name": "ca"}, "data": {"tls.crt": "eA=="}}, "holds no webhook CA"),
                         ({**good, "data": {**good["data"], "ca.key": "bm90IGEga2V5"}}, "holds no webhook CA"),
                         (mismatched, "is not the certificate of ca.key")):
        with pytest.raises(ValueError, match=says):
            webhook_tls.ca_from_secret(secret)
