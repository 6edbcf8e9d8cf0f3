"""Spark's web UI on each driver: its Spark settings, the Service ``<app>-ui``, an optional Ingress, its address.

The UI is on unless the operator is told otherwise (``--no-spark-ui``); an app's own
``sparkConf: {spark.ui.enabled: ...}`` wins either way, so one app can turn it off (or on). The
runtime's own default, for ``streamapp run`` outside the operator, stays off: nothing there to show it.
The Service exists whether or not the UI is on (it is cheap, and an app that turns its UI on later
needs no new object); ``status.uiURL`` is set only while the app's UI is on.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from streamapp_api import StreamApp

from .. import names
from .common import metadata, namespace_of

UI_ENABLED = "spark.ui.enabled"
# Operator-owned whatever the app says: the port the Service points at, and no "kill" links, so that
# whoever can reach the UI cannot fail a streaming query (a killed stage stops it and the driver).
UI_CONF = {"spark.ui.port": str(names.UI_PORT), "spark.ui.killEnabled": "false"}
HOST_FIELDS = ("name", "namespace")


@dataclass(frozen=True)
class UIIngress:
    """An Ingress per app: ``host`` and ``tls_secret`` are templates of ``{name}`` and ``{namespace}``."""

    host: str
    class_name: str | None = None
    annotations: tuple[tuple[str, str], ...] = ()
    tls_secret: str | None = None  # None: plain HTTP (TLS ended elsewhere, or none)

    def fill(self, template: str, app: StreamApp) -> str:
        return template.format(name=app.metadata.name, namespace=namespace_of(app))


@dataclass(frozen=True)
class SparkUI:
    """The operator's Spark UI settings: on by default for apps whose sparkConf does not say; an Ingress."""

    enabled: bool = True
    ingress: UIIngress | None = None


DEFAULT_UI = SparkUI()


def ui_on(app: StreamApp, ui: SparkUI) -> bool:
    """Whether the app's driver serves the UI: its sparkConf's spark.ui.enabled (read as Spark reads a
    boolean), else the operator's default."""
    given = (app.spec.spark_conf or {}).get(UI_ENABLED)
    return ui.enabled if given is None else given.strip().lower() == "true"


def spark_ui_conf(app: StreamApp, ui: SparkUI) -> dict[str, str]:
    return {UI_ENABLED: "true" if ui_on(app, ui) else "false", **UI_CONF}


def ui_url(app: StreamApp, ui: SparkUI) -> str | None:
    """The UI's address for status.uiURL: the Ingress's when there is one, else the Service's in the
    cluster; None while the app's UI is off."""
    if not ui_on(app, ui):
        return None
    if ui.ingress is not None:
        scheme = "https" if ui.ingress.tls_secret else "http"
        return f"{scheme}://{ui.ingress.fill(ui.ingress.host, app)}/"
    return f"http://{names.ui_service(app.metadata.name)}.{namespace_of(app)}.svc:{names.UI_PORT}"


def render_ui_service(app: StreamApp, uid: str) -> dict:
    name = app.metadata.name
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(app, uid, names.ui_service(name), "ui"),
        "spec": {
            "type": "ClusterIP",
            "selector": {names.LABEL_APP: name, names.LABEL_COMPONENT: "driver"},
            "ports": [{"name": "ui", "port": names.UI_PORT, "targetPort": "ui", "protocol": "TCP"}],
        },
    }


def render_ui_ingress(app: StreamApp, uid: str, ingress: UIIngress) -> dict:
    name = app.metadata.name
    host = ingress.fill(ingress.host, app)
    spec: dict = {"rules": [{"host": host, "http": {"paths": [{
        "path": "/", "pathType": "Prefix",
        "backend": {"service": {"name": names.ui_service(name), "port": {"name": "ui"}}},
    }]}}]}
    if ingress.class_name:
        spec["ingressClassName"] = ingress.class_name
    if ingress.tls_secret:
        spec["tls"] = [{"hosts": [host], "secretName": ingress.fill(ingress.tls_secret, app)}]
    extra = {"annotations": dict(ingress.annotations)} if ingress.annotations else {}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": metadata(app, uid, names.ui_ingress(name), "ui", **extra),
        "spec": spec,
    }


def _template(text: str, option: str) -> str:
    try:
        text.format(**dict.fromkeys(HOST_FIELDS, "x"))
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"{option} {text!r}: only {{name}} and {{namespace}} may be filled in ({exc})") from None
    return text


def _annotation(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--spark-ui-ingress-annotation {text!r}: use KEY=VALUE")
    return key.strip(), value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command-line options of the Spark UI (the operator's and `streamapp render`'s)."""
    group = parser.add_argument_group("Spark UI (docs/operator.md, 'Spark UI')")
    group.add_argument("--no-spark-ui", dest="spark_ui", action="store_false",
                       help="drivers start without Spark's web UI unless their sparkConf sets spark.ui.enabled "
                            "(default: with it, on port 4040 behind the Service <app>-ui)")
    group.add_argument("--spark-ui-ingress-host", default=None, metavar="TEMPLATE",
                       help="give every app an Ingress to its UI at this host, e.g. {name}.{namespace}.spark.example.com")
    group.add_argument("--spark-ui-ingress-class", default=None, metavar="NAME", help="the Ingresses' ingressClassName")
    group.add_argument("--spark-ui-ingress-annotation", action="append", default=[], metavar="KEY=VALUE",
                       help="an annotation of the Ingresses (repeatable)")
    group.add_argument("--spark-ui-ingress-tls-secret", default=None, metavar="TEMPLATE",
                       help="the TLS Secret of the Ingresses, e.g. {name}-ui-tls (default: plain HTTP)")


def from_arguments(args: argparse.Namespace) -> SparkUI:
    """The settings. ValueError names a malformed option."""
    ingress = None
    if args.spark_ui_ingress_host:
        ingress = UIIngress(
            host=_template(args.spark_ui_ingress_host, "--spark-ui-ingress-host"),
            class_name=args.spark_ui_ingress_class or None,
            annotations=tuple(sorted(_annotation(a) for a in args.spark_ui_ingress_annotation)),
            tls_secret=_template(args.spark_ui_ingress_tls_secret, "--spark-ui-ingress-tls-secret")
            if args.spark_ui_ingress_tls_secret else None,
        )
    return SparkUI(enabled=args.spark_ui, ingress=ingress)
