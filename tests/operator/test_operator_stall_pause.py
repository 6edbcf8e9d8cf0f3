"""A stalled driver is restarted (lastRestart.reason Stalled) while a busy one is left alone; the
streamapp.io/pause-reconciliation annotation holds the operator back until it is removed.

kwok's pods run no containers but have loopback addresses of their own (as in test_operator_metrics.py),
so a small HTTP server of the test stands in for each driver's metrics endpoint at its pod address,
serving what the runtime exports: records waiting in a query's input, and the time of its last batch
(frozen for the stalled driver, always now for the busy one)."""

from __future__ import annotations

import http.server
import threading
import time
from contextlib import contextmanager

import pytest

from streamapp_api import contract
from streamapp_operator import names

from streamapp_runtime.run.http_server import NamelessServer
from streamapp_testkit.operator_bed import started_app as started
from streamapp_testbed.waiting import NotYet, wait_for

pytestmark = pytest.mark.integration


@contextmanager
def driver_metrics(pod: dict, app: str, last_batch):
    """The driver's /metrics at its pod address: 40 records waiting, the last batch at ``last_batch()``."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = (f"# TYPE {contract.METRIC_SOURCE_LAG} gauge\n"
                    f'{contract.METRIC_SOURCE_LAG}{{app="{app}",query="counts",source="lines",topic="t",partition="0"}} 40\n'
                    f"# TYPE {contract.METRIC_LAST_BATCH} gauge\n"
                    f'{contract.METRIC_LAST_BATCH}{{app="{app}",query="counts"}} {last_batch()}\n').encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_) -> None:
            pass

    server = NamelessServer((pod["status"]["podIP"], names.METRICS_PORT), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def touched(cluster, *apps: str):
    """Reconciles come sooner when the apps change (the operator reads a driver's metrics after a
    reconcile that saw it running); what is decided still comes from the metrics alone."""
    for app in apps:
        cluster.kubectl("annotate", "--overwrite", f"sapp/{app}", f"test.streamapp.io/touched={time.monotonic()}")


def test_a_stalled_driver_is_restarted_with_reason_stalled_and_a_busy_one_is_not(cluster, kafka):
    policy = {"restartPolicy": {"backoff": "1s", "maxBackoff": "4s", "stallAfter": "8s"}}
    stuck, busy = started(cluster, kafka, "stuck", **policy), started(cluster, kafka, "busy", **policy)
    frozen = time.time()
    with driver_metrics(stuck, "stuck", lambda: frozen), driver_metrics(busy, "busy", time.time):
        def restarted():
            touched(cluster, "stuck", "busy")
            status = cluster.status("stuck")
            return (status.get("lastRestart") or {}).get("reason") == "Stalled" and status
        status = wait_for("the stalled driver restarted", restarted, timeout=90, every=2)
        assert status["restarts"] >= 1, "a stall is counted like a failure"
        event = cluster.event("stuck", "Stalled", "query counts committed no batch for")
        assert event["type"] == "Warning" and "with 40 records waiting" in event["message"]
        wait_for("a new driver of the stalled app", lambda: cluster.running_driver("stuck", not_uid=stuck["metadata"]["uid"]),
                 timeout=60)
        # the busy driver, read as often and with records waiting too, stays
        time.sleep(10)
        touched(cluster, "busy")
        assert cluster.driver("busy")["metadata"]["uid"] == busy["metadata"]["uid"], "the busy driver was replaced"
        assert "lastRestart" not in cluster.status("busy")
        assert not [e for e in cluster.events("busy") if e["reason"] == "Stalled"]


def test_a_paused_app_is_left_alone_until_the_annotation_goes(cluster, kafka):
    pod = started(cluster, kafka, "app")
    cluster.kubectl("annotate", "sapp/app", f"{names.ANN_PAUSE_RECONCILIATION}=true")
    wait_for("status saying paused", lambda: cluster.condition("app", "Paused").get("reason") == "ReconciliationPaused")
    assert cluster.status("app")["reason"] == "ReconciliationPaused"
    assert cluster.status("app")["phase"] == "Running"  # what the last reconcile said stays
    generation = cluster.status("app")["observedGeneration"]

    # a spec change that would restart the driver, and a driver gone: neither is acted on
    cluster.kubectl("patch", "sapp/app", "--type=merge", "-p", '{"spec":{"trigger":"30s"}}')
    cluster.kubectl("delete", "pod", "app-driver", "--wait=true")
    config = cluster.get("ConfigMap", "app-config")
    deadline = time.monotonic() + 12  # six resyncs of the test's operator
    while time.monotonic() < deadline:
        touched(cluster, "app")
        assert cluster.driver("app") is None, "a driver was created while paused"
        time.sleep(1)
    assert cluster.get("ConfigMap", "app-config")["metadata"]["resourceVersion"] == config["metadata"]["resourceVersion"]
    status = cluster.status("app")
    assert status["observedGeneration"] == generation and "lastRestart" not in status
    assert len([e for e in cluster.events("app") if e["reason"] == "ReconciliationPaused"]) == 1

    cluster.kubectl("annotate", "sapp/app", f"{names.ANN_PAUSE_RECONCILIATION}-")
    wait_for("a driver again, with the trigger asked for while paused", lambda: (
        cluster.running_driver("app", not_uid=pod["metadata"]["uid"]) and cluster.config_spec("app").get("trigger") == "30s"),
        timeout=90)
    wait_for("the Paused condition gone", lambda: not cluster.condition("app", "Paused") or NotYet("still paused"))
    cluster.event("app", "ReconciliationResumed")
