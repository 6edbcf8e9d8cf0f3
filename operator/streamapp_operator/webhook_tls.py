"""The admission webhook's serving certificate when cert-manager does not provide one.

The operator makes a CA of its own at start, signs a serving certificate for the webhook Service's DNS
names (and loopback, for an operator run outside the cluster), writes both to a directory kopf's
WebhookServer reads, and puts the CA into the ValidatingWebhookConfiguration (``inject_ca_bundle``).
The CA's key never leaves the process; a restart makes a new pair and injects the new CA.
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


def make_serving_files(directory: Path, dns_names: list[str], ips: list[str], now: datetime | None = None) -> ServingFiles:
    """A new CA and a certificate it signs for ``dns_names`` and ``ips``, as PEM files in ``directory``."""
    now = now or datetime.now(timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("streamapp-operator webhook CA")
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(minutes=5))
          .not_valid_after(now + VALIDITY)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName(n) for n in dns_names] + [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    cert = (x509.CertificateBuilder().subject_name(_name((dns_names or ips)[0])).issuer_name(ca_name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + VALIDITY)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    directory.mkdir(parents=True, exist_ok=True)
    files = ServingFiles(directory / "ca.crt", directory / "tls.crt", directory / "tls.key")
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.touch(mode=0o600)
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return files


def ca_bundle_patch(configuration: dict, ca_pem: bytes) -> list[dict]:
    """A JSON patch that sets ``caBundle`` on every webhook of the configuration (empty: nothing to do)."""
    bundle = base64.b64encode(ca_pem).decode("ascii")
    return [{"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
            for i, webhook in enumerate(configuration.get("webhooks") or [])
            if webhook.get("clientConfig", {}).get("caBundle") != bundle]
