"""Observe one StreamApp and its children through the API server."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import datetime
from functools import partial

import yaml
from pydantic import ValidationError

from streamapp_api import Policy, StreamApp, contract, parse
from streamapp_api.checkpoint import CheckpointDefault

from .. import names
from ..decide.children import MUTABLE
from ..decide.restarts import PodObservation
from ..decide.status import parse_time
from ..decide.world import Applied, Driver
from ..kubeapi import Kube

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's when built with it: the same objects, faster
CHILD_KINDS = (
    ("ServiceAccount", names.service_account), ("Role", names.role), ("RoleBinding", names.role_binding),
    ("PersistentVolumeClaim", names.checkpoint_claim), ("Secret", names.spark_auth_secret),
    ("ConfigMap", names.config_map), ("Service", names.driver_service), ("Service", names.ui_service),
    ("PodDisruptionBudget", names.disruption_budget),
)
NETWORK_KINDS = (("NetworkPolicy", names.network_policy),)  # with --network-policies only
INGRESS_KINDS = (("Ingress", names.ui_ingress),)  # with --spark-ui-ingress-host only


def child_kinds(network: bool = False, ingress: bool = False) -> tuple:
    return CHILD_KINDS + (NETWORK_KINDS if network else ()) + (INGRESS_KINDS if ingress else ())


def checked_app(body: dict, policy: Policy | None = None,
                checkpoint: CheckpointDefault | None = None) -> tuple[StreamApp | None, list]:
    """The app as the API holds it, checked like ``streamapp validate`` and the admission webhook,
    under the cluster's policy (status left out), its checkpoint settled with the operator's default."""
    document = {k: v for k, v in body.items() if k != "status"}
    app, issues = parse(document, policy, checkpoint)
    errors = [i for i in issues if i.severity == "error"]
    return (None if errors else app), errors


def stable_app(body: dict, policy: Policy | None = None,
               checkpoint: CheckpointDefault | None = None) -> StreamApp | None:
    """The app with status.upgrade.lastStableSpec as its spec, checked as the spec is (status is writable by
    more than the operator: a spec that the policy refuses today is not run); None: none, or refused."""
    text = ((body.get("status") or {}).get("upgrade") or {}).get("lastStableSpec")
    try:
        spec = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    if not isinstance(spec, dict):
        return None
    app, _ = checked_app({**body, "spec": spec}, policy, checkpoint)
    return app


def child_keys(app: str, network: bool = False, ingress: bool = False) -> list[str]:
    """"Kind/name" of each child the operator makes for the app (the driver pod aside)."""
    return [f"{kind}/{name(app)}" for kind, name in child_kinds(network, ingress)]


def child_reads(kube: Kube, namespace: str, app: str, known: dict | None = None,
                network: bool = False, ingress: bool = False) -> dict[str, Callable[[], dict | None]]:
    """"Kind/name" -> a read of that child (for ``Kube.gather``), leaving out the ``known`` ones."""
    return {f"{kind}/{name(app)}": partial(lambda kind, child: kube.get(kind, namespace, child), kind, name(app))
            for kind, name in child_kinds(network, ingress) if f"{kind}/{name(app)}" not in (known or {})}


def remembered(children: dict[str, dict | None]) -> dict[str, dict] | None:
    """What the decision reads of each child (names, labels, annotations, owners, the fields it converges, the
    ConfigMap's data; never a Secret's), to stand in for reading them again; None when one is missing."""
    out = {}
    for key, obj in children.items():
        if obj is None:
            return None
        meta = obj["metadata"]
        kept = {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
                "metadata": {k: meta[k] for k in ("name", "namespace", "labels", "annotations", "ownerReferences")
                             if k in meta}}
        for path in MUTABLE.get(obj["kind"], ()) + (("data",) if obj["kind"] == "ConfigMap" else ()):
            head, *rest = path.split(".")
            if head in obj:
                if rest:
                    kept.setdefault(head, {})[rest[0]] = obj[head].get(rest[0])
                else:
                    kept[head] = obj[head]
        out[key] = kept
    return out


def applied(config_map: dict | None) -> Applied | None:
    """What the ConfigMap says the driver runs (None when there is none or it cannot be read)."""
    if not config_map:
        return None
    data = config_map.get("data") or {}
    try:
        spec = StreamApp.model_validate(yaml.load(data.get(contract.MANIFEST_FILE, ""), Loader=SAFE_LOADER)).spec
    except (ValidationError, yaml.YAMLError, TypeError):
        spec = None
    try:
        props = contract.parse_properties(data.get(contract.SPARK_PROPERTIES_FILE, ""))
    except contract.PropertiesError:
        props = {}  # written by us, so only a hand edit gets here: treat as not recorded

    def number(key: str) -> int | None:
        try:
            return int(props[key])
        except (KeyError, ValueError):
            return None

    return Applied(spec, number("spark.executor.instances"))


def pod_observation(pod: dict | None) -> PodObservation:
    if pod is None:
        return PodObservation("absent")
    status = pod.get("status") or {}
    if pod["metadata"].get("deletionTimestamp"):
        return PodObservation("terminating")
    phase = status.get("phase")
    if phase in ("Failed", "Succeeded"):
        exit_code, reason, message = None, status.get("reason"), None
        for container in status.get("containerStatuses") or []:
            terminated = (container.get("state") or {}).get("terminated")
            if container.get("name") == "driver" and terminated:
                exit_code, reason = terminated.get("exitCode"), terminated.get("reason") or reason
                message = terminated.get("message")  # the runtime's last words, else its log's tail
        return PodObservation("failed" if phase == "Failed" else "succeeded", exit_code, reason,
                              message=message or status.get("message"))
    if phase == "Running":
        started: datetime | None = parse_time(status.get("startTime"))
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        return PodObservation("running", running_since=started, ready=ready)
    waiting = next(((c.get("state") or {}).get("waiting") or {} for c in status.get("containerStatuses") or []
                    if c.get("name") == "driver"), {})
    return PodObservation("pending", waiting=waiting.get("reason"), message=waiting.get("message"),
                          unschedulable=unschedulable(status))


def unschedulable(status: dict) -> str | None:
    """The scheduler's message of a pod it cannot place (PodScheduled False, Unschedulable)."""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False" \
                and condition.get("reason") == "Unschedulable":
            return condition.get("message") or "Unschedulable"
    return None


def driver(pod: dict | None) -> Driver:
    if pod is None:
        return Driver(PodObservation("absent"))
    annotations = pod["metadata"].get("annotations") or {}
    try:
        executors = int(annotations.get(names.ANN_EXECUTORS, ""))
    except ValueError:
        executors = None
    return Driver(pod_observation(pod), executors, annotations.get(names.ANN_STATE_GENERATION),
                  annotations.get(names.ANN_CONFIG_HASH), (pod.get("status") or {}).get("podIP"),
                  pod["metadata"].get("uid"), parse_time(annotations.get(names.ANN_EXECUTORS_ASKED_AT)),
                  annotations.get(names.ANN_SNAPSHOT))


def kafka_secret(kube: Kube, namespace: str, app: StreamApp) -> dict[str, str] | None:
    """Kafka client options from spec.kafka.secretRef ({} without one, None when it is missing)."""
    ref = app.spec.kafka.secret_ref
    if ref is None:
        return {}
    secret = kube.get("Secret", namespace, ref.name)
    if secret is None:
        return None
    return {key: base64.b64decode(value).decode() for key, value in (secret.get("data") or {}).items()}
