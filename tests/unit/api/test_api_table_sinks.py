"""The parquet and delta sinks' fields: where a table may be (the path's pattern is the whole
canonicalisation: nothing a file system or object store folds differently gets through), the delta
upsert's key rule (CEL and its Python twin), the emit mode a table's append needs, and the policy's
table locations."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from streamapp_api import Policy, validate
from streamapp_api.policy import places
from streamapp_api.sinks import DeltaSink, ParquetSink

pytestmark = pytest.mark.unit


def app(sink: dict, emit: str = "final", policy: dict | None = None) -> list[str]:
    """The errors ``validate`` finds in an app writing windowed counts (emit ``emit``) to ``sink``."""
    document = {"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": "lake", "namespace": "team-a"},
                "spec": {"kafka": {"bootstrapServers": "kafka:9092"},
                         "sources": [{"name": "clicks", "topic": "clicks", "eventTime": "ts", "watermark": "30s",
                                      "schema": {"user": "string", "region": "string", "ts": "timestamp"}}],
                         "streams": [{"name": "counts", "from": "clicks", "emit": emit, "steps": [
                             {"window": {"type": "tumbling", "size": "1m"}},
                             {"aggregate": {"groupBy": ["user", "region"], "columns": {"clicks": "count(*)"}}}]}],
                         "sinks": [{"from": "counts", **sink}]}}  # fmt: skip
    return [str(i) for i in validate(document, Policy.from_mapping(policy or {})) if i.severity == "error"]


@pytest.mark.parametrize("path", ["counts", "lake/daily_counts", "region=eu/v1.2", "s3a://lake", "s3a://lake/team-a/counts"])
@pytest.mark.parametrize("kind", [ParquetSink, DeltaSink])
def test_table_paths_that_are_canonical_pass(kind, path):
    assert kind.model_validate({"path": path}).path == path


@pytest.mark.parametrize("path", [
    "..", "../gen-0", "a/../b", "a/./b", ".", "./a", ".hidden", "a/.delta", "/var/lib", "a//b", "a/", "",
    "file:/etc", "file:///tmp/x", "s3://lake/x", "S3A://lake/x", "hdfs://nn/x", "s3a://lake/../x", "s3a://lake//x",
    "s3a://Lake/x", "a/%2e%2e", "a\\..\\b", "a b", "a/b?c", "a#b", "s3a://user@lake/x", "ａ",
])
@pytest.mark.parametrize("kind", [ParquetSink, DeltaSink])
def test_table_paths_that_could_leave_their_folder_are_refused(kind, path):
    with pytest.raises(ValidationError):
        kind.model_validate({"path": path})


def test_the_refusal_names_the_field_at_admission():
    errors = app({"parquet": {"path": "../gen-0/counts"}})
    assert errors and all(e.startswith("spec.sinks[0].parquet.path") for e in errors), errors


def test_an_upsert_needs_a_key_and_an_append_takes_none():
    assert app({"delta": {"path": "counts", "mode": "upsert", "key": ["user", "region", "window_start"]}}) == []
    for sink in ({"path": "counts", "mode": "upsert"}, {"path": "counts", "key": ["user"]}):
        (error,) = app({"delta": sink})
        assert error.startswith("spec.sinks[0].delta.key") and "mode: upsert needs key" in error


def test_a_table_append_needs_final_rows_and_an_upsert_takes_updates():
    (error,) = app({"parquet": {"path": "counts"}}, emit="updates")
    assert error.startswith("spec.sinks[0].parquet") and "emit final rows" in error
    (error,) = app({"delta": {"path": "counts"}}, emit="updates")
    assert error.startswith("spec.sinks[0].delta.mode") and "mode: upsert" in error
    assert app({"delta": {"path": "counts", "mode": "upsert", "key": ["user", "region", "window_start"]}}, emit="updates") == []


def test_partition_columns_must_exist_and_leave_data_columns():
    (error,) = app({"parquet": {"path": "counts", "partitionBy": ["country"]}})
    assert error.startswith("spec.sinks[0].parquet.partitionBy[0]") and "'country' does not exist" in error
    assert app({"parquet": {"path": "counts", "partitionBy": ["region"]}}) == []
    assert app({"delta": {"path": "counts", "partitionBy": ["region"]}}) == []


def test_an_upsert_partitioned_outside_its_key_is_refused():
    (error,) = app({"delta": {"path": "counts", "mode": "upsert", "key": ["user", "window_start"], "partitionBy": ["region"]}})
    assert error.startswith("spec.sinks[0].delta.partitionBy") and "put the partition columns in key" in error


def test_an_s3a_table_beside_a_volume_checkpoint_is_warned_of_at_its_path():
    document = {"apiVersion": "streamapp.io/v1alpha1", "kind": "StreamApp", "metadata": {"name": "lake"},
                "spec": {"kafka": {"bootstrapServers": "kafka:9092"},
                         "sources": [{"name": "clicks", "topic": "clicks", "schema": {"user": "string"}}],
                         "sinks": [{"from": "clicks", "parquet": {"path": "s3a://lake/clicks"}}]}}
    policy = Policy.from_mapping({"tables": {"locations": ["s3a://lake"]}})
    (warning,) = [i for i in validate(document, policy) if i.path == "spec.sinks[0].parquet.path"]
    assert warning.severity == "warning" and "checkpoint is on a volume" in warning.message
    document["spec"]["state"] = {"checkpoint": {"location": "s3a://ckpt/lake", "s3": {"endpoint": "http://s3:9000"}}}
    assert [i for i in validate(document, policy) if i.path == "spec.sinks[0].parquet.path"] == []
    document["spec"]["state"] = {}
    document["spec"]["sinks"][0]["parquet"]["path"] = "lake/clicks"  # kept on the volume
    assert [i for i in validate(document, policy) if i.path == "spec.sinks[0].parquet.path"] == []


def test_s3a_tables_need_a_location_the_admin_lists():
    sink = {"delta": {"path": "s3a://lake/team-a/counts"}}
    (error,) = app(sink)
    assert error.startswith("spec.sinks[0].delta.path") and "lists no s3a:// table locations" in error
    assert app(sink, policy={"tables": {"locations": ["s3a://lake/{namespace}"]}}) == []
    (error,) = app({"delta": {"path": "s3a://lake/team-b/counts"}}, policy={"tables": {"locations": ["s3a://lake/{namespace}"]}})
    assert "not under a table location this cluster allows: s3a://lake/team-a" in error
    assert app({"parquet": {"path": "counts"}}) == [], "a relative path is the app's own, whatever the policy"


@pytest.mark.parametrize("path, templates, refused", [
    ("s3a://lake/team-a", ("s3a://lake/{namespace}",), False),
    ("s3a://lake/team-a/x/y", ("s3a://lake/{namespace}/",), False),
    ("s3a://lake/team-ab/x", ("s3a://lake/{namespace}",), True),  # a prefix of the name is not the folder
    ("s3a://lake-b/team-a/x", ("s3a://lake/{namespace}",), True),
    ("s3a://lake/team-a/app/x", ("s3a://*/{namespace}/{name}",), False),
    ("s3a://lake/team-a/other/x", ("s3a://lake/{namespace}/{name}",), True),
    ("s3a://lake/x", (), True),
])
def test_table_locations(path, templates, refused):
    assert (places.table_refusal(path, "team-a", "app", templates) is not None) == refused
