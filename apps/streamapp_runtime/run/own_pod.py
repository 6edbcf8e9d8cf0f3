"""The driver's own pod, read through the API server: where the operator asks a running driver for
something without restarting it (the executor count, ``rescale``; the snapshot ask, ``snapshots``).

Plain HTTPS with the pod's service-account token and CA. The driver's service account may read its
pods already (Spark's own executor allocation needs it), so neither a new object nor a new permission
is needed; a mounted ConfigMap or downward-API file is refreshed by the kubelet only every minute or so.
"""

from __future__ import annotations

import json
import os
import ssl
import threading
import time
import urllib.parse
import urllib.request

READ_TIMEOUT = 5.0
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


class OwnPod:
    """The driver pod's annotations. One reading serves every reader that accepts its age: the API
    server is read once for the executor count and the snapshot ask, not once for each."""

    def __init__(self, namespace: str, pod: str, host: str, port: str, account: str = SERVICE_ACCOUNT):
        self.namespace, self.name = namespace, pod
        self.url = (f"https://{host}:{port}/api/v1/namespaces/{urllib.parse.quote(namespace)}"
                    f"/pods/{urllib.parse.quote(pod)}")
        self.account = account
        self._opener: urllib.request.OpenerDirector | None = None
        self._lock = threading.Lock()
        self._last: tuple[float, dict[str, str]] | None = None  # (monotonic time, annotations) of the last reading

    def annotations(self, max_age: float = 0.0) -> dict[str, str]:
        """The pod's annotations, read at most ``max_age`` seconds ago. Raises OSError when the API cannot
        be read, ValueError on a bad answer."""
        with self._lock:
            if self._last is not None and time.monotonic() - self._last[0] <= max_age:
                return self._last[1]
            found = self._read()
            self._last = (time.monotonic(), found)
            return found

    def _read(self) -> dict[str, str]:
        if self._opener is None:
            context = ssl.create_default_context(cafile=os.path.join(self.account, "ca.crt"))
            self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                                       urllib.request.HTTPSHandler(context=context))
        with open(os.path.join(self.account, "token")) as file:  # read each time: projected tokens are renewed
            token = file.read().strip()
        request = urllib.request.Request(self.url, headers={"Authorization": f"Bearer {token}",
                                                            "Accept": "application/json"})
        with self._opener.open(request, timeout=READ_TIMEOUT) as response:
            pod = json.loads(response.read())
        found = (pod.get("metadata") or {}).get("annotations") or {}
        if not isinstance(found, dict):
            raise ValueError(f"pod {self.namespace}/{self.name}: annotations are not a map")
        return {str(key): str(value) for key, value in found.items()}


def of_driver(spark_conf: dict[str, str], environ: dict[str, str]) -> OwnPod | None:
    """The pod of a driver on Kubernetes; None elsewhere (a local run has no pod)."""
    pod, namespace = spark_conf.get("spark.kubernetes.driver.pod.name"), spark_conf.get("spark.kubernetes.namespace")
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not spark_conf.get("spark.master", "").startswith("k8s://") or not (pod and namespace and host):
        return None
    return OwnPod(namespace, pod, host, port)
