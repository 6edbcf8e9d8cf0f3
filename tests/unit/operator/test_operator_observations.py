"""Pure helpers around observations: pod states, driver metrics, status folding, child convergence."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from streamapp_operator.decide.children import converge, plan_children
from streamapp_operator.decide.status import Cond, fold_conditions, status_patch
from streamapp_operator.observe.kube import pod_observation
from streamapp_operator.observe.metrics import parse

pytestmark = pytest.mark.unit
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def pod(phase=None, deleting=False, terminated=None):
    status = {"phase": phase, "startTime": "2026-01-01T00:00:00Z"} if phase else {}
    if terminated is not None:
        status["containerStatuses"] = [{"name": "driver", "state": {"terminated": terminated}}]
    meta = {"name": "a-driver", "deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {"name": "a-driver"}
    return {"metadata": meta, "status": status}


@pytest.mark.parametrize("obj, state, exit_code", [
    (None, "absent", None),
    (pod(), "pending", None),
    (pod("Pending"), "pending", None),
    (pod("Running"), "running", None),
    (pod("Running", deleting=True), "terminating", None),
    (pod("Failed", terminated={"exitCode": 137, "reason": "OOMKilled"}), "failed", 137),
    (pod("Failed", deleting=True, terminated={"exitCode": 1}), "terminating", None),
    (pod("Succeeded", terminated={"exitCode": 0, "reason": "Completed"}), "succeeded", 0),
])
def test_pod_observation(obj, state, exit_code):
    seen = pod_observation(obj)
    assert (seen.state, seen.exit_code) == (state, exit_code)


def test_a_pod_not_running_says_why_as_the_kubelet_and_the_scheduler_told_it():
    def pod(phase, conditions=(), state=None, message=None):
        return {"metadata": {"name": "orders-driver"},
                "status": {"phase": phase, "conditions": list(conditions), "message": message,
                           "containerStatuses": [{"name": "driver", "state": state}] if state else []}}

    pulling = pod("Pending", state={"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}})
    assert (pod_observation(pulling).waiting, pod_observation(pulling).message) == \
        ("ImagePullBackOff", "Back-off pulling image")
    unplaced = pod("Pending", [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                "message": "0/3 nodes are available: 3 Insufficient memory."}])
    assert pod_observation(unplaced).unschedulable == "0/3 nodes are available: 3 Insufficient memory."
    assert pod_observation(pod("Pending", [{"type": "PodScheduled", "status": "True"}])).unschedulable is None
    died = pod("Failed", state={"terminated": {"exitCode": 1, "reason": "Error",
                                               "message": "PipelineError: AnalysisException: boom"}})
    seen = pod_observation(died)
    assert (seen.state, seen.exit_code, seen.reason, seen.message) == ("failed", 1, "Error",
                                                                       "PipelineError: AnalysisException: boom")
    killed = pod("Failed", state={"terminated": {"exitCode": 137, "reason": "OOMKilled"}})
    assert (pod_observation(killed).reason, pod_observation(killed).message) == ("OOMKilled", None)


def test_running_pod_knows_since_when_and_whether_it_is_ready():
    assert pod_observation(pod("Running")).running_since == T0
    assert pod_observation(pod("Running")).ready is False
    ready = pod("Running")
    ready["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert pod_observation(ready).ready is True


METRICS = """# TYPE streamapp_source_lag_records gauge
streamapp_source_lag_records{app="a",query="q1",source="s",topic="t",partition="0"} 5
streamapp_source_lag_records{app="a",query="q1",source="s",topic="t",partition="1"} 7
streamapp_source_lag_records{app="a",query="q2",source="s",topic="t",partition="0"} 1
# TYPE streamapp_last_batch_timestamp_seconds gauge
streamapp_last_batch_timestamp_seconds{app="a",query="q1"} 1767225600
streamapp_last_batch_timestamp_seconds{app="a",query="q2"} 1767225500
# TYPE streamapp_kafka_transactions counter
streamapp_kafka_transactions_total{app="a",query="q1"} 42.0
streamapp_kafka_transactions_created{app="a",query="q1"} 1767225500.0
# TYPE streamapp_sink_partitions_skipped counter
streamapp_sink_partitions_skipped_total{app="a",query="q2"} 3.0
"""


def test_driver_metrics_give_lag_per_query_and_last_batch():
    progress = parse(METRICS)
    assert progress.lag == 13
    assert progress.sink_lag == (("q1", 12), ("q2", 1))
    assert progress.last_batch == T0
    assert dict(progress.sink_last_batch)["q2"] == T0 - timedelta(seconds=100)
    assert (progress.sink_transactions, progress.sink_aborted, progress.sink_skipped) == ((("q1", 42),), (), (("q2", 3),))


def test_driver_metrics_are_scraped_over_http_and_an_unreachable_driver_means_no_data():
    import http.server
    import threading

    from streamapp_testbed.process import free_port
    from streamapp_operator.observe.metrics import observe

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = METRICS.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert observe("127.0.0.1", port=server.server_port).lag == 13
    finally:
        server.shutdown()
    assert observe("127.0.0.1", port=free_port()).lag is None  # nothing listening: no lag data, no error
    assert observe(None).lag is None


def test_no_lag_metrics_means_no_lag_data():
    assert parse("# nothing here\n").lag is None


def test_condition_keeps_its_transition_time_while_unchanged():
    first = fold_conditions(None, [Cond("Ready", True, "DriverRunning")], T0, 1)
    later = fold_conditions(first, [Cond("Ready", True, "DriverRunning")], T0 + timedelta(minutes=5), 2)
    flipped = fold_conditions(later, [Cond("Ready", False, "DriverFailed")], T0 + timedelta(minutes=9), 2)
    assert later[0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert later[0]["observedGeneration"] == 2
    assert flipped[0]["lastTransitionTime"] == "2026-01-01T00:09:00Z"


@pytest.mark.parametrize("old, new, patch", [
    ({"phase": "Running"}, {"phase": "Running"}, {}),
    ({"phase": "Pending"}, {"phase": "Running"}, {"phase": "Running"}),
    ({"phase": "Running", "driverPod": "a-driver"}, {"phase": "Restarting"}, {"phase": "Restarting", "driverPod": None}),
    ({"phase": "Running", "kopf": {"x": 1}}, {"phase": "Running"}, {}),  # not ours: left alone
    # a merge patch merges objects: keys gone from one are nulled, or the old exit code would stay
    ({"lastRestart": {"time": "t1", "reason": "DriverFailed", "exitCode": 137}},
     {"lastRestart": {"time": "t2", "reason": "DriverDeleted"}},
     {"lastRestart": {"time": "t2", "reason": "DriverDeleted", "exitCode": None}}),
    ({"lastRestart": {"time": "t1", "reason": "Rescale"}}, {"lastRestart": {"time": "t1", "reason": "Rescale"}}, {}),
    # at every depth: a second rescale's record must not keep the first one's appliedTime, or it reads
    # as applied already and is never recorded as applied
    ({"scaling": {"mode": "partitions", "lastRescale": {"from": 2, "to": 4, "method": "InPlace", "appliedTime": "t1"}}},
     {"scaling": {"mode": "partitions", "lastRescale": {"from": 4, "to": 6, "method": "InPlace"}}},
     {"scaling": {"mode": "partitions", "lastRescale": {"from": 4, "to": 6, "method": "InPlace", "appliedTime": None}}}),
])
def test_status_patch_writes_only_differences(old, new, patch):
    assert status_patch(old, new) == patch


ROLE = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "a-driver", "namespace": "ns", "labels": {"x": "1"},
                     "ownerReferences": [{"uid": "u1"}]},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}


def test_converge_patches_only_owned_fields_that_drifted():
    observed = {**ROLE, "metadata": {**ROLE["metadata"], "resourceVersion": "9", "labels": {"x": "1", "extra": "y"}}}
    assert converge(ROLE, observed) is None
    drifted = {**observed, "rules": []}
    patch = converge(ROLE, drifted)
    assert patch["rules"] == ROLE["rules"] and patch["metadata"]["name"] == "a-driver"
    assert "labels" not in patch["metadata"]


def test_plan_children_creates_missing_and_never_patches_the_config_map():
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a-config", "namespace": "ns"}, "data": {"a": "1"}}
    create, patches = plan_children([ROLE, config], {"Role/a-driver": None, "ConfigMap/a-config": {**config, "data": {}}})
    assert create == [ROLE] and patches == []


def test_remembered_children_converge_exactly_like_the_objects_they_stand_for():
    from streamapp_testkit.operator_apps import example
    from streamapp_operator.observe.kube import remembered
    from streamapp_operator.render import Launch, render_children

    rendered = render_children(example("click-sessions"), "uid-1", Launch(2))
    served = {f"{o['kind']}/{o['metadata']['name']}": {**o, "metadata": {**o["metadata"], "resourceVersion": "7",
                                                                           "managedFields": [{"manager": "x"}]}}
              for o in rendered}
    drifted = {key: {**obj, "metadata": {**obj["metadata"], "labels": {}, "ownerReferences": []}}
               for key, obj in served.items()}
    for observed in (served, drifted):
        kept = remembered(observed)
        assert set(kept) == set(observed)
        assert all("managedFields" not in o["metadata"] for o in kept.values())
        assert plan_children(rendered, kept) == plan_children(rendered, observed)
        config = next(k for k in kept if k.startswith("ConfigMap/"))
        assert kept[config]["data"] == observed[config]["data"]  # what the driver runs: read from it
    assert remembered({**served, next(iter(served)): None}) is None  # a missing child: read again next time
