"""The operator's own Prometheus metrics, served on their own port."""

from __future__ import annotations

import threading
from collections import Counter as Tally

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from streamapp_api.status import PHASES

REGISTRY = CollectorRegistry()
RECONCILES = Counter("streamapp_operator_reconciles", "Reconciles by result.", ["result"], registry=REGISTRY)
DURATION = Histogram("streamapp_operator_reconcile_duration_seconds", "Time one reconcile took.",
                     buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30), registry=REGISTRY)
APPS = Gauge("streamapp_operator_apps", "StreamApps by phase.", ["phase"], registry=REGISTRY)
RESTARTS = Counter("streamapp_operator_driver_restarts", "Driver restarts after a failure.",
                   ["namespace", "app"], registry=REGISTRY)
DESIRED = Gauge("streamapp_operator_desired_executors", "Executors an app should run.", ["namespace", "app"],
                registry=REGISTRY)
PARTITIONS = Gauge("streamapp_operator_partitions", "Input partitions of an app.", ["namespace", "app"],
                   registry=REGISTRY)
API_REQUESTS = Counter("streamapp_operator_api_requests", "Requests the reconciles sent to the API server, by verb "
                       "and resource (watches are kopf's, not counted).", ["verb", "resource"], registry=REGISTRY)

_phases: dict[tuple[str, str], str] = {}
_phases_lock = threading.Lock()  # reconciles record from many threads at once


def record(namespace: str, app: str, result: str, seconds: float, phase: str | None = None,
           restarted: bool = False, desired: int | None = None, partitions: int | None = None) -> None:
    RECONCILES.labels(result).inc()
    DURATION.observe(seconds)
    if restarted:
        RESTARTS.labels(namespace, app).inc()
    if desired is not None:
        DESIRED.labels(namespace, app).set(desired)
    if partitions is not None:
        PARTITIONS.labels(namespace, app).set(partitions)
    if phase is not None:
        with _phases_lock:
            _phases[(namespace, app)] = phase
            _publish()


def api_request(verb: str, resource: str) -> None:
    API_REQUESTS.labels(verb, resource).inc()


def forget(namespace: str, app: str) -> None:
    with _phases_lock:
        _phases.pop((namespace, app), None)
        _publish()
    for gauge in (DESIRED, PARTITIONS):
        try:
            gauge.remove(namespace, app)
        except KeyError:
            pass


def _publish() -> None:
    counts = Tally(_phases.values())
    for phase in PHASES:
        APPS.labels(phase).set(counts[phase])


def serve(port: int, address: str = "0.0.0.0") -> None:
    start_http_server(port, addr=address, registry=REGISTRY)
