"""classify_change: which spec changes are ignored, rescale, restart, reset or are refused."""

from __future__ import annotations

import pytest

from streamapp_operator.decide.changes import classify_change

from streamapp_testkit.operator_apps import BASE, merge
from streamapp_api import load

pytestmark = pytest.mark.unit
STEPS = BASE["spec"]["streams"][0]["steps"]
RETURNS = {"name": "returns", "topic": "returns", "format": "json",
           "schema": {"id": "string", "amount": "double", "customer": "string"}}


def spec_with(**overrides):
    return load(merge(BASE, {"spec": overrides})).spec


def stream(steps=STEPS, **extra):
    return [{"name": "big", "from": "orders", "steps": steps, "emit": "updates", **extra}]


@pytest.mark.parametrize("change, kind, field", [
    ({}, "ignore", None),
    ({"restartPolicy": {"backoff": "1s"}}, "ignore", "spec.restartPolicy"),
    ({"state": {"retainOnDelete": False}}, "ignore", "spec.state.retainOnDelete"),
    ({"state": {"checkpoint": {"size": "20Gi"}}}, "ignore", "spec.state.checkpoint.size"),
    ({"suspend": True}, "ignore", "spec.suspend"),
    ({"executors": 3}, "rescale", "spec.executors"),
    ({"scaling": {"maxExecutors": 4}}, "rescale", "spec.scaling.maxExecutors"),
    ({"scaling": {"mode": "load"}}, "rescale", "spec.scaling.mode"),
    ({"scaling": {"targetUtilization": 0.5, "catchUp": "1m"}}, "ignore", "spec.scaling.catchUp"),
    ({"image": "streamapp/runtime:2"}, "restart", "spec.image"),
    ({"executor": {"memory": "4g"}}, "restart", "spec.executor"),
    ({"sparkConf": {"spark.ui.enabled": "false"}}, "restart", "spec.sparkConf"),
    ({"trigger": "10s"}, "restart", "spec.trigger"),
    ({"kafka": {"bootstrapServers": "other:9092"}}, "restart", "spec.kafka"),
    ({"streams": stream([{"filter": "amount > 500"}, *STEPS[1:]])}, "restart", "spec.streams[0].steps"),
    ({"sinks": [{"from": "big", "kafka": {"topic": "big-orders", "key": "customer"}}]}, "restart", "spec.sinks[0]"),
    ({"sinks": [{"from": "big", "kafka": {"topic": "big-orders"}}, {"from": "orders", "kafka": {"topic": "copy"}}]},
     "restart", "spec.sinks[orders-copy]"),
    ({"sources": [{**BASE["spec"]["sources"][0], "startingOffsets": "latest"}]}, "restart", "spec.sources[0].startingOffsets"),
    # a source item added (or removed) changes no query's sources by itself: a restart
    ({"sources": [*BASE["spec"]["sources"], RETURNS]}, "restart", "spec.sources[returns]"),
    # incompatible with the checkpoint's state
    ({"sources": [{**BASE["spec"]["sources"][0], "topic": "orders-v2"}]}, "incompatible", "spec.sources[0].topic"),
    ({"streams": stream([*STEPS[:2], {"aggregate": {"groupBy": ["customer"], "columns": {"n": "count(*)"}}}])},
     "incompatible", "spec.streams[0].steps"),
    ({"streams": stream([STEPS[0], {"keyBy": "id"}, STEPS[2]])}, "incompatible", "spec.streams[0].steps"),
    # a query gains or loses a source only with its input or a join: incompatible, though Spark 4.2 keeps
    # the state of a checkpoint with named sources (format 2), as the operator cannot tell the format
    ({"sources": [*BASE["spec"]["sources"], RETURNS], "streams": [{**stream()[0], "from": "returns"}]},
     "incompatible", "spec.streams[0].from"),
    ({"tables": [{"name": "customers", "topic": "customers", "schema": {"tier": "string"}}],
      "streams": stream([*STEPS[:2], {"join": {"table": "customers", "key": "customer"}}, STEPS[2]])},
     "incompatible", "spec.streams[0].steps"),
    ({"shufflePartitions": 12}, "incompatible", "spec.shufflePartitions"),
    ({"state": {"store": "hdfs"}}, "incompatible", "spec.state.store"),
    ({"state": {"checkpoint": {"storageClassName": "fast"}}}, "incompatible", "spec.state.checkpoint.storageClassName"),
    # a reset makes state changes acceptable (fresh checkpoint path), not immutable claim settings
    ({"state": {"resetNonce": "1"}}, "reset", "spec.state.resetNonce"),
    ({"shufflePartitions": 12, "state": {"resetNonce": "1"}}, "reset", None),
    ({"state": {"resetNonce": "1", "checkpoint": {"storageClassName": "fast"}}}, "incompatible",
     "spec.state.checkpoint.storageClassName"),
    # a volume to an object store: the location alone counts (the claim's fields are left behind)
    ({"state": {"checkpoint": {"location": "s3a://bkt/orders"}}}, "incompatible", "spec.state.checkpoint.location"),
    ({"state": {"resetNonce": "1", "checkpoint": {"location": "s3a://bkt/orders"}}}, "reset", None),
    # the most disruptive change wins
    ({"executors": 3, "image": "streamapp/runtime:2"}, "restart", "spec.image"),
    ({"image": "streamapp/runtime:2", "shufflePartitions": 3}, "incompatible", "spec.shufflePartitions"),
])
def test_classify_change(change, kind, field):
    result = classify_change(spec_with(), spec_with(**change))
    assert result.kind == kind
    if field is not None:
        assert result.field == field
    if kind == "incompatible":
        assert result.reason


def test_changing_back_is_no_change():
    old, new = spec_with(image="streamapp/runtime:1"), spec_with(image="streamapp/runtime:1")
    assert classify_change(old, new).kind == "ignore"


S3_APP = {"location": "s3a://bkt/orders", "s3": {"endpoint": "http://s3.local:8333", "pathStyleAccess": True}}


@pytest.mark.parametrize("checkpoint, reset, kind, field", [
    ({**S3_APP, "s3": {"endpoint": "http://other:8333"}}, None, "restart", "spec.state.checkpoint.s3"),
    ({**S3_APP, "s3": {**S3_APP["s3"], "secretRef": {"name": "s3"}}}, None, "restart", "spec.state.checkpoint.s3"),
    ({**S3_APP, "location": "s3a://bkt/elsewhere"}, None, "incompatible", "spec.state.checkpoint.location"),
    ({**S3_APP, "location": "s3a://bkt/elsewhere"}, "1", "reset", None),
    ({"size": "1Gi"}, None, "incompatible", "spec.state.checkpoint.location"),  # back to a volume
])
def test_object_store_checkpoint_changes(checkpoint, reset, kind, field):
    state = {"checkpoint": checkpoint, **({"resetNonce": reset} if reset else {})}
    old = load(merge(BASE, {"spec": {"state": {"checkpoint": S3_APP}}})).spec
    result = classify_change(old, load(merge(BASE, {"spec": {"state": state}})).spec)
    assert result.kind == kind
    if field is not None:
        assert result.field == field


CUSTOMERS = {"name": "customers", "topic": "customers", "key": "customer", "schema": {"customer": "string", "tier": "string"}}
JOINED = stream([*STEPS[:2], {"join": {"table": "customers", "key": "customer"}}, STEPS[2]])


@pytest.mark.parametrize("before, after, kind", [
    (None, "1h", "incompatible"),  # Spark refuses the old state: the join's timeout changed (keyed_state.py)
    ("1h", None, "incompatible"),
    ("1h", "2h", "restart"),  # the same timeout, another duration
])
def test_a_table_ttl_set_or_removed_is_incompatible_a_new_duration_a_restart(before, after, kind):
    def with_ttl(ttl):
        table = {**CUSTOMERS, **({"ttl": ttl} if ttl else {})}
        return load(merge(BASE, {"spec": {"tables": [table], "streams": JOINED}})).spec

    result = classify_change(with_ttl(before), with_ttl(after))
    assert (result.kind, result.field) == (kind, "spec.tables[0].ttl")
    assert kind != "incompatible" or "ttl" in result.reason
