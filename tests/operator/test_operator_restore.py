"""Restore is driven by pod events, not the periodic resync; and restarts end at maxRestarts."""

from __future__ import annotations

import time

import pytest

from streamapp_testbed.kafka_admin import create_topic
from streamapp_testbed.kwok import EXIT_CODE_ANNOTATION, FAIL_LABEL

from streamapp_testkit.operator_bed import OperatorProcess, simple_app, unique
from streamapp_testbed.waiting import wait_for

pytestmark = pytest.mark.integration


def _fail(cluster, exit_code: int) -> None:
    cluster.kubectl("annotate", "pod", "app-driver", f"{EXIT_CODE_ANNOTATION}={exit_code}", "--overwrite")
    cluster.kubectl("label", "pod", "app-driver", f"{FAIL_LABEL}=true", "--overwrite")


def test_failure_is_restored_from_the_pod_event_and_gives_up_after_max_restarts(own_namespace, kafka, control_plane,
                                                                                  tmp_path):
    cluster = own_namespace
    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=1)
    cluster.pv_for("app")
    # A resync far longer than the test: only pod events and the operator's own requeues can act.
    operator = OperatorProcess(tmp_path, cluster.namespace, control_plane.kubeconfig, resync=600).start()
    try:
        cluster.apply(simple_app("app", cluster.namespace, kafka.bootstrap, topic,
                                 restartPolicy={"backoff": "1s", "maxBackoff": "1s", "maxRestarts": 1}))
        first = wait_for("a running driver", lambda: cluster.running_driver("app"), timeout=90)

        failed_at = time.monotonic()
        _fail(cluster, 3)
        wait_for("a new driver", lambda: cluster.running_driver("app", not_uid=first["metadata"]["uid"]), timeout=30)
        assert time.monotonic() - failed_at < 15, "restored by the resync, not by the pod event"
        assert cluster.status("app")["restarts"] == 1

        _fail(cluster, 4)
        status = wait_for("phase Failed", lambda: (s := cluster.status("app")).get("phase") == "Failed" and s, timeout=30)
        assert "gave up after 1 restarts" in status["message"]
        assert cluster.condition("app", "Degraded")["reason"] == "MaxRestartsReached"
        cluster.event("app", "GaveUp")
        time.sleep(3)
        pod = cluster.driver("app")
        assert pod is not None and pod["status"]["phase"] == "Failed", "the failed driver is kept for inspection"
    finally:
        operator.stop()


def test_an_app_deletes_while_the_operator_is_down(own_namespace, kafka, control_plane, tmp_path):
    cluster = own_namespace
    topic = unique("lines")
    create_topic(kafka.bootstrap, topic, partitions=1)
    cluster.pv_for("app")
    operator = OperatorProcess(tmp_path, cluster.namespace, control_plane.kubeconfig).start()
    try:
        cluster.apply(simple_app("app", cluster.namespace, kafka.bootstrap, topic, state={"retainOnDelete": False}))
        wait_for("a running driver", lambda: cluster.running_driver("app"), timeout=90)
    finally:
        operator.stop()
    assert not cluster.app("app")["metadata"].get("finalizers"), "nothing may wait for the operator"

    cluster.kubectl("delete", "sapp/app", "--wait=true", "--timeout=30s")

    wait_for("children garbage-collected", lambda: cluster.driver("app") is None
             and cluster.get("PersistentVolumeClaim", "app-checkpoint") is None, timeout=60)
