"""Whole-batch encode/decode: exact layout, every header field and flag, bad input refused."""

from __future__ import annotations

import contextlib
import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from brokernodes.errors import (
    CorruptRecordError,
    InvalidRecordError,
    MessageTooLargeError,
    UnsupportedCompressionError,
)
from brokernodes.records.batch import (
    DecodedRecord,
    Record,
    decode_batch,
    decode_batches,
    encode_batch,
)
from brokernodes.records.compression import Compression, compress
from brokernodes.records.varint import encode_varint, encode_varlong

from .strategies import codecs, record_lists

REGION = struct.Struct(">hiqqqhii")


def raw_batch(records: bytes, count: int, *, attributes: int = 0, last_delta: int = 0) -> bytes:
    """A batch around arbitrary record bytes, with a correct CRC, built without the encoder."""
    region = REGION.pack(attributes, last_delta, 1000, 1000, -1, -1, -1, count) + records
    return struct.pack(">qiibI", 0, 49 + len(records), 0, 2, crc32c(region)) + region


def raw_record(*fields: bytes, length_adjust: int = 0) -> bytes:
    body = b"".join(fields)
    return encode_varint(len(body) + length_adjust) + body


def expected_decoded(records: list[Record], base_offset: int = 0) -> list[DecodedRecord]:
    out, delta = [], -1
    for r in records:
        delta = delta + 1 if r.offset_delta is None else r.offset_delta
        out.append(DecodedRecord(base_offset + delta, r.timestamp, r.key, r.value, list(r.headers)))
    return out


# --- layout ---------------------------------------------------------------------------------


def test_exact_bytes_of_a_small_batch():
    buf = encode_batch(
        [
            Record(1000, b"k", b"v", [("h", b"x")]),
            Record(1003, None, None, [("n", None)], 2),
        ],
        base_offset=5,
        partition_leader_epoch=3,
        producer_id=77,
        producer_epoch=2,
        base_sequence=10,
    )
    first = bytes.fromhex("18 00 00 00 02 6b 02 76 02 02 68 02 78".replace(" ", ""))
    #   len=12 attrs tsΔ=0 offΔ=0 key "k" value "v" 1 header "h" -> "x"
    second = bytes.fromhex("12 00 06 04 01 01 02 02 6e 01".replace(" ", ""))
    #   len=9 attrs tsΔ=3 offΔ=2 key null value null 1 header "n" -> null
    region = REGION.pack(0, 2, 1000, 1003, 77, 2, 10, 2) + first + second
    expected = struct.pack(">qiibI", 5, 49 + len(first + second), 3, 2, crc32c(region)) + region
    assert buf == expected
    assert decode_batch(buf).records == [
        DecodedRecord(5, 1000, b"k", b"v", [("h", b"x")]),
        DecodedRecord(7, 1003, None, None, [("n", None)]),
    ]


def test_empty_key_and_value_differ_from_null():
    buf = encode_batch([Record(1, b"", b""), Record(2, None, None)])
    records = decode_batch(buf).records
    assert (records[0].key, records[0].value) == (b"", b"")
    assert (records[1].key, records[1].value) == (None, None)


def test_plain_tuples_and_iterators_are_accepted():
    as_records = encode_batch([Record(1, b"k", b"v"), Record(2, b"k", None, [("a", b"b")])])
    assert encode_batch([(1, b"k", b"v"), (2, b"k", None, [("a", b"b")])]) == as_records
    assert encode_batch(iter([Record(1, b"k", b"v"), Record(2, b"k", None, [("a", b"b")])])) == (
        as_records
    )


def test_bytes_like_keys_values_and_header_keys():
    buf = encode_batch([Record(1, bytearray(b"k"), memoryview(b"v"), [(b"raw", b"1")])])
    assert decode_batch(buf).records[0][2:] == (b"k", b"v", [("raw", b"1")])


def test_large_fields_use_long_varints():
    records = [Record(2**62, b"k" * 20_000, b"v" * 70_000, [("h" * 300, b"x" * 17_000)], 40_000)]
    decoded = decode_batch(encode_batch(records, base_offset=2**40))
    assert decoded.records == expected_decoded(records, 2**40)
    assert decoded.header.last_offset_delta == 40_000


def test_out_of_order_timestamps_give_negative_deltas():
    records = [Record(5000, None, b"a"), Record(10, None, b"b"), Record(9000, None, b"c")]
    decoded = decode_batch(encode_batch(records))
    assert [r.timestamp for r in decoded.records] == [5000, 10, 9000]
    assert (decoded.header.base_timestamp, decoded.header.max_timestamp) == (5000, 9000)


def test_empty_batch():
    decoded = decode_batch(encode_batch([], base_offset=9, producer_id=3, producer_epoch=0))
    assert decoded.records == []
    header = decoded.header
    assert (header.records_count, header.last_offset_delta) == (0, 0)
    assert (header.base_timestamp, header.max_timestamp) == (-1, -1)
    assert header.producer_id == 3


# --- header fields and flags ----------------------------------------------------------------


def test_producer_fields_and_defaults():
    default = decode_batch(encode_batch([Record(1, b"k", b"v")])).header
    assert (default.producer_id, default.producer_epoch, default.base_sequence) == (-1, -1, -1)
    assert default.partition_leader_epoch == -1 and default.attributes == 0
    header = decode_batch(
        encode_batch(
            [Record(1, b"k", b"v")] * 1,
            producer_id=2**62,
            producer_epoch=32767,
            base_sequence=2**31 - 1,
            partition_leader_epoch=2**31 - 1,
        )
    ).header
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
        2**62,
        32767,
        2**31 - 1,
    )
    assert header.partition_leader_epoch == 2**31 - 1


@pytest.mark.parametrize(
    ("kwargs", "attributes"),
    [
        ({"compression": Compression.GZIP}, 0x01),
        ({"compression": Compression.SNAPPY}, 0x02),
        ({"compression": Compression.LZ4}, 0x03),
        ({"compression": Compression.ZSTD}, 0x04),
        ({"timestamp_type": 1}, 0x08),
        ({"is_transactional": True}, 0x10),
        ({"is_control": True}, 0x20),
        ({"delete_horizon_ms": 123}, 0x40),
        ({"is_transactional": True, "is_control": True, "compression": 4}, 0x34),
    ],
)
def test_attribute_bits(kwargs, attributes):
    buf = encode_batch([Record(1000, b"k", b"v")], **kwargs)
    assert struct.unpack_from(">h", buf, 21)[0] == attributes
    assert decode_batch(buf).header.attributes == attributes


def test_log_append_time_gives_every_record_the_max_timestamp():
    decoded = decode_batch(
        encode_batch([Record(1000, None, b"a"), Record(2000, None, b"b")], timestamp_type=1)
    )
    assert decoded.header.timestamp_type == 1
    assert [r.timestamp for r in decoded.records] == [2000, 2000]


def test_delete_horizon_is_the_base_timestamp():
    """KIP-534: bit 6 set, the base timestamp holds the horizon, deltas count from it."""
    records = [Record(5000, b"k", None), Record(7000, b"j", b"v")]
    buf = encode_batch(records, delete_horizon_ms=90_000)
    decoded = decode_batch(buf)
    assert decoded.delete_horizon_ms == 90_000
    assert decoded.header.base_timestamp == 90_000
    assert decoded.header.max_timestamp == 7000
    assert [r.timestamp for r in decoded.records] == [5000, 7000]
    assert encode_varlong(5000 - 90_000) in buf
    assert decode_batch(encode_batch(records)).delete_horizon_ms is None


def test_control_batch_with_an_end_transaction_marker():
    key = struct.pack(">hh", 0, 1)  # version 0, COMMIT
    value = struct.pack(">hi", 0, 5)  # version 0, coordinator epoch 5
    decoded = decode_batch(
        encode_batch(
            [Record(1000, key, value)],
            is_control=True,
            is_transactional=True,
            producer_id=9,
            producer_epoch=1,
        )
    )
    assert decoded.header.is_control and decoded.header.is_transactional
    assert decoded.records[0].key == key and decoded.records[0].value == value


def test_decode_batches_walks_several():
    first = encode_batch([Record(1, b"a", b"1")], base_offset=0)
    second = encode_batch([Record(2, b"b", b"2")] * 1, base_offset=1, compression=3)
    batches = decode_batches(first + second)
    assert [b.records[0].offset for b in batches] == [0, 1]
    assert decode_batches(b"") == []
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_batches(first + second[:-1])


def test_decode_at_a_position_in_a_memoryview():
    buf = b"xyz" + encode_batch([Record(1, b"a", b"1")], compression=Compression.ZSTD)
    assert decode_batch(memoryview(buf), 3).records[0].value == b"1"


# --- round trips ----------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(record_lists(), codecs, st.integers(0, 2**62))
def test_round_trip(records, codec, base_offset):
    buf = encode_batch(records, compression=codec, base_offset=base_offset)
    decoded = decode_batch(buf)
    assert decoded.records == expected_decoded(records, base_offset)
    assert decoded.header.compression == codec
    assert decoded.header.size == len(buf)


@settings(max_examples=40, deadline=None)
@given(record_lists(min_size=1, max_size=5), codecs)
def test_decode_batches_round_trip(records, codec):
    bufs = [encode_batch(records, compression=codec, base_offset=i * 100) for i in range(3)]
    decoded = decode_batches(b"".join(bufs))
    assert [d.records for d in decoded] == [expected_decoded(records, i * 100) for i in range(3)]


# --- encoder refusals -----------------------------------------------------------------------


def test_offset_deltas_must_increase():
    with pytest.raises(InvalidRecordError, match="offset delta 3, not above the previous 3"):
        encode_batch([Record(1, None, b"a", (), 3), Record(1, None, b"b", (), 3)])
    with pytest.raises(InvalidRecordError, match="offset delta 0, not above the previous 0"):
        encode_batch([Record(1, None, b"a"), Record(1, None, b"b", (), 0)])


def test_negative_timestamp_is_refused():
    assert decode_batch(encode_batch([Record(-1, None, b"a")])).records[0].timestamp == -1
    with pytest.raises(InvalidRecordError, match="record 1 has negative timestamp -5"):
        encode_batch([Record(1, None, b"a"), Record(-5, None, b"a")])


@pytest.mark.parametrize(
    "record",
    [
        Record(1, "text key", b"v"),
        Record(1, b"k", 5),
        Record("now", b"k", b"v"),
        Record(1, b"k", b"v", [("h",)]),
        (1, b"k"),
    ],
)
def test_malformed_records_are_refused(record):
    with pytest.raises(InvalidRecordError, match="record 0 cannot be encoded"):
        encode_batch([record])


@pytest.mark.parametrize(
    "kwargs",
    [{"producer_id": 2**63}, {"producer_epoch": 40_000}, {"base_offset": -(2**64)}],
)
def test_header_fields_out_of_range_are_refused(kwargs):
    with pytest.raises(InvalidRecordError, match="out of range"):
        encode_batch([Record(1, b"k", b"v")], **kwargs)


def test_bad_timestamp_type_and_codec_are_refused():
    with pytest.raises(InvalidRecordError, match="timestamp type 2"):
        encode_batch([Record(1, b"k", b"v")], timestamp_type=2)
    with pytest.raises(UnsupportedCompressionError, match="codec id 6"):
        encode_batch([Record(1, b"k", b"v")], compression=6)


# --- decoder refusals -----------------------------------------------------------------------

GOOD = encode_batch([Record(1000 + i, b"k%d" % i, b"v" * i) for i in range(5)])


def test_decode_refuses_wrong_crc():
    buf = bytearray(GOOD)
    buf[70] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="fails its CRC-32C check"):
        decode_batch(buf)


def test_decode_refuses_wrong_magic():
    buf = bytearray(GOOD)
    buf[16] = 0
    with pytest.raises(CorruptRecordError, match="magic 0"):
        decode_batch(buf)


def test_decode_refuses_truncation_and_short_length():
    with pytest.raises(CorruptRecordError, match="truncated batch"):
        decode_batch(GOOD[:-1])
    with pytest.raises(CorruptRecordError, match="less than the 12-byte"):
        decode_batch(GOOD[:8])
    buf = bytearray(GOOD)
    struct.pack_into(">i", buf, 8, 20)
    with pytest.raises(CorruptRecordError, match="shorter than the 49-byte minimum"):
        decode_batch(buf)


def test_decode_refuses_batch_over_max_bytes():
    with pytest.raises(MessageTooLargeError, match=r"max\.message\.bytes=100"):
        decode_batch(GOOD, max_batch_bytes=100)


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_decode_refuses_unknown_codec(codec_id):
    buf = raw_batch(b"", 0, attributes=codec_id)
    with pytest.raises(UnsupportedCompressionError, match=f"codec id {codec_id}"):
        decode_batch(buf)


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4, Compression.ZSTD])
def test_decode_refuses_corrupt_compressed_payload(codec):
    payload = bytearray(compress(codec, GOOD[61:] * 20))
    payload[len(payload) // 2 :] = b"\x00" * (len(payload) - len(payload) // 2)
    with pytest.raises(CorruptRecordError, match=f"{codec.name.lower()} payload"):
        decode_batch(raw_batch(bytes(payload), 100, attributes=codec))


def test_decode_refuses_corrupt_snappy_payload():
    with pytest.raises(CorruptRecordError, match="snappy payload does not decompress"):
        decode_batch(raw_batch(b"\x40garbage that is not snappy", 1, attributes=2))


def test_decode_bounds_the_decompressed_size():
    buf = encode_batch([Record(1, None, bytes(100_000))], compression=Compression.GZIP)
    assert len(decode_batch(buf, max_records_bytes=200_000).records) == 1
    with pytest.raises(MessageTooLargeError, match="more than 50000 bytes"):
        decode_batch(buf, max_records_bytes=50_000)


def test_decode_refuses_count_above_records_present():
    records = GOOD[61:]
    with pytest.raises(InvalidRecordError, match="declares 6 records but holds only 5"):
        decode_batch(raw_batch(records, 6))


def test_decode_refuses_count_below_records_present():
    records = GOOD[61:]
    with pytest.raises(InvalidRecordError, match="declares 4 records but 13 bytes remain"):
        decode_batch(raw_batch(records, 4))


def test_decode_refuses_count_mismatch_inside_compressed_payload():
    payload = compress(Compression.ZSTD, GOOD[61:])
    with pytest.raises(InvalidRecordError, match="declares 9 records but holds only 5"):
        decode_batch(raw_batch(payload, 9, attributes=Compression.ZSTD))


MINIMAL = (b"\x00", b"\x00", b"\x00")  # attributes, timestamp delta, offset delta


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (raw_record(*MINIMAL, b"\x02k", b"\x02v", b"\x00", length_adjust=1), "declares length"),
        (raw_record(*MINIMAL, b"\x02k", b"\x02v", b"\x00", length_adjust=-1), "its fields take"),
        (raw_record(*MINIMAL, b"\x03", b"\x02v", b"\x00"), "key length -2"),
        (raw_record(*MINIMAL, b"\x01", b"\x05", b"\x00"), "value length -3"),
        (raw_record(*MINIMAL, b"\x01", b"\x01", b"\x01"), "header count -1"),
        (raw_record(*MINIMAL, b"\x01", b"\x01", b"\x02\x03", b"\x01"), "header key of negative"),
        (raw_record(*MINIMAL, b"\x01", b"\x01", b"\x02\x02\xff\x01"), "not UTF-8"),
        (raw_record(*MINIMAL, b"\x01", b"\x01", b"\x02\x02h\x05"), "header value of negative"),
        (raw_record(*MINIMAL, b"\x01", b"\x40abc"), "runs past the end"),
        (b"\x03" + b"\x00" * 10, "declares length -2"),
        (raw_record(b"\x00", b"\xff" * 11), "longer than 10 bytes"),
        (raw_record(b"\x00\x00", b"\xff\xff\xff\xff\x7f", b"\x01\x01\x00"), "too big"),
    ],
)
def test_decode_refuses_malformed_records(record, message):
    with pytest.raises(CorruptRecordError, match=message):
        decode_batch(raw_batch(record, 1))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80), st.integers(0, 4))
def test_decoding_random_record_bytes_fails_cleanly(records, count):
    with contextlib.suppress(CorruptRecordError, InvalidRecordError):
        decode_batch(raw_batch(records, count))


def test_deltas_outside_their_varint_range_are_refused():
    with pytest.raises(InvalidRecordError, match="int32 range"):
        encode_batch([Record(1, None, b"a", (), 2**31)])
    with pytest.raises(InvalidRecordError, match="int64 range"):
        encode_batch([Record(-1, None, b"a"), Record(2**63 - 1, None, b"b")])
    with pytest.raises(InvalidRecordError, match="out of range"):
        encode_batch([Record(2**63, None, b"a")])
