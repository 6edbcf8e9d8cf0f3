"""Protobuf values to columns (streamapp_runtime.compile.protobuf_values): the wire format's message
indexes, which message they name, and how fields become column values; pure, no JVM."""

from __future__ import annotations

import io
from datetime import datetime, timezone

import pytest
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DoubleType, FloatType, IntegerType, LongType, MapType,
                               StringType, StructField, StructType, TimestampNTZType, TimestampType)

from streamapp_api.protobuf_schemas import field_problem

from streamapp_runtime.compile.protobuf_values import (DescriptorSetMessages, ProtobufDecoder, UnreadableRecord,
                                                       message_indexes, message_name, missing_fields, struct_reader,
                                                       zigzag_decode)
from streamapp_testkit.protobuf import descriptor_set, message_classes, proto3_file

pytestmark = pytest.mark.unit

ORDER = proto3_file("order.proto", "shop.v1", {
    "Order": [("id", 1, "string"), ("amount", 2, "double"), ("qty", 3, "int32"), ("at", 4, "google.protobuf.Timestamp"),
              ("tier", 5, "Tier"), ("tags", 6, "string", "repeated"), ("attrs", 7, "map<string,int64>"),
              ("item", 8, "Item"), ("note", 9, "string", "optional"), ("coupon", 10, "google.protobuf.StringValue"),
              ("big", 11, "uint64"), ("blob", 12, "bytes"), ("count", 13, "google.protobuf.Int64Value")],
    "Item": [("sku", 1, "string"), ("n", 2, "int64")],
}, enums={"Tier": ["FREE", "GOLD"]}, nested={"Item": {"Part": [("code", 1, "string")], "Other": []}})
CLASSES = message_classes(ORDER)


def _struct(**columns) -> StructType:
    return StructType([StructField(name, data_type) for name, data_type in columns.items()])


def _confluent_indexes(indexes: list[int]) -> bytes:
    """The message indexes as the users' client writes them (confluent-kafka's ProtobufSerializer)."""
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    buf = io.BytesIO()
    ProtobufSerializer._encode_varints(buf, indexes)
    return buf.getvalue()


@pytest.mark.parametrize("n, want", [(0, 0), (1, -1), (2, 1), (3, -2), (4, 2), (4294967294, 2147483647)])
def test_zigzag(n, want):
    assert zigzag_decode(n) == want


@pytest.mark.parametrize("indexes", [[0], [1], [0, 0], [2, 1], [0, 3, 1], [70], [300, 5]])
def test_message_indexes_read_what_the_serializer_writes(indexes):
    data = b"\x00\x00\x00\x00\x07" + _confluent_indexes(indexes) + b"payload"
    assert message_indexes(data, 5) == (indexes, len(data) - len(b"payload"))


def test_a_lone_zero_is_the_first_message():
    assert _confluent_indexes([0]) == b"\x00"
    assert message_indexes(b"\x00", 0) == ([0], 1)


@pytest.mark.parametrize("data, reason", [
    (b"", "a truncated varint"),
    (b"\x02", "a count of 1 with 0 bytes left"),
    (b"\x01", "a count of -1"),
    (b"\x02\x01", "a negative index -1"),
    (b"\x04\x02\x80", "a truncated varint"),
    (b"\xff" * 11, "a varint of more than 10 bytes"),
])
def test_malformed_message_indexes_say_why(data, reason):
    with pytest.raises(UnreadableRecord, match=reason):
        message_indexes(data, 0)


@pytest.mark.parametrize("indexes, name", [
    ([0], "shop.v1.Order"), ([1], "shop.v1.Item"), ([1, 0], "shop.v1.Item.Part"), ([1, 1], "shop.v1.Item.Other"),
])
def test_message_indexes_name_a_message_of_the_schema(indexes, name):
    assert message_name(ORDER, indexes) == name


@pytest.mark.parametrize("indexes, reason", [
    ([2], "the schema has 2 top-level messages"), ([1, 2], "the schema has 2 messages nested in Item"),
])
def test_message_indexes_out_of_the_schema(indexes, reason):
    with pytest.raises(UnreadableRecord, match=reason):
        message_name(ORDER, indexes)


def _order(**fields):
    order = CLASSES["Order"](**fields)
    order.at.FromDatetime(datetime(2026, 1, 1, 10, 0, 0, 123456))
    return order


def test_fields_become_columns_by_name_and_type():
    order = _order(id="o1", amount=2.5, qty=3, tier=1, tags=["a", "b"], item=CLASSES["Item"](sku="s", n=2), blob=b"\x01")
    order.attrs["x"] = 7
    order.coupon.value = "SAVE"
    columns = _struct(id=StringType(), amount=DoubleType(), qty=LongType(), at=TimestampType(), tier=StringType(),
                      tags=ArrayType(StringType()), attrs=MapType(StringType(), LongType()),
                      item=_struct(sku=StringType(), gone=StringType()), note=StringType(), coupon=StringType(),
                      count=LongType(), blob=BinaryType(), absent=IntegerType())

    row = struct_reader(order.DESCRIPTOR, columns)(order)

    assert row == {"id": "o1", "amount": 2.5, "qty": 3, "at": datetime(2026, 1, 1, 10, 0, 0, 123456, tzinfo=timezone.utc),
                   "tier": "GOLD", "tags": ["a", "b"], "attrs": {"x": 7}, "item": {"sku": "s", "gone": None},
                   "note": None, "coupon": "SAVE", "count": None, "blob": b"\x01", "absent": None}


def test_unset_fields_are_null_where_protobuf_can_tell_and_the_default_where_it_cannot():
    empty = CLASSES["Order"]()
    columns = _struct(id=StringType(), qty=IntegerType(), at=TimestampNTZType(), item=_struct(sku=StringType()),
                      note=StringType(), coupon=StringType(), tags=ArrayType(StringType()),
                      attrs=MapType(StringType(), LongType()), tier=IntegerType())

    row = struct_reader(empty.DESCRIPTOR, columns)(empty)

    assert row == {"id": "", "qty": 0, "at": None, "item": None, "note": None, "coupon": None, "tags": [], "attrs": {},
                   "tier": 0}


def test_a_field_whose_type_does_not_fit_its_column_is_named():
    columns = _struct(id=LongType(), qty=IntegerType(), amount=IntegerType(), tags=StringType(), item=StringType())
    with pytest.raises(TypeError) as refused:
        struct_reader(CLASSES["Order"].DESCRIPTOR, columns)
    assert str(refused.value) == (
        "field 'id': string does not fit a bigint column; field 'amount': double does not fit a int column; "
        "field 'tags': a repeated string does not fit a string column; field 'item': shop.v1.Item does not fit a "
        "string column")


def test_a_value_out_of_its_columns_range_makes_the_record_unreadable():
    read = struct_reader(CLASSES["Order"].DESCRIPTOR, _struct(big=LongType()))
    assert read(CLASSES["Order"](big=2**63 - 1)) == {"big": 2**63 - 1}
    with pytest.raises(UnreadableRecord, match="field 'big': 18446744073709551615 is out of the range of bigint"):
        read(CLASSES["Order"](big=2**64 - 1))


def test_missing_fields_names_nested_ones():
    columns = _struct(id=StringType(), typo=StringType(), item=_struct(sku=StringType(), colour=StringType()))
    assert missing_fields(CLASSES["Order"].DESCRIPTOR, columns) == ["typo", "item.colour"]


def test_a_descriptor_set_decodes_plain_payloads_and_says_why_it_cannot():
    decoder = ProtobufDecoder(DescriptorSetMessages(descriptor_set(ORDER), "shop.v1.Order"),
                              _struct(id=StringType(), qty=IntegerType()))
    assert decoder.decode(CLASSES["Order"](id="o1", qty=2).SerializeToString()) == ({"id": "o1", "qty": 2}, None)
    record, error = decoder.decode(b"\x0a\x05ab")
    assert record is None and error.startswith("malformed Protobuf for shop.v1.Order: ")
    assert decoder.decode(None) == (None, "null value: a stream record needs a Protobuf value")


def test_a_descriptor_set_without_the_message_lists_what_it_has():
    with pytest.raises(ValueError, match=r"message 'shop.v1.Ordr' is not in the descriptor set \(its top-level "
                                         r"messages: shop.v1.Item, shop.v1.Order\)"):
        DescriptorSetMessages(descriptor_set(ORDER), "shop.v1.Ordr").descriptor()


def test_a_descriptor_set_travels_without_its_descriptors():
    import pickle

    messages = DescriptorSetMessages(descriptor_set(ORDER), "shop.v1.Order")
    messages.descriptor()
    copy = pickle.loads(pickle.dumps(messages))
    assert copy.descriptor().full_name == "shop.v1.Order"


SIMPLE_TYPES = [IntegerType(), LongType(), DoubleType(), FloatType(), StringType(), BooleanType(), BinaryType(),
                TimestampType(), TimestampNTZType()]


@pytest.mark.parametrize("field", [f.name for f in CLASSES["Order"].DESCRIPTOR.fields])
def test_the_start_refuses_the_column_types_validate_refuses(field):
    """streamapp validate (streamapp_api.protobuf_schemas, no Spark) and the runtime agree on which
    column types fit each field."""
    from streamapp_runtime.compile.protobuf_values import check_columns

    order = CLASSES["Order"].DESCRIPTOR
    fd = order.fields_by_name[field]
    for column in [*SIMPLE_TYPES, ArrayType(StringType()), ArrayType(LongType()), MapType(StringType(), LongType()),
                   _struct(sku=StringType()), _struct(sku=StringType(), n=IntegerType())]:
        try:
            check_columns(order, _struct(**{field: column}), "Order")
            runtime = None
        except ValueError as exc:
            runtime = str(exc)
        assert (field_problem(fd, column.simpleString()) is None) == (runtime is None), (column.simpleString(), runtime)
