"""The admission webhook's serving certificate when cert-manager does not provide one.

Each operator replica signs a serving certificate of its own for the webhook Service's DNS names (and
loopback, for an operator run outside the cluster), writes it to a directory kopf's WebhookServer reads,
and puts the CA into the ValidatingWebhookConfiguration (``inject_ca_bundle``). The CA is one for all
replicas: kept in a Secret of the operator's namespace (``ca_secret``), made by the first replica that
finds none, so every replica injects the same bundle and each one's certificate is trusted by it.
Without that Secret (one replica run by hand) the process makes a CA of its own at start.
"""

from __future__ import annotations

import base64
import ipaddress
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = timedelta(days=5 * 365)  # outlives any operator pod; a restart renews it
WEBHOOK_CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
CA_NAME = "streamapp-operator webhook CA"
CA_CERT_KEY, CA_KEY_KEY = "ca.crt", "ca.key"  # keys of the CA Secret's data


@dataclass(frozen=True)
class ServingFiles:
    ca: Path
    cert: Path
    key: Path


def service_dns_names(service: str) -> list[str]:
    """'name.namespace' -> the names the API server may use to reach the Service."""
    name, _, namespace = service.partition(".")
    if not namespace:
        return [name]
    return [name, f"{name}.{namespace}", f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local"]


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


@dataclass(frozen=True)
class CertificateAuthority:
    cert: bytes  # PEM
    key: bytes  # PEM, PKCS8


def new_ca(now: datetime | None = None) -> CertificateAuthority:
    now = now or datetime.now(timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(CA_NAME)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return CertificateAuthority(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def make_serving_files(directory: Path, dns_names: list[str], ips: list[str], ca: CertificateAuthority | None = None,
                       now: datetime | None = None) -> ServingFiles:
    """A certificate ``ca`` (default: a new one) signs for ``dns_names`` and ``ips``, and the CA, as PEM
    files in ``directory``."""
    now = now or datetime.now(timezone.utc)
    ca = ca or new_ca(now)
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the webhook CA's key is not an EC key")
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName(n) for n in dns_names] + [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    cert = (x509.CertificateBuilder().subject_name(_name((dns_names or ips)[0])).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5)).not_valid_after(min(now + VALIDITY, ca_cert.not_valid_after_utc))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    directory.mkdir(parents=True, exist_ok=True)
    files = ServingFiles(directory / "ca.crt", directory / "tls.crt", directory / "tls.key")
    files.ca.write_bytes(ca.cert)
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.touch(mode=0o600)
    files.key.write_bytes(_pem_key(key))
    return files


def ca_secret(namespace: str, name: str, ca: CertificateAuthority) -> dict:
    """The Secret the replicas share their CA by."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/component": "webhook-ca"}},
            "data": {CA_CERT_KEY: base64.b64encode(ca.cert).decode(), CA_KEY_KEY: base64.b64encode(ca.key).decode()}}


def ca_from_secret(secret: dict) -> CertificateAuthority:
    """The CA a Secret made by ``ca_secret`` holds (ValueError when it holds none that can sign)."""
    data = secret.get("data") or {}
    try:
        ca = CertificateAuthority(base64.b64decode(data[CA_CERT_KEY]), base64.b64decode(data[CA_KEY_KEY]))
        cert = x509.load_pem_x509_certificate(ca.cert)
        key = serialization.load_pem_private_key(ca.key, password=None)
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"Secret {secret['metadata']['name']} holds no webhook CA ({CA_CERT_KEY}, {CA_KEY_KEY}): {exc}") from exc
    if cert.public_key().public_numbers() != key.public_key().public_numbers():  # type: ignore[union-attr]
        raise ValueError(f"Secret {secret['metadata']['name']}: {CA_CERT_KEY} is not the certificate of {CA_KEY_KEY}")
    return ca


def ca_bundle_patch(configuration: dict, ca_pem: bytes) -> list[dict]:
    """A JSON patch that sets ``caBundle`` on every webhook of the configuration (empty: nothing to do)."""
    bundle = base64.b64encode(ca_pem).decode("ascii")
    return [{"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
            for i, webhook in enumerate(configuration.get("webhooks") or [])
            if webhook.get("clientConfig", {}).get("caBundle") != bundle]
