"""The validating admission webhook: a StreamApp that ``streamapp validate`` refuses (the API's checks
and the cluster's policy) is refused at ``kubectl apply``, naming every field and why.

Served by the operator through kopf's admission support. The ValidatingWebhookConfiguration belongs
to whoever installs the operator (the chart; a test), not to kopf: it decides which namespaces are
checked, the failure policy and the timeout. The operator only fills in ``caBundle`` when it made its
own certificate (``webhook_tls``); with cert-manager, cert-manager does.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

import kopf

from streamapp_api import GROUP, PLURAL, VERSION, Policy, parse
from streamapp_api.rules import check_change

from . import webhook_tls
from .kubeapi import Kube

HANDLER_ID = "validate-streamapp"  # the path the API server posts to: https://<service>/validate-streamapp
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Verdict:
    errors: tuple[str, ...]
    warnings: tuple[str, ...]

    @property
    def message(self) -> str:
        return "; ".join(self.errors)


def verdict(new: dict, old: dict | None, policy: Policy) -> Verdict:
    """What admission says of a create (``old`` None) or an update. An update that leaves the spec as it
    was (labels, annotations, the operator's own bookkeeping) is let through: the app was admitted
    under the policy of its day, and the operator reports in status what today's policy says of it."""
    if old is not None and old.get("spec") == new.get("spec"):
        return Verdict((), ())
    document = {k: v for k, v in new.items() if k != "status"}
    try:
        _, issues = parse(document, policy)
    except Exception as exc:  # noqa: BLE001 - refuse what cannot be checked, with an answer, never a 500
        log.exception("admission: the check failed on %s", (new.get("metadata") or {}).get("name"))
        return Verdict((f"(document): could not be checked ({type(exc).__name__}); refused",), ())
    if old is not None:  # what only an update can get wrong (the twins of the CRD's transition rules)
        issues = [*issues, *check_change(old.get("spec"), new.get("spec"))]
    errors = [f"{i.path}: {i.message}" for i in issues if i.severity == "error"]
    warnings = [f"{i.path}: {i.message}" for i in issues if i.severity != "error"]
    return Verdict(_at_most(errors), _at_most(warnings))


MAX_REPORTED = 40  # findings per answer: every one names its field, and the answer stays small


def _at_most(findings: list[str]) -> tuple[str, ...]:
    if len(findings) <= MAX_REPORTED:
        return tuple(findings)
    return (*findings[:MAX_REPORTED], f"... and {len(findings) - MAX_REPORTED} more (streamapp validate lists all)")


@dataclass(frozen=True)
class WebhookOptions:
    port: int
    address: str = "0.0.0.0"
    service: str | None = None  # "name.namespace": DNS names of the serving certificate
    hosts: tuple[str, ...] = ()  # more names or IPs the API server uses (an operator outside the cluster)
    configuration: str | None = None  # the ValidatingWebhookConfiguration to put our CA into
    cert_dir: str | None = None  # tls.crt and tls.key from cert-manager: no CA of our own
    ca_secret: str | None = None  # "namespace/name": the Secret the replicas share their CA by


def serving_files(options: WebhookOptions, ca: webhook_tls.CertificateAuthority | None = None) -> webhook_tls.ServingFiles:
    if options.cert_dir:
        directory = Path(options.cert_dir)
        return webhook_tls.ServingFiles(directory / "ca.crt", directory / "tls.crt", directory / "tls.key")
    ips = [h for h in options.hosts if h.replace(".", "").isdigit() or ":" in h]
    dns = [*(webhook_tls.service_dns_names(options.service) if options.service else []),
           *(h for h in options.hosts if h not in ips)]
    return webhook_tls.make_serving_files(Path(tempfile.mkdtemp(prefix="streamapp-webhook-")), dns, ips, ca)


def shared_ca(kube: Kube, secret: str) -> webhook_tls.CertificateAuthority:
    """The replicas' one CA, from the Secret ``secret`` ('namespace/name'); the first replica to find no
    Secret makes the CA and creates it. Two that start together both try: the create that loses (409)
    reads the winner's."""
    namespace, _, name = secret.partition("/")
    for _ in range(3):
        found = kube.get("Secret", namespace, name)
        if found is not None:
            return webhook_tls.ca_from_secret(found)
        ca = webhook_tls.new_ca()
        if kube.create(webhook_tls.ca_secret(namespace, name, ca)) is not None:
            log.info("admission webhook: made the CA in Secret %s", secret)
            return ca
    raise RuntimeError(f"Secret {secret}: created and deleted again while the operator started; start again")


def inject_ca_bundle(kube: Kube, configuration: str, ca_pem: bytes) -> bool:
    """Put our CA into every webhook of ``configuration`` (True when it had to change)."""
    url = f"{webhook_tls.WEBHOOK_CONFIGURATIONS}/{configuration}"
    patch = webhook_tls.ca_bundle_patch(kube.request("GET", url), ca_pem)
    if patch:
        kube.request("PATCH", url, body=patch, content_type="application/json-patch+json")
    return bool(patch)


def enable(policy: Policy, options: WebhookOptions) -> None:
    """Register the admission handler and serve it once the operator starts (call before kopf.run)."""

    @kopf.on.validate(GROUP, VERSION, PLURAL, id=HANDLER_ID, operations=["CREATE", "UPDATE"])
    def validate_streamapp(body: kopf.Body, old: kopf.Body | None, warnings: list[str], **_) -> None:
        result = verdict(dict(body), dict(old) if old else None, policy)
        warnings.extend(result.warnings)
        if result.errors:
            raise kopf.AdmissionError(result.message, code=422)

    @kopf.on.startup()
    def serve_admission(settings: kopf.OperatorSettings, **_) -> None:
        shared = options.ca_secret and not options.cert_dir
        files = serving_files(options, shared_ca(Kube(fan_out=1), options.ca_secret) if shared else None)
        settings.admission.server = kopf.WebhookServer(
            addr=options.address, port=options.port, certfile=str(files.cert), pkeyfile=str(files.key),
            cafile=str(files.ca) if files.ca.exists() else None)
        settings.admission.managed = None  # the configuration is the installer's (see the module doc)
        if options.configuration and not options.cert_dir:
            changed = inject_ca_bundle(Kube(fan_out=1), options.configuration, files.ca.read_bytes())
            log.info("admission webhook: CA %s in ValidatingWebhookConfiguration %s",
                     "put" if changed else "already", options.configuration)
