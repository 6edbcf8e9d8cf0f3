"""The per-app NetworkPolicy (``--network-policies``): who may reach an app's pods and where they may go.

Ingress: the app's own pods (driver ⇄ executors: RPC, block manager, any port), the driver's
metrics port from the operator and from the monitoring namespaces, and the driver's Spark UI port from
the namespaces allowed to it (an ingress controller's; ``kubectl port-forward`` is not pod ingress: the
kubelet's runtime connects inside the pod's network namespace, so no policy stands in its way). Egress: the app's own pods, and
anywhere on a list of ports (DNS, the API server, Kafka, Postgres, HTTPS object storage), optionally
only to some address ranges. A NetworkPolicy cannot name Kafka's brokers (it knows pods and address
ranges, not host names), so ports are what can be said without knowing the user's network.
"""

from __future__ import annotations

import argparse
import ipaddress
import re
from dataclasses import dataclass

from streamapp_api import StreamApp

from .. import names
from .common import metadata

# DNS, the API server (443 through its Service, 6443 as the endpoint most clusters DNAT to), Postgres,
# Kafka's usual listeners (9092 plaintext … 9094, MSK's 9096 SASL/SCRAM and 9098 IAM).
DEFAULT_EGRESS = "53/UDP,53/TCP,443,6443,5432,9092-9098"
_PORT = re.compile(r"^(\d{1,5})(?:-(\d{1,5}))?(?:/(TCP|UDP|SCTP))?$", re.IGNORECASE)
_LABEL = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_./]*)=([-A-Za-z0-9_.]*)$")


@dataclass(frozen=True)
class Port:
    port: int
    end: int | None = None  # a range port..end
    protocol: str = "TCP"

    def render(self) -> dict:
        out: dict = {"protocol": self.protocol, "port": self.port}
        if self.end is not None:
            out["endPort"] = self.end
        return out


@dataclass(frozen=True)
class NetworkPolicies:
    """The operator's settings for the per-app NetworkPolicy."""

    egress_ports: tuple[Port, ...] | None = None  # None: egress anywhere (not restricted)
    egress_cidrs: tuple[str, ...] = ()  # () : the ports above to any address
    metrics_namespaces: tuple[tuple[str, str], ...] | None = None  # namespace matchLabels; None: every namespace
    operator_namespace: str | None = None  # the operator's pods (they read each driver's /metrics)
    operator_labels: tuple[tuple[str, str], ...] = ()
    ui_namespaces: tuple[tuple[str, str], ...] | None = None  # namespace matchLabels; None: every namespace


def parse_ports(text: str) -> tuple[Port, ...] | None:
    """``53/UDP,443,9092-9098`` → ports; ``all`` → None (egress not restricted)."""
    text = text.strip()
    if text.lower() == "all":
        return None
    ports = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        match = _PORT.match(item)
        if not match:
            raise ValueError(f"{item!r} is not a port: use PORT, PORT/PROTOCOL or FIRST-LAST (e.g. 53/UDP, 9092-9098)")
        first, last, protocol = int(match[1]), int(match[2]) if match[2] else None, (match[3] or "TCP").upper()
        if not 1 <= first <= 65535 or (last is not None and not first < last <= 65535):
            raise ValueError(f"{item!r}: ports are 1-65535, and a range's first port is below its last")
        ports.append(Port(first, last, protocol))
    return tuple(ports)


def parse_cidrs(text: str) -> tuple[str, ...]:
    cidrs = tuple(filter(None, (c.strip() for c in text.split(","))))
    for cidr in cidrs:
        ipaddress.ip_network(cidr)  # ValueError names it
    return cidrs


def parse_labels(text: str) -> tuple[tuple[str, str], ...]:
    """``a=b,c=d`` → (("a", "b"), ("c", "d"))."""
    pairs = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        match = _LABEL.match(item)
        if not match:
            raise ValueError(f"{item!r} is not a label: use key=value")
        pairs.append((match[1], match[2]))
    return tuple(pairs)


def parse_operator(text: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """``NAMESPACE/key=value,…`` → (namespace, labels)."""
    namespace, _, labels = text.partition("/")
    if not namespace or not labels:
        raise ValueError(f"{text!r}: use NAMESPACE/key=value[,key=value] (the operator's namespace and pod labels)")
    return namespace, parse_labels(labels)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command-line options of the per-app NetworkPolicy (the operator's and `streamapp render`'s)."""
    group = parser.add_argument_group("per-app NetworkPolicy (docs/operator.md, 'Spark traffic and network')")
    group.add_argument("--network-policies", action="store_true",
                       help="give every app a NetworkPolicy (default: none)")
    group.add_argument("--network-policy-egress", default=DEFAULT_EGRESS, metavar="PORTS",
                       help="ports the app's pods may reach anywhere besides each other, e.g. 53/UDP,443,9092-9098; "
                            f"'all': egress not restricted (default: {DEFAULT_EGRESS})")
    group.add_argument("--network-policy-egress-cidrs", default="", metavar="CIDRS",
                       help="only to these address ranges (comma-separated; default: any address)")
    group.add_argument("--network-policy-metrics-from", default=None, metavar="LABELS",
                       help="namespaces (key=value labels, comma-separated) whose pods may read the drivers' "
                            "metrics; default: every namespace")
    group.add_argument("--network-policy-operator", default=None, metavar="NAMESPACE/LABELS",
                       help="the operator's namespace and pod labels, allowed to the drivers' metrics")
    group.add_argument("--network-policy-ui-from", default=None, metavar="LABELS",
                       help="namespaces (key=value labels, comma-separated) whose pods may reach the drivers' Spark "
                            "UI, e.g. the ingress controller's; default: every namespace")


def from_arguments(args: argparse.Namespace) -> NetworkPolicies | None:
    """The settings, or None without --network-policies. ValueError names a malformed option."""
    if not args.network_policies:
        return None
    operator_ns, operator_labels = parse_operator(args.network_policy_operator) \
        if args.network_policy_operator else (None, ())
    return NetworkPolicies(
        egress_ports=parse_ports(args.network_policy_egress),
        egress_cidrs=parse_cidrs(args.network_policy_egress_cidrs),
        metrics_namespaces=parse_labels(args.network_policy_metrics_from)
        if args.network_policy_metrics_from is not None else None,
        operator_namespace=operator_ns, operator_labels=operator_labels,
        ui_namespaces=parse_labels(args.network_policy_ui_from) if args.network_policy_ui_from is not None else None,
    )


def _app_pods(app: str) -> dict:
    return {"matchLabels": {names.LABEL_APP: app},
            "matchExpressions": [{"key": names.LABEL_COMPONENT, "operator": "In", "values": ["driver", "executor"]}]}


def _metrics_sources(settings: NetworkPolicies) -> list[dict]:
    sources = [_namespaces(settings.metrics_namespaces)]
    if settings.operator_namespace:
        sources.append({
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": settings.operator_namespace}},
            "podSelector": {"matchLabels": dict(settings.operator_labels)},
        })
    return sources


def _namespaces(labels: tuple[tuple[str, str], ...] | None) -> dict:
    return {"namespaceSelector": {} if labels is None else {"matchLabels": dict(labels)}}


def _egress(app: str, settings: NetworkPolicies) -> list[dict]:
    if settings.egress_ports is None:
        return [{}]  # one empty rule: anywhere
    rules: list[dict] = [{"to": [{"podSelector": _app_pods(app)}]}]
    if settings.egress_ports:
        rule: dict = {"ports": [p.render() for p in settings.egress_ports]}
        if settings.egress_cidrs:
            rule["to"] = [{"ipBlock": {"cidr": cidr}} for cidr in settings.egress_cidrs]
        rules.append(rule)
    return rules


def render_network_policy(app: StreamApp, uid: str, settings: NetworkPolicies) -> dict:
    name = app.metadata.name
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(app, uid, names.network_policy(name), "network"),
        "spec": {
            "podSelector": _app_pods(name),
            # Both, always: the same fields every time, so a patch converges any change of settings.
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {"from": [{"podSelector": _app_pods(name)}]},
                {"from": _metrics_sources(settings),
                 "ports": [{"protocol": "TCP", "port": names.METRICS_PORT}]},
                {"from": [_namespaces(settings.ui_namespaces)],
                 "ports": [{"protocol": "TCP", "port": names.UI_PORT}]},
            ],
            "egress": _egress(name, settings),
        },
    }
