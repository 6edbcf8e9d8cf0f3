"""click-sessions once more, with its checkpoint on an object store (``location: s3a://…``): the test
bed's S3-compatible server on the node's address, the key pair in a Secret of the app's namespace.
Runs after test_click_sessions.py, with that app suspended (a 2-core node holds one driver). The
windows must be exact in both sinks, the checkpoint's objects in the bucket (offsets, commits, state,
the driver's owner marker), and a driver force-deleted mid-stream must be followed by one that resumes
from the object store and loses nothing."""

from __future__ import annotations

import json
import re

import pytest

from streamapp_testkit.e2e_clicks import (APP, CLASS, NS, PG_SECRET, RUN, TRIGGER, Rounds, app_object, latest_counts, new_driver, running, spark_conf)  # fmt: skip
from streamapp_testbed.waiting import wait_for
from streamapp_testbed import cluster_apps, kafka_admin
from streamapp_testbed.s3 import REGION

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

S3_APP, S3_SECRET = "click-sessions-s3", "checkpoint-s3"
TOPIC, OUT, TABLE = f"clickstream-s3-{RUN}", f"session-summaries-s3-{RUN}", f"session_stats_s3_{RUN}"
ROUNDS = Rounds(TOPIC, OUT, TABLE)


def s3_app(c, store, bucket: str) -> dict:
    app = cluster_apps.click_sessions_exactly_once(NS, c.kafka_bootstrap, CLASS, TRIGGER, backoff="2s", topic=TOPIC,
                                                   out=OUT, table=TABLE, dead_letter=f"{S3_APP}-dlq-{RUN}")
    app["metadata"]["name"] = S3_APP
    app["spec"]["sparkConf"] |= spark_conf()
    app["spec"]["state"]["checkpoint"] = {"location": f"{bucket}/{NS}/{S3_APP}", "s3": {
        "endpoint": store.endpoint, "region": REGION, "pathStyleAccess": True, "secretRef": {"name": S3_SECRET}}}
    return app


def owner(store, bucket: str) -> str:
    return json.loads(store.text(bucket, f"{NS}/{S3_APP}/gen-0/_owner.json"))["owner"]


def test_click_sessions_on_an_object_store_checkpoint_survive_a_driver_loss(operator, cluster_object_store):
    c, store = operator, cluster_object_store
    c.kubectl("patch", "streamapp", APP, "-n", NS, "--type=merge", "-p", '{"spec": {"suspend": true}}', check=False)
    wait_for("the first app without pods", lambda: not running(c, "driver") and not running(c, "executor"),
             timeout=300, every=2)
    bucket = store.create_bucket(f"checkpoints-{RUN}")
    c.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": S3_SECRET, "namespace": NS},
             "stringData": {"AWS_ACCESS_KEY_ID": store.access_key, "AWS_SECRET_ACCESS_KEY": store.secret_key}},
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": PG_SECRET, "namespace": NS},
             "stringData": {"uri": c.postgres_dsn}})
    kafka_admin.create_topic(c.kafka_bootstrap, TOPIC, partitions=1)
    ROUNDS.produce(c, 0)
    try:
        c.apply(s3_app(c, store, bucket))
        driver = wait_for("running driver pod", lambda: running(c, "driver", S3_APP), timeout=600, every=2)[0]
        claims = json.loads(c.kubectl("get", "pvc", "-n", NS, "-l", f"streamapp.io/app={S3_APP}", "-o", "json").stdout)
        assert claims["items"] == [], "no claim for an object-store checkpoint"
        ROUNDS.exact(c)
        keys = store.objects(bucket, f"{NS}/{S3_APP}/gen-0")
        for pattern in (r"/offsets/\d+$", r"/commits/\d+$", r"/state/\d+/\d+/", r"^[^/]+/[^/]+/gen-0/_owner\.json$"):
            assert any(re.search(pattern, k) for k in keys), (pattern, keys[:20])
        assert owner(store, bucket) == driver["metadata"]["uid"]

        c.kubectl("delete", "pod", "-n", NS, driver["metadata"]["name"], "--grace-period=0", "--force")
        ROUNDS.produce(c, 1)  # while no driver runs
        second = wait_for("a new running driver", lambda: new_driver(c, driver["metadata"]["uid"], S3_APP), timeout=600, every=2)
        ROUNDS.exact(c)
        assert app_object(c, S3_APP)["status"]["lastRestart"]["reason"] == "DriverDeleted"
        assert owner(store, bucket) == second["metadata"]["uid"]
    finally:
        # The first app stays suspended: the e2e tests that follow (test_failures) need the node's room
        # too, and a resumed driver would only be stopped again.
        c.kubectl("delete", "streamapp", S3_APP, "-n", NS, "--wait=true", "--timeout=120s", check=False)


def _counting_app(c, store, bucket: str, name: str, source: str, **state) -> dict:
    """A small app counting the records of each value, its checkpoint in the bucket, one executor."""
    return {"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": name, "namespace": NS},
            "spec": {"kafka": {"bootstrapServers": c.kafka_bootstrap},
                     "sources": [{"name": "lines", "topic": source, "format": "string", "startingOffsets": "earliest"}],
                     "streams": [{"name": "counts", "from": "lines", "steps": [
                         {"aggregate": {"groupBy": ["value"], "columns": {"total": "count(*)"}}}], "emit": "updates"}],
                     # named: the new app's query finds the old one's state in the snapshot by this name
                     "sinks": [{"name": "counts", "from": "counts", "kafka": {"topic": f"{source}-{name}"}}],
                     "executors": 1, "driver": {"cores": 1, "memory": "1g"}, "executor": {"cores": 1, "memory": "1g"},
                     "sparkConf": spark_conf(),
                     "state": {"checkpoint": {"location": f"{bucket}/{NS}/{name}", "s3": {
                         "endpoint": store.endpoint, "region": REGION, "pathStyleAccess": True,
                         "secretRef": {"name": S3_SECRET}}}, **state}}}


def test_blue_green_a_new_app_starts_from_the_old_ones_snapshot(operator, cluster_object_store):
    """docs/operator.md's blue/green recipe as a user runs it: snapshot the running app, suspend it, apply
    the new version as a new app restoring from that snapshot, delete the old app. The new app's counts
    go on from the old one's state: each record counted once, before and after the switch."""
    c, store = operator, cluster_object_store
    c.kubectl("patch", "streamapp", APP, "-n", NS, "--type=merge", "-p", '{"spec": {"suspend": true}}', check=False)
    bucket = store.create_bucket(f"bluegreen-{RUN}")
    c.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": S3_SECRET, "namespace": NS},
             "stringData": {"AWS_ACCESS_KEY_ID": store.access_key, "AWS_SECRET_ACCESS_KEY": store.secret_key}})
    source, blue, green = f"bluegreen-{RUN}", "counts-blue", "counts-green"
    kafka_admin.create_topic(c.kafka_bootstrap, source, partitions=1)
    kafka_admin.produce(c.kafka_bootstrap, source, [(None, v) for v in ["a", "b", "b"]])
    try:
        c.apply(_counting_app(c, store, bucket, blue, source))
        latest_counts(c, f"{source}-{blue}", lambda got: got == {"a": 1, "b": 2})

        # 1. a snapshot of the running app
        c.kubectl("patch", "sapp", blue, "-n", NS, "--type=merge", "-p", '{"spec":{"state":{"snapshotNonce":"cutover"}}}')
        c.kubectl("wait", f"sapp/{blue}", "-n", NS, "--for=jsonpath={.status.state.lastSnapshot.name}=cutover",
                  "--timeout=300s")
        # 2. the old app suspended (a 2-core node runs one driver), the new one beside it from the snapshot
        c.kubectl("patch", "sapp", blue, "-n", NS, "--type=merge", "-p", '{"spec":{"suspend":true}}')
        wait_for(f"{blue} without pods", lambda: not running(c, "driver", blue), timeout=300, every=2)
        kafka_admin.produce(c.kafka_bootstrap, source, [(None, v) for v in ["a", "c"]])
        c.apply(_counting_app(c, store, bucket, green, source, restoreFrom={"app": blue, "snapshot": "cutover"}))
        # the new app writes the values it reads, counted on from the old app's state: a was 1 there
        latest_counts(c, f"{source}-{green}", lambda got: got == {"a": 2, "c": 1})
        restored = app_object(c, green)["status"]["state"]["restoreFrom"]
        assert restored["location"] == f"{bucket}/{NS}/{blue}/snapshots/cutover", restored

        # 3. the old app deleted: the new one keeps its state and goes on
        c.kubectl("delete", "sapp", blue, "-n", NS, "--wait=true", "--timeout=120s")
        kafka_admin.produce(c.kafka_bootstrap, source, [(None, "b")])
        latest_counts(c, f"{source}-{green}", lambda got: got == {"a": 2, "b": 3, "c": 1})  # b's 2 came with the snapshot
    finally:
        for name in (blue, green):
            c.kubectl("delete", "streamapp", name, "-n", NS, "--wait=true", "--timeout=120s", check=False)
