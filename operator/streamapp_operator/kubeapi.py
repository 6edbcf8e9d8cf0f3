"""A small JSON client over the Kubernetes API: objects stay plain dicts, exactly as the API speaks.

Errors are a small vocabulary: NotFound, Conflict (409: already there / stale), and ApiError for the
rest. The kubernetes package only provides the connection (kubeconfig or in-cluster credentials).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, TypeVar
from urllib.parse import quote

from kubernetes import client, config

from streamapp_api import GROUP, PLURAL, VERSION

PLURALS = {
    "Pod": "pods", "Secret": "secrets", "Service": "services", "ConfigMap": "configmaps", "ServiceAccount": "serviceaccounts",
    "PersistentVolumeClaim": "persistentvolumeclaims", "Event": "events", "Role": "roles",
    "RoleBinding": "rolebindings", "NetworkPolicy": "networkpolicies", "PodDisruptionBudget": "poddisruptionbudgets",
    "Ingress": "ingresses", "StreamApp": PLURAL,
}
API_VERSIONS = {"Role": "rbac.authorization.k8s.io/v1", "RoleBinding": "rbac.authorization.k8s.io/v1",
                "NetworkPolicy": "networking.k8s.io/v1", "Ingress": "networking.k8s.io/v1", "PodDisruptionBudget": "policy/v1",
                "StreamApp": f"{GROUP}/{VERSION}"}
MERGE = "application/merge-patch+json"
TIMEOUT = 30
FAN_OUT = 48  # requests of all reconciles in flight at once (Kube.gather)
T = TypeVar("T")


class ApiError(Exception):
    def __init__(self, status: int, reason: str, body: Any = None):
        self.status, self.reason, self.body = status, reason, body
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{status} {reason}: {message}")


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    pass


def load_config(config_file: str | None = None, context: str | None = None, pool_size: int | None = None) -> client.ApiClient:
    """In-cluster credentials, else the kubeconfig (``config_file``, else $KUBECONFIG as it is now).
    ``pool_size``: connections kept open to the API server (one per thread that calls at once)."""
    if config_file is None and context is None:
        try:
            configuration = client.Configuration()
            if pool_size:
                configuration.connection_pool_maxsize = pool_size
            config.load_incluster_config(client_configuration=configuration)
            return client.ApiClient(configuration)
        except config.ConfigException:
            pass
    configuration = client.Configuration()
    if pool_size:
        configuration.connection_pool_maxsize = pool_size
    config.load_kube_config(config_file=config_file or os.environ.get("KUBECONFIG"), context=context,
                            client_configuration=configuration)
    return client.ApiClient(configuration)


def path(kind: str, namespace: str | None, name: str | None = None, subresource: str | None = None) -> str:
    api_version = API_VERSIONS.get(kind, "v1")
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    out = prefix + (f"/namespaces/{quote(namespace)}" if namespace else "") + f"/{PLURALS[kind]}"
    if name:
        out += f"/{quote(name)}"
    if subresource:
        out += f"/{subresource}"
    return out


def counted(method: str, url_path: str) -> tuple[str, str]:
    """(verb, resource) of a request, for counting: "LIST" for a GET of a collection, the resource with
    its subresource ("pods", "streamapps/status")."""
    parts = url_path.split("?", 1)[0].strip("/").split("/")
    at = parts.index("namespaces") + 2 if "namespaces" in parts and len(parts) > parts.index("namespaces") + 2 \
        else (2 if parts[0] == "api" else 3)
    verb = "LIST" if method == "GET" and len(parts) == at + 1 else method
    return verb, "/".join(parts[at:at + 1] + parts[at + 2:at + 3])


class Kube:
    def __init__(self, api_client: client.ApiClient | None = None, fan_out: int = FAN_OUT,
                 on_request: Callable[[str, str], None] | None = None):
        """``on_request(verb, resource)``: told of every request before it is sent (the operator counts them)."""
        self.client = api_client or load_config()
        self._pool = ThreadPoolExecutor(fan_out, thread_name_prefix="kube") if fan_out > 1 else None
        self._on_request = on_request

    def gather(self, calls: list[Callable[[], T]]) -> list[T]:
        """Independent requests sent at once; their results in order (the first error is raised once all
        have finished). A reconcile waits for the slowest of them rather than for their sum."""
        if self._pool is None or len(calls) < 2:
            return [call() for call in calls]
        futures = [self._pool.submit(call) for call in calls]
        wait(futures)
        return [future.result() for future in futures]

    def request(self, method: str, url_path: str, body: Any = None, query: dict | None = None,
                content_type: str = "application/json", timeout: float = TIMEOUT) -> Any:
        if self._on_request is not None:
            self._on_request(*counted(method, url_path))
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        method, url, headers, data, _ = self.client.param_serialize(
            method, url_path, query_params=list((query or {}).items()), header_params=headers, body=body,
            auth_settings=["BearerToken"])
        response = self.client.call_api(method, url, headers, data, _request_timeout=timeout)
        response.read()
        text = response.data.decode() if isinstance(response.data, bytes) else response.data
        try:
            payload = json.loads(text) if text else None
        except ValueError:
            payload = text
        if response.status >= 400:
            error = {404: NotFound, 409: Conflict}.get(response.status, ApiError)
            raise error(response.status, response.reason, payload)
        return payload

    # --- verbs over plain objects ------------------------------------------------------------
    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        try:
            return self.request("GET", path(kind, namespace, name))
        except NotFound:
            return None

    def list(self, kind: str, namespace: str, selector: str | None = None, fields: str | None = None) -> list[dict]:
        query = {k: v for k, v in (("labelSelector", selector), ("fieldSelector", fields)) if v} or None
        return self.request("GET", path(kind, namespace), query=query).get("items", [])

    def create(self, obj: dict) -> dict | None:
        """Create-if-absent: the object as created, or None when it was already there (409)."""
        meta = obj["metadata"]
        try:
            return self.request("POST", path(obj["kind"], meta.get("namespace")), body=obj) or {}
        except Conflict:
            return None

    def patch(self, obj: dict, subresource: str | None = None) -> dict:
        meta = obj["metadata"]
        return self.request("PATCH", path(obj["kind"], meta["namespace"], meta["name"], subresource),
                            body=obj, content_type=MERGE)

    def delete(self, kind: str, namespace: str, name: str, grace_seconds: int | None = None,
               uid: str | None = None) -> bool:
        """Delete if present (True when a delete was issued). ``uid`` guards against deleting a successor."""
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self.request("DELETE", path(kind, namespace, name), body=body)
            return True
        except (NotFound, Conflict):
            return False
