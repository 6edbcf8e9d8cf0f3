"""What `streamapp validate` and the driver's start know of a Protobuf message without Spark
(streamapp_api.protobuf_schemas): the columns its fields read as, which declared column types fit them,
and, of a schema with several messages, the one the declared columns are checked against."""

from __future__ import annotations

import pytest

from streamapp_api.protobuf_schemas import field_problem, message_columns, struct_problem
from streamapp_api.registry_check import fitting_issues
from streamapp_api.registry_columns import RegisteredColumns
from streamapp_testkit.protobuf import message_classes, proto3_file

pytestmark = pytest.mark.unit

SHOP = proto3_file("shop.proto", "shop.v1", {
    "Order": [("id", 1, "string"), ("amount", 2, "double"), ("qty", 3, "int32"), ("at", 4, "google.protobuf.Timestamp"),
              ("tier", 5, "Tier"), ("tags", 6, "string", "repeated"), ("attrs", 7, "map<string,int64>"),
              ("lines", 8, "Line", "repeated"), ("coupon", 9, "google.protobuf.StringValue"), ("big", 10, "uint64"),
              ("blob", 11, "bytes"), ("ratio", 12, "float"), ("seen", 13, "uint32"), ("parent", 14, "Order")],
    "Line": [("sku", 1, "string"), ("n", 2, "int64")],
}, enums={"Tier": ["FREE", "GOLD"]})
ORDER = message_classes(SHOP)["Order"].DESCRIPTOR


def test_each_field_reads_as_the_spark_type_that_holds_it_without_widening():
    assert message_columns(ORDER) == {
        "id": "string", "amount": "double", "qty": "int", "at": "timestamp", "tier": "string",
        "tags": "array<string>", "attrs": "map<string,bigint>", "lines": "array<struct<sku:string,n:bigint>>",
        "coupon": "string", "big": "bigint", "blob": "binary", "ratio": "float", "seen": "bigint",
        "parent": "struct<...>",  # a message within itself: a column says how deep it reads
    }


@pytest.mark.parametrize("field, type_text", [
    ("qty", "int"), ("qty", "long"), ("qty", "BIGINT"), ("qty", "double"), ("seen", "double"), ("ratio", "double"),
    ("big", "bigint"), ("tier", "string"), ("tier", "int"), ("at", "timestamp"), ("at", "timestamp_ntz"),
    ("coupon", "string"), ("tags", "array<string>"), ("attrs", "map<string,long>"),
    ("lines", "array<struct<sku:string>>"), ("parent", "struct<id:string,parent:struct<qty:bigint>>"),
])
def test_the_column_types_a_field_fits(field, type_text):
    assert field_problem(ORDER.fields_by_name[field], type_text) is None


@pytest.mark.parametrize("field, type_text, problem", [
    ("id", "bigint", "string does not fit a bigint column"),
    ("qty", "float", "int32 does not fit a float column"),  # a float holds no int32 exactly
    ("seen", "int", "uint32 does not fit a int column"),
    ("amount", "float", "double does not fit a float column"),
    ("tags", "string", "a repeated string does not fit a string column"),
    ("attrs", "array<bigint>", "a map does not fit a array<bigint> column"),
    ("attrs", "map<string,int>", "int64 does not fit a int column"),
    ("lines", "array<struct<sku:string,qty:int>>", "no field 'qty' in shop.v1.Line"),
    ("at", "bigint", "google.protobuf.Timestamp does not fit a bigint column"),
    ("id", "strin", "'strin' is no Spark SQL type"),
])
def test_a_column_type_that_does_not_hold_the_fields_values_says_why(field, type_text, problem):
    assert problem in (field_problem(ORDER.fields_by_name[field], type_text) or "")


def test_a_struct_names_each_field_that_does_not_fit():
    assert struct_problem(ORDER, {"id": "string", "qty": "string", "nope": "int"}) == (
        "field 'qty': int32 does not fit a string column; no field 'nope' in shop.v1.Order")


def _registered(name: str, columns: dict[str, str]) -> RegisteredColumns:
    fits = {("n", "bigint"), ("n", "double"), ("user", "string")}
    return RegisteredColumns(name, columns, lambda c, t: None if (c, t) in fits else f"{columns[c]} does not fit")


def test_of_several_messages_the_declared_columns_are_checked_against_the_one_they_fit_best():
    page, click = _registered("shop.v1.Page", {"path": "string"}), _registered("shop.v1.Click", {"user": "string", "n": "bigint"})

    assert fitting_issues("s.schema", {"user": "string", "n": "double"}, [page, click], "clicks-value version 1") == []
    issues = fitting_issues("s.schema", {"user": "string", "n": "string", "x": "int"}, [page, click], "clicks-value version 1")
    assert [(i.severity, i.path, i.message) for i in issues] == [
        ("error", "s.schema[n]", "declared string; clicks-value version 1 shop.v1.Click has bigint: bigint does not fit, "
                                 "so the app would not start"),
        ("error", "s.schema[x]", "not a field of clicks-value version 1 shop.v1.Click (its fields: user, n)")]


def test_one_message_is_not_named():
    issues = fitting_issues("s.schema", {"x": "int"}, [_registered("shop.v1.Click", {"n": "bigint"})], "c-value version 2")
    assert [i.message for i in issues] == ["not a field of c-value version 2 (its fields: n)"]
