"""Zig-zag varints and varlongs: known encodings, round trips, refusal of bad bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.util import encode_varint as kafka_encode_varint

from brokernodes.errors import CorruptRecordError, InvalidRecordError
from brokernodes.records.varint import (
    NULL_LENGTH,
    TABLE_SIZE,
    VARINTS,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    size_of_varint,
    size_of_varlong,
)

from .strategies import INT32, INT64

# Pairs from Kafka's ByteUtilsTest and the protobuf zig-zag table.
KNOWN = [
    (0, b"\x00"),
    (-1, b"\x01"),
    (1, b"\x02"),
    (-2, b"\x03"),
    (63, b"\x7e"),
    (-64, b"\x7f"),
    (64, b"\x80\x01"),
    (-65, b"\x81\x01"),
    (8191, b"\xfe\x7f"),
    (8192, b"\x80\x80\x01"),
    (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
    (-(2**31), b"\xff\xff\xff\xff\x0f"),
]


def kafka_python_varint(value: int) -> bytes:
    out = bytearray()
    kafka_encode_varint(value, out.append)
    return bytes(out)


@pytest.mark.parametrize(("value", "encoded"), KNOWN)
def test_known_encodings(value, encoded):
    assert encode_varint(value) == encoded
    assert encode_varlong(value) == encoded
    assert decode_varint(encoded + b"junk", 0) == (value, len(encoded))
    assert size_of_varint(value) == len(encoded)


def test_varlong_extremes():
    assert encode_varlong(2**63 - 1) == b"\xfe" + b"\xff" * 8 + b"\x01"
    assert encode_varlong(-(2**63)) == b"\xff" * 9 + b"\x01"
    assert decode_varlong(b"\xff" * 9 + b"\x01", 0) == (-(2**63), 10)


def test_table_matches_slow_path():
    assert len(VARINTS) == TABLE_SIZE
    assert NULL_LENGTH == b"\x01"
    for value in (0, 1, 63, 64, 127, 128, 8191, 8192, TABLE_SIZE - 1):
        assert VARINTS[value] == kafka_python_varint(value)


@given(INT64)
def test_varlong_round_trip_and_agrees_with_kafka_python(value):
    encoded = encode_varlong(value)
    assert encoded == kafka_python_varint(value)
    assert len(encoded) == size_of_varlong(value)
    assert decode_varlong(b"\x00" + encoded, 1) == (value, 1 + len(encoded))


@given(INT32)
def test_varint_round_trip(value):
    encoded = encode_varint(value)
    assert len(encoded) <= 5
    assert decode_varint(encoded, 0) == (value, len(encoded))


@given(st.binary(max_size=12))
def test_decoding_random_bytes_never_crashes(data):
    try:
        value, end = decode_varlong(data, 0)
    except CorruptRecordError:
        return
    assert encode_varlong(value) == data[:end] or data[end - 1] == 0  # non-minimal forms


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1])
def test_encode_varint_refuses_values_outside_int32(value):
    with pytest.raises(InvalidRecordError, match="int32"):
        encode_varint(value)


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1])
def test_encode_varlong_refuses_values_outside_int64(value):
    with pytest.raises(InvalidRecordError, match="int64"):
        encode_varlong(value)


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff"])
def test_truncated_varint_is_corrupt(data):
    with pytest.raises(CorruptRecordError, match="ends inside a varint"):
        decode_varlong(data, 0)


def test_overlong_varlong_is_corrupt():
    with pytest.raises(CorruptRecordError, match="past 10 bytes"):
        decode_varlong(b"\x80" * 10 + b"\x01", 0)
    with pytest.raises(CorruptRecordError, match="int64"):
        decode_varlong(b"\xff" * 9 + b"\x7f", 0)


def test_varint_wider_than_int32_is_corrupt():
    with pytest.raises(CorruptRecordError, match="int32"):
        decode_varint(encode_varlong(2**31), 0)
    with pytest.raises(CorruptRecordError, match="int32"):
        decode_varint(b"\x80\x80\x80\x80\x80\x00", 0)
