"""An app that is not running says why, for the causes only a real kubelet makes (the test bed's
kwok cannot pull images, run a JVM or kill one out of memory): the reason in the Ready condition and
`kubectl get sapp`, the message naming the cause, within 30 s of it (the driver's start aside), and
a failed driver's last words in status.lastRestart.message while the failed pod is kept.

The node has 2 cores and every driver asks for one, so the apps run one after another, after the
click-sessions app of test_click_sessions.py is suspended."""

from __future__ import annotations

import json
import time

import pytest

from streamapp_testkit.e2e_clicks import APP, CLASS, NS, RUN, latest_counts, spark_conf
from streamapp_testbed.paths import image_tag
from streamapp_testbed.waiting import NotYet, wait_for
from streamapp_testbed import cluster_apps, kafka_admin

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
WITHIN = 30


def _app(c, name: str, topic: str, **spec) -> dict:
    doc = {"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": name, "namespace": NS},
           "spec": {"kafka": {"bootstrapServers": c.kafka_bootstrap},
                    "sources": [{"name": "lines", "topic": topic, "format": "string", "startingOffsets": "earliest"}],
                    "streams": [{"name": "counts", "from": "lines", "steps": [
                        {"filter": "cast(value as int) > 0"},
                        {"aggregate": {"groupBy": ["value"], "columns": {"total": "count(*)"}}}], "emit": "updates"}],
                    "sinks": [{"from": "counts", "kafka": {"topic": f"{topic}-out"}}],
                    "executors": 1, "driver": {"cores": 1, "memory": "1g"}, "executor": {"cores": 1, "memory": "1g"},
                    "sparkConf": spark_conf(),
                    # the hostPath volume below offers ReadWriteMany only (a ReadWriteOnce claim would not bind)
                    "state": {"checkpoint": {"size": "1Gi", "storageClassName": CLASS, "accessModes": ["ReadWriteMany"]}},
                    # long enough to read the failed driver while it is kept
                    "restartPolicy": {"backoff": "60s", "maxBackoff": "60s"}}}
    doc["spec"].update(spec)
    c.apply(cluster_apps.hostpath_volume(f"streamapp-e2e-{RUN}-{name}", c.volume_dir(f"{RUN}-{name}"), CLASS), doc)
    return doc


def _status(c, name: str) -> dict:
    return json.loads(c.kubectl("get", "sapp", name, "-n", NS, "-o", "json").stdout).get("status") or {}


def _ready(c, name: str) -> dict:
    return next((x for x in _status(c, name).get("conditions", []) if x["type"] == "Ready"), {})


def _driver(c, name: str) -> dict:
    return json.loads(c.kubectl("get", "pod", f"{name}-driver", "-n", NS, "-o", "json").stdout)


def _gone(c, name: str) -> None:
    c.kubectl("delete", "sapp", name, "-n", NS, "--wait=true", "--timeout=120s", check=False)
    wait_for(f"{name}'s driver gone", lambda: c.kubectl("get", "pod", f"{name}-driver", "-n", NS,
                                                         check=False).returncode != 0, timeout=180, every=2)


def _started(c, name: str, timeout: float = 300) -> None:
    """Wait for the driver container to have started (the JVM's time to come up is not the operator's)."""
    wait_for(f"{name}'s driver started", lambda: any(
        s.get("state", {}).get("running") or s.get("state", {}).get("terminated")
        for s in _driver(c, name).get("status", {}).get("containerStatuses", [])), timeout=timeout, every=2)


@pytest.fixture(scope="module")
def topic(operator) -> str:
    """Room on the node (the click-sessions app suspended) and a topic with a record Spark refuses to
    cast to a number, which `streamapp validate` cannot know."""
    c = operator
    c.kubectl("patch", "sapp", APP, "-n", NS, "--type=merge", "-p", '{"spec":{"suspend":true}}', check=False)
    wait_for("the click-sessions pods gone (their cores free)", lambda: not json.loads(c.kubectl(
        "get", "pods", "-n", NS, "-l", f"streamapp.io/app={APP}", "-o", "json").stdout)["items"], timeout=300, every=2)
    name = f"failures-{RUN}"
    kafka_admin.create_topic(c.kafka_bootstrap, name, partitions=1)
    kafka_admin.produce(c.kafka_bootstrap, name, [(None, "abc")])
    return name


def _why(c, name: str, reasons: tuple[str, ...]):
    """The status once its reason is one of ``reasons``; else what it says (for the failure message)."""
    status = _status(c, name)
    if status.get("reason") in reasons:
        return status
    pod = json.loads(c.kubectl("get", "pod", f"{name}-driver", "-n", NS, "-o", "json", check=False).stdout or "{}")
    return NotYet(f"{status.get('reason')}: {status.get('message')}; pod: {pod.get('status', {}).get('containerStatuses')}")


def test_an_image_that_cannot_be_pulled(operator, topic):
    c = operator
    _app(c, "no-image", topic, image=f"docker.io/streamapp/runtime:{image_tag()}-does-not-exist", imagePullPolicy="Never")
    ready = wait_for("ImagePullFailed", lambda: (r := _ready(c, "no-image")).get("reason") == "ImagePullFailed" and r,
                     timeout=WITHIN + 30, every=2)  # the pod's scheduling and the kubelet's first try included
    assert f"image docker.io/streamapp/runtime:{image_tag()}-does-not-exist cannot be pulled (ErrImageNeverPull" in ready["message"]
    assert "ImagePullFailed" in c.kubectl("get", "sapp", "no-image", "-n", NS).stdout
    _gone(c, "no-image")


def test_a_pipeline_spark_refuses_leaves_its_error_in_status_an_event_and_the_kept_pod(operator, topic):
    c = operator
    _app(c, "bad-cast", topic)
    _started(c, "bad-cast")
    status = wait_for("PipelineError", lambda: _why(c, "bad-cast", ("PipelineError",)), timeout=240, every=2)
    assert "CAST_INVALID_INPUT" in status["message"] and "'abc'" in status["message"], status["message"]
    assert status["lastRestart"]["message"].startswith("PipelineError: query ")
    assert "CAST_INVALID_INPUT" in status["lastRestart"]["message"] and status["lastRestart"]["exitCode"] == 1
    kept = _driver(c, "bad-cast")  # kept during the backoff: `kubectl logs` still reads it
    assert kept["status"]["phase"] == "Failed"
    logs = c.kubectl("logs", "bad-cast-driver", "-n", NS)
    assert "CAST_INVALID_INPUT" in logs.stdout + logs.stderr
    events = c.kubectl("get", "events", "-n", NS, "--field-selector",
                       "involvedObject.kind=StreamApp,involvedObject.name=bad-cast,reason=DriverFailed").stdout
    assert "CAST_INVALID_INPUT" in events, events
    _gone(c, "bad-cast")


def test_a_driver_killed_out_of_memory(operator, topic):
    # Spark's driver JVM and the runtime's Python take more than the 513Mi limit of a 512m heap with
    # 1m of overhead (Spark refuses a heap under 450 MiB): the kernel kills the container. With one
    # query the pair settled ~10 MiB under the limit and was killed only when the heap grew (not at
    # all within 240 s on a busy machine); three queries leave no such margin.
    c = operator
    streams = [{"name": f"counts{i}", "from": "lines", "steps": [
        {"aggregate": {"groupBy": ["value"], "columns": {"n": "count(*)"}}}], "emit": "updates"} for i in range(3)]
    # The JVM's own defaults: C1 alone and the serial collector (SHORT_LIVED_JVMS) left the pair under the limit.
    _app(c, "too-small", topic, driver={"cores": 1, "memory": "512m", "memoryOverhead": "1m"}, streams=streams,
         sinks=[{"from": s["name"], "kafka": {"topic": f"{topic}-{s['name']}"}} for s in streams],
         sparkConf={"spark.kubernetes.executor.request.cores": "250m"})
    _started(c, "too-small")
    status = wait_for("OOMKilled", lambda: _why(c, "too-small", ("OOMKilled", "CrashLoop")), timeout=240, every=2)
    assert "out of memory" in status["message"] and "raise spec.driver.memory (now 512m)" in status["message"], status
    _gone(c, "too-small")


def _stable(c, name: str, generation: int):
    status = _status(c, name)
    ready = next((x for x in status.get("conditions", []) if x["type"] == "Ready"), {})
    if (status.get("upgrade") or {}).get("lastStableGeneration") == generation and ready.get("status") == "True":
        return status
    return NotYet(f"{status.get('reason')}: {status.get('message')}; upgrade: {status.get('upgrade')}")


def _rolled_back(c, name: str, generation: int):
    status = _status(c, name)
    rollback = (status.get("upgrade") or {}).get("rollback") or {}
    ready = next((x for x in status.get("conditions", []) if x["type"] == "Ready"), {})
    if rollback.get("generation") == generation and ready.get("status") == "True":
        return status
    return NotYet(f"{status.get('reason')}: {status.get('message')}; rollback: {rollback}")


# How long generation 1 must run Ready to be stable: the test waits it out once.
WINDOW = "60s"
# The window is also how long a changed driver has to become Ready, and a pod not yet running when it ends
# gets no grace: the change that is to fail on a record, not on time, brings a window that a loaded 2-core
# node cannot miss (with the suite's Spark tests beside it, a pod has taken over a minute to start running).
CHANGE_WINDOW = "180s"


def _snapshot_asked(c, name: str, generation: int):
    asked = ((_status(c, name).get("upgrade") or {}).get("preSnapshot") or {}).get("name", "")
    return asked.startswith(f"pre-{generation}-") or NotYet(f"no snapshot asked for generation {generation} yet")


@pytest.mark.timeout(1500)
def test_a_change_that_fails_is_rolled_back_to_the_stable_spec_and_its_state(operator, topic):
    """spec.upgrade.rollback: a change whose driver never gets Ready (an image that cannot be pulled) and
    one that fails after its first batches (a cast Spark refuses, on a record sent then) each go back to
    the last stable spec, with the state of the snapshot taken just before the change: the counts at the
    end are those of every record sent, each counted once by the stable spec."""
    c = operator
    name, source = "rollback", f"rollback-{RUN}"
    kafka_admin.create_topic(c.kafka_bootstrap, source, partitions=1)
    sent = ["1", "2", "2"]
    kafka_admin.produce(c.kafka_bootstrap, source, [(None, v) for v in sent])
    counting = lambda condition: [{"name": "counts", "from": "lines", "steps": [  # noqa: E731
        {"filter": condition}, {"aggregate": {"groupBy": ["value"], "columns": {"total": "count(*)"}}}], "emit": "updates"}]
    _app(c, name, source, streams=counting("length(value) > 0"), upgrade={"rollback": True, "healthWindow": WINDOW})
    try:
        _started(c, name)
        wait_for("generation 1 stable", lambda: _stable(c, name, 1), timeout=420, every=3)
        assert latest_counts(c, f"{source}-out", lambda got: sum(got.values()) == 3) == {"1": 1, "2": 2}

        # 1. never Ready: the image cannot be pulled
        c.kubectl("patch", "sapp", name, "-n", NS, "--type=merge", "-p", json.dumps(
            {"spec": {"image": f"docker.io/streamapp/runtime:{image_tag()}-does-not-exist", "imagePullPolicy": "Never"}}))
        wait_for("the snapshot before generation 2 asked", lambda: _snapshot_asked(c, name, 2), timeout=120, every=1)
        # a record after the ask: counted once whether the snapshot (taken at once) holds it or not
        kafka_admin.produce(c.kafka_bootstrap, source, [(None, "2")])
        status = wait_for("generation 2 rolled back", lambda: _rolled_back(c, name, 2), timeout=420, every=3)
        rollback = status["upgrade"]["rollback"]
        # an image the node cannot have fails the change when seen, not at the window's end
        assert rollback["toGeneration"] == 1 and "cannot start (ErrImageNeverPull" in rollback["reason"], rollback
        assert rollback["snapshot"].startswith("pre-2-"), rollback  # the stable driver's snapshot before the change
        assert json.loads(rollback["failedSpec"])["image"].endswith("-does-not-exist")
        assert "does-not-exist" not in _driver(c, name)["spec"]["containers"][0]["image"]  # the stable spec runs
        events = c.kubectl("get", "events", "-n", NS, "--field-selector",
                           f"involvedObject.kind=StreamApp,involvedObject.name={name},reason=RolledBack").stdout
        assert "generation 2 did not become healthy" in events, events

        assert latest_counts(c, f"{source}-out", lambda got: sum(got.values()) == 4) == {"1": 1, "2": 3}
        # the snapshot restored is among those status lists as kept, with its location and batches
        kept = wait_for("the snapshots kept in status", lambda: next(
            (k for k in (_status(c, name).get("state") or {}).get("snapshots") or [] if k["name"] == rollback["snapshot"]),
            None) or NotYet(str((_status(c, name).get("state") or {}).get("snapshots"))), timeout=60, every=2)
        assert kept["location"].endswith(f"/snapshots/{rollback['snapshot']}") and kept["batches"] and kept["takenAt"], kept
        kafka_admin.produce(c.kafka_bootstrap, source, [(None, "4")])  # a batch of the rolled-back driver
        assert latest_counts(c, f"{source}-out", lambda got: sum(got.values()) == 5) == {"1": 1, "2": 3, "4": 1}

        # 2. fails after its first batches: a cast of a record sent once it runs
        c.kubectl("patch", "sapp", name, "-n", NS, "--type=merge", "-p", json.dumps(
            {"spec": {"image": None, "imagePullPolicy": None, "streams": counting("cast(value as int) > 1"),
                      "upgrade": {"healthWindow": CHANGE_WINDOW}}}))
        wait_for("the snapshot before generation 3 asked", lambda: _snapshot_asked(c, name, 3), timeout=120, every=1)
        kafka_admin.produce(c.kafka_bootstrap, source, [(None, "4")])
        wait_for("generation 3's driver Ready", lambda: (s := _status(c, name)).get("observedGeneration") == 3 and any(
            x["type"] == "Ready" and x["status"] == "True" for x in s.get("conditions", []))
            and (s.get("upgrade") or {}).get("watching", {}).get("generation") == 3 or NotYet(str(s.get("upgrade"))),
            timeout=300, every=2)
        more = ["1", "1", "3"]  # the changed filter drops the 1s: counted only if the stable spec gets them back
        kafka_admin.produce(c.kafka_bootstrap, source, [(None, v) for v in more])
        time.sleep(5)  # a batch of the changed spec commits them
        kafka_admin.produce(c.kafka_bootstrap, source, [(None, "abc")])
        status = wait_for("generation 3 rolled back", lambda: _rolled_back(c, name, 3), timeout=420, every=3)
        rollback = status["upgrade"]["rollback"]
        assert "CAST_INVALID_INPUT" in rollback["reason"] and rollback["snapshot"].startswith("pre-3-"), rollback
        assert latest_counts(c, f"{source}-out", lambda got: sum(got.values()) == 10) == {"1": 3, "2": 3, "3": 1, "4": 2, "abc": 1}
    finally:
        _gone(c, name)
