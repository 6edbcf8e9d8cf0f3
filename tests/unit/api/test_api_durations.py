"""Durations, quantities, Spark memory sizes and Spark SQL types: table tests of the parsers."""

from datetime import timedelta

import pytest

from streamapp_api.durations import (
    cel_millis, is_duration, parse_duration, parse_quantity, spark_interval, spark_memory, spark_memory_mib,
)
from streamapp_api.sources import SparkTypeError, parse_spark_type

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text, expected", [
    ("500ms", timedelta(milliseconds=500)),
    ("30s", timedelta(seconds=30)),
    ("1m", timedelta(minutes=1)),
    ("10m", timedelta(minutes=10)),
    ("1h", timedelta(hours=1)),
    ("1d", timedelta(days=1)),
    ("90s", timedelta(seconds=90)),
])
def test_durations_parse(text, expected):
    assert is_duration(text)
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "0s", "30", "30sec", "1w", "1.5h", "-1m", "1h30m", " 1m", "1M", "01m"])
def test_malformed_durations_are_refused(text):
    assert not is_duration(text)
    with pytest.raises(ValueError, match="ms, s, m, h or d"):
        parse_duration(text)


@pytest.mark.parametrize("text, expected", [("10s", "10 seconds"), ("1m", "60 seconds"), ("1d", "86400 seconds"),
                                            ("250ms", "250 milliseconds")])
def test_spark_interval(text, expected):
    assert spark_interval(text) == expected


@pytest.mark.parametrize("text", ["500ms", "30s", "1d"])
def test_cel_millis_handles_every_unit(text):
    # The rule is evaluated by the real API server in the test bed (invalid manifests with hopping
    # windows and backoffs); here: every unit has a branch and days never reach CEL's duration().
    expr = cel_millis("self.size")
    unit = text.lstrip("0123456789")
    assert f"endsWith('{unit}')" in expr or unit == "d"
    assert "duration(" not in expr and "86400000" in expr


@pytest.mark.parametrize("text, expected", [("10Gi", 10 * 2**30), ("500Mi", 500 * 2**20), ("1G", 10**9), ("1.5Gi", int(1.5 * 2**30))])
def test_quantities(text, expected):
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["10GB", "ten", "", "10 Gi", "-1Gi"])
def test_bad_quantities(text):
    with pytest.raises(ValueError, match="Kubernetes quantity"):
        parse_quantity(text)


@pytest.mark.parametrize("text, mib", [("512m", 512), ("2g", 2048), ("2Gi", 2048), ("1t", 1024 * 1024), ("1024k", 1)])
def test_spark_memory(text, mib):
    assert spark_memory_mib(text) == mib
    assert spark_memory(text) == f"{mib}m"


@pytest.mark.parametrize("text", ["2GB", "2", "0g", "2 g", "2G", "1.5g"])
def test_bad_spark_memory(text):
    with pytest.raises(ValueError, match="512m"):
        spark_memory_mib(text)


@pytest.mark.parametrize("text, normalised", [
    ("string", "string"), ("LONG", "long"), ("timestamp", "timestamp"), ("decimal(10,2)", "decimal(10,2)"),
    ("array<string>", "array<string>"), ("map<string, double>", "map<string,double>"),
    ("array<struct<item_code:string, qty:int>>", "array<struct<item_code:string,qty:int>>"),
])
def test_spark_types(text, normalised):
    assert parse_spark_type(text) == normalised


@pytest.mark.parametrize("text", ["varchar(20)", "array<string", "struct<>", "map<string>", "string string", "", "array<>"])
def test_bad_spark_types(text):
    with pytest.raises(SparkTypeError):
        parse_spark_type(text)
