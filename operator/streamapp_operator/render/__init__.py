"""Pure rendering: a checked StreamApp plus the operator's decisions → the exact objects to apply.

No I/O here. ``render_all`` is what the operator applies and what ``streamapp render`` prints.
"""

from __future__ import annotations

from streamapp_api import StreamApp

from .common import Launch, metadata, namespace_of
from .config import config_hash, render_config_map, spark_properties
from .disruption import render_disruption_budget
from .driver import render_driver_pod
from .network import NetworkPolicies, render_network_policy
from .rbac import DRIVER_RULES, render_role, render_role_binding, render_service_account
from .security import render_spark_auth_secret
from .service import render_service
from .storage import render_checkpoint_claim
from .ui import DEFAULT_UI, SparkUI, UIIngress, render_ui_ingress, render_ui_service, ui_url

__all__ = [
    "DEFAULT_UI", "DRIVER_RULES", "Launch", "NetworkPolicies", "config_hash", "metadata", "namespace_of", "render_all",
    "render_children", "render_checkpoint_claim", "render_config_map", "render_disruption_budget", "render_driver_pod",
    "render_network_policy", "render_role", "render_role_binding", "render_service", "render_service_account",
    "render_spark_auth_secret", "render_ui_ingress", "render_ui_service", "spark_properties", "SparkUI", "UIIngress",
    "ui_url",
]


def render_children(app: StreamApp, uid: str, launch: Launch, network: NetworkPolicies | None = None,
                    ui: SparkUI = DEFAULT_UI) -> list[dict]:
    """Everything but the driver pod, in the order they must exist (the pod needs all of them);
    the NetworkPolicy only with ``network`` (the operator's --network-policies), the UI's Ingress
    only with ``ui.ingress``."""
    children = [
        render_service_account(app, uid),
        render_role(app, uid),
        render_role_binding(app, uid),
        render_checkpoint_claim(app, uid),
        render_spark_auth_secret(app, uid),
        render_config_map(app, uid, launch, ui),
        render_service(app, uid),
        render_ui_service(app, uid),
        render_disruption_budget(app, uid),
    ]
    if network is not None:
        children.append(render_network_policy(app, uid, network))
    if ui.ingress is not None:
        children.append(render_ui_ingress(app, uid, ui.ingress))
    return [c for c in children if c is not None]


def render_all(app: StreamApp, uid: str, launch: Launch, network: NetworkPolicies | None = None,
               ui: SparkUI = DEFAULT_UI, restore_from: str | None = None) -> list[dict]:
    """Every object of one StreamApp, the driver pod last (``restore_from``: its restore location)."""
    children = render_children(app, uid, launch, network, ui)
    config = next(c for c in children if c["kind"] == "ConfigMap")
    return children + [render_driver_pod(app, uid, launch, config_hash(config), restore_from)]
