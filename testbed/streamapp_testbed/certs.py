"""The test bed's PKI, made with the openssl command: a CA, the API server's serving certificate,
an admin client certificate (group system:masters) and the service-account signing key pair; and the
Kafka broker's own CA, serving and client certificates (``make_ca``, ``serving_cert``, ``client_cert``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .process import run

SERVING_NAMES = [
    "DNS:localhost",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    "DNS:kubernetes.default.svc.cluster.local",
    "IP:127.0.0.1",
    "IP:10.0.0.1",  # first address of the service range: the `kubernetes` Service
]


@dataclass(frozen=True)
class Pki:
    dir: Path

    ca_cert = property(lambda self: self.dir / "ca.crt")
    ca_key = property(lambda self: self.dir / "ca.key")
    serving_cert = property(lambda self: self.dir / "apiserver.crt")
    serving_key = property(lambda self: self.dir / "apiserver.key")
    admin_cert = property(lambda self: self.dir / "admin.crt")
    admin_key = property(lambda self: self.dir / "admin.key")
    sa_key = property(lambda self: self.dir / "sa.key")
    sa_pub = property(lambda self: self.dir / "sa.pub")


def _sign(pki: Pki, name: str, subject: str, extensions: str) -> None:
    key, csr, crt, ext = (pki.dir / f"{name}.{s}" for s in ("key", "csr", "crt", "ext"))
    ext.write_text(extensions)
    run(["openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", subject])
    run(
        ["openssl", "x509", "-req", "-in", csr, "-CA", pki.ca_cert, "-CAkey", pki.ca_key, "-CAcreateserial",
         "-out", crt, "-days", "30", "-sha256", "-extfile", ext]
    )  # fmt: skip


def client_cert(pki: Pki, name: str, user: str) -> tuple[Path, Path]:
    """A client certificate for `user` (its CN)."""
    _sign(pki, name, f"/CN={user}",
          "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n")
    return pki.dir / f"{name}.crt", pki.dir / f"{name}.key"


def serving_cert(pki: Pki, name: str, subject_alt_names: list[str]) -> tuple[Path, Path]:
    """A server certificate for these names (``DNS:localhost``, ``IP:127.0.0.1``)."""
    _sign(pki, name, f"/CN={name}", "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
          f"extendedKeyUsage=serverAuth\nsubjectAltName={','.join(subject_alt_names)}\n")
    return pki.dir / f"{name}.crt", pki.dir / f"{name}.key"


def make_ca(directory: Path, name: str = "streamapp-testbed-ca") -> Pki:
    """A new CA in `directory` (ca.crt, ca.key), valid 30 days."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory)
    run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", pki.ca_key, "-out", pki.ca_cert,
         "-days", "30", "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"]
    )  # fmt: skip
    return pki


def make_pki(directory: Path) -> Pki:
    """The kube-apiserver's CA, serving certificate (SERVING_NAMES), admin client certificate and
    service-account key pair."""
    pki = make_ca(directory)
    _sign(
        pki, "apiserver", "/CN=kube-apiserver",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        f"extendedKeyUsage=serverAuth\nsubjectAltName={','.join(SERVING_NAMES)}\n",
    )  # fmt: skip
    _sign(
        pki, "admin", "/O=system:masters/CN=streamapp-testbed-admin",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n",
    )  # fmt: skip
    run(["openssl", "genrsa", "-out", pki.sa_key, "2048"])
    run(["openssl", "rsa", "-in", pki.sa_key, "-pubout", "-out", pki.sa_pub])
    return pki
