"""The table sinks' pure decisions: where a table is, the Delta session settings, the MERGE, and when a
parquet folder's log belongs to another checkpoint."""

from __future__ import annotations

import pytest

from streamapp_runtime.sinks import tables

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("path, base, location", [
    ("counts", "/var/lib/streamapp/checkpoint", "/var/lib/streamapp/checkpoint/tables/counts"),
    ("lake/daily", "s3a://ckpt/streamapps/ns/app", "s3a://ckpt/streamapps/ns/app/tables/lake/daily"),
    ("s3a://lake/ns/counts", "/var/lib/streamapp/checkpoint", "s3a://lake/ns/counts"),
])
def test_a_relative_table_is_under_the_apps_own_storage(path, base, location):
    assert tables.table_location(path, base) == location


def test_delta_joins_the_apps_own_session_extensions():
    assert tables.with_delta_conf({}) == tables.DELTA_SESSION_CONF
    mine = {"spark.sql.extensions": "com.example.Ext", "spark.sql.catalog.spark_catalog": "com.example.Catalog"}
    assert tables.with_delta_conf(mine) == {"spark.sql.extensions": f"com.example.Ext,{tables.DELTA_EXTENSION}",
                                            "spark.sql.catalog.spark_catalog": "com.example.Catalog"}
    assert tables.with_delta_conf(tables.DELTA_SESSION_CONF) == tables.DELTA_SESSION_CONF


def test_the_merge_matches_every_key_column_null_safe():
    statement = tables.merge_statement("s3a://lake/t`x", "v", ["user", "window_start"])
    assert statement == ("MERGE INTO delta.`s3a://lake/t``x` AS t USING `v` AS s ON t.`user` <=> s.`user` AND "
                         "t.`window_start` <=> s.`window_start` WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")


@pytest.mark.parametrize("logged, commits, refused", [
    ([], [], False),
    (["0"], [], False),  # the first batch written, its commit lost in a crash: it runs again
    (["0", "1"], [], True),  # a fresh checkpoint would skip batch 1 as written
    (["0", "1", "2"], ["0", "1"], False),
    (["8", "9.compact", "10", "11"], ["0", "1"], True),
    (["8", "9.compact", "10"], ["9"], False),
    (["0", "1", ".0.crc", "1.tmp"], ["0", "1"], False),
])
def test_a_parquet_folder_of_another_checkpoint_is_refused(logged, commits, refused):
    assert (tables.file_log_refusal(logged, commits, "/t") is not None) == refused
