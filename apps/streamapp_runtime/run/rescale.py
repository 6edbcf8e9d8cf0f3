"""Rescale in place: a running driver follows the executor count the operator writes on its pod.

The operator writes the count on the driver pod (annotation ``contract.ANN_EXECUTORS``). Every
``POLL_SECONDS`` the runtime reads its own pod from the API server (the pod's service-account token
and CA, plain HTTPS) and, while the count differs from what Spark was asked for, applies it through
Spark's executor allocation (spark_compat): ask for the new total; on the way down, also decommission
the surplus executors, idle ones first: each takes no new task, finishes its running ones, hands its
shuffle blocks to the others and exits, so no batch fails and no query restarts. The count applied
is reported in the metrics (``contract.METRIC_EXECUTORS_TARGET``): that is how the operator sees it
took effect (else it restarts the driver with the count after a while).

Why the pod's annotation, read through the API: the driver's service account may read its pods
already (Spark's own executor allocation needs it), so neither a new object nor a new permission is
needed; a mounted ConfigMap or downward-API file is refreshed by the kubelet only every minute or so.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from streamapp_api import contract

from streamapp_runtime import spark_compat

log = logging.getLogger("streamapp.runtime")

POLL_SECONDS = 2.0
READ_TIMEOUT = 5.0
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class Step:
    """What one look does to reach the target: the total to ask for (None: asked already) and the
    executors to decommission."""

    total: int | None
    decommission: tuple[str, ...] = ()


def step(target: int, requested: int | None, active: list[tuple[str, bool]]) -> Step:
    """From the target, the total asked for last and the active executors (id, busy). Pure.

    Executors already decommissioning are not active, so a surplus is decommissioned once. Idle ones
    go first, then the newest (their loss costs the least cached state and locality)."""
    surplus = len(active) - target
    chosen: tuple[str, ...] = ()
    if surplus > 0:
        order = sorted(active, key=lambda e: (e[1], -_number(e[0])))
        chosen = tuple(executor for executor, _ in order[:surplus])
    return Step(None if target == requested else target, chosen)


def _number(executor: str) -> int:
    return int(executor) if executor.isdigit() else 0


class PodAnnotation:
    """The executor count annotated on the driver's own pod, read through the API server."""

    def __init__(self, namespace: str, pod: str, host: str, port: str, account: str = SERVICE_ACCOUNT):
        self.url = (f"https://{host}:{port}/api/v1/namespaces/{urllib.parse.quote(namespace)}"
                    f"/pods/{urllib.parse.quote(pod)}")
        self.account = account
        self._opener: urllib.request.OpenerDirector | None = None

    def read(self) -> int | None:
        """The count (None: the pod has none, or not a number). Raises OSError when the API cannot be read."""
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
        value = ((pod.get("metadata") or {}).get("annotations") or {}).get(contract.ANN_EXECUTORS, "")
        return int(value) if value.strip().isdigit() else None


class Rescaler:
    """Applies each new target to the Spark context, from a thread of its own."""

    def __init__(self, spark, target: Callable[[], int | None], applied: int | None,
                 report: Callable[[int], None], poll: float = POLL_SECONDS):
        self.spark, self.target, self.report, self.poll = spark, target, report, poll
        self.requested = applied  # the total Spark was asked for (at start: spark.executor.instances)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_error = ""
        if applied is not None:
            report(applied)

    def look(self) -> None:
        """Read the target once and bring Spark to it (each call safe to repeat)."""
        try:
            target = self.target()
        except (OSError, ValueError) as exc:  # the API out of reach, a token not readable, a bad answer
            self._warn(f"cannot read the executor count from the driver pod: {exc}")
            return
        if target is None or target < 0:
            return
        try:
            todo = step(target, self.requested, spark_compat.active_executors(self.spark))
            if todo.total is not None:
                if not spark_compat.request_total_executors(self.spark, todo.total):
                    self._warn("the cluster manager does not take an executor count: staying as it is")
                    return
                log.info("rescale in place: %s → %d executors", self.requested, todo.total)
                self.requested = todo.total
                self.report(todo.total)
            if todo.decommission:
                gone = spark_compat.decommission_executors(
                    self.spark, list(todo.decommission), f"rescale in place to {target} executors")
                log.info("rescale in place: decommissioning executor(s) %s", ", ".join(gone) or "none")
            self._last_error = ""
        except Exception as exc:  # noqa: BLE001 - py4j: a context stopping, a backend without the call
            self._warn(f"rescale to {target} executors failed: {exc}")

    def _warn(self, message: str) -> None:
        if message != self._last_error:  # once per distinct trouble, not every poll
            log.warning("%s", message)
            self._last_error = message

    def start(self) -> Rescaler:
        def loop() -> None:
            while not self._stop.wait(self.poll):
                self.look()

        self._thread = threading.Thread(target=loop, name="streamapp-rescale", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def for_driver_pod(spark, spark_conf: dict[str, str], environ: dict[str, str],
                   report: Callable[[int], None]) -> Rescaler | None:
    """A started Rescaler for a driver pod on Kubernetes (None elsewhere: a local run has no pod)."""
    pod, namespace = spark_conf.get("spark.kubernetes.driver.pod.name"), spark_conf.get("spark.kubernetes.namespace")
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not spark_conf.get("spark.master", "").startswith("k8s://") or not (pod and namespace and host):
        return None
    try:
        applied = int(spark_conf.get("spark.executor.instances", ""))
    except ValueError:
        applied = None
    source = PodAnnotation(namespace, pod, host, port)
    log.info("rescale in place: following %s on pod %s/%s", contract.ANN_EXECUTORS, namespace, pod)
    return Rescaler(spark, source.read, applied, report).start()
