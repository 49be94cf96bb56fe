"""The header-only view the broker uses: field reads, validation, in-place rewrites."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from brokernodes.errors import CorruptRecordError, MessageTooLargeError
from brokernodes.records.batch import Record, decode_batch, encode_batch
from brokernodes.records.compression import Compression
from brokernodes.records.header import (
    CONTROL_BIT,
    DELETE_HORIZON_BIT,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    iter_batches,
    peek_batch_size,
    read_header,
    set_base_offset,
    set_partition_leader_epoch,
    validate_batch,
)

from .strategies import INT32, INT64, codecs, record_lists

RECORDS = [Record(1_700_000_000_000 + i, b"k%d" % i, b"value %d" % i) for i in range(5)]


def batch(**kwargs) -> bytes:
    return encode_batch(RECORDS, **kwargs)


def with_crc(buf: bytearray) -> bytearray:
    """Recompute the CRC after editing a CRC'd field, to reach the checks behind it."""
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return buf


def test_constants_are_kafkas():
    assert (HEADER_SIZE, LOG_OVERHEAD) == (61, 12)
    assert (TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT, CONTROL_BIT, DELETE_HORIZON_BIT) == (
        0x08,
        0x10,
        0x20,
        0x40,
    )


def test_read_header_reads_every_field_at_kafkas_positions():
    buf = b"junk" + batch(
        base_offset=1234,
        partition_leader_epoch=7,
        producer_id=99,
        producer_epoch=3,
        base_sequence=42,
        compression=Compression.LZ4,
        is_transactional=True,
    )
    header = read_header(buf, 4)
    raw = struct.unpack_from(">qiibIhiqqqhii", buf, 4)
    assert header.position == 4
    assert (
        header.base_offset,
        header.batch_length,
        header.partition_leader_epoch,
        header.magic,
        header.crc,
        header.attributes,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.records_count,
    ) == raw
    assert raw[0] == 1234 and raw[2] == 7 and raw[3] == 2
    assert raw[9:13] == (99, 3, 42, 5)
    assert header.size == len(buf) - 4
    assert (header.last_offset, header.next_offset) == (1238, 1239)
    assert header.compression == Compression.LZ4
    assert header.is_transactional and not header.is_control
    assert header.timestamp_type == 0 and not header.has_delete_horizon


def test_attribute_properties():
    header = read_header(
        batch(is_control=True, timestamp_type=1, delete_horizon_ms=5, compression=4)
    )
    assert header.is_control and header.timestamp_type == 1 and header.has_delete_horizon
    assert header.compression == Compression.ZSTD and not header.is_transactional


def test_read_header_needs_61_bytes():
    with pytest.raises(CorruptRecordError, match="truncated batch header at byte 0: need 61"):
        read_header(batch()[:60])


def test_validate_accepts_a_good_batch_anywhere_in_a_buffer():
    good = batch()
    buf = bytearray(b"\x00" * 10 + good + b"trailing")
    header = validate_batch(buf, 10)
    assert header.size == len(good)
    assert validate_batch(memoryview(buf), 10) == header


def test_wrong_crc_is_refused():
    buf = bytearray(batch())
    buf[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="fails its CRC-32C check"):
        validate_batch(buf)
    assert validate_batch(buf, verify_crc=False).records_count == 5


def test_crc_covers_attributes_onward():
    for at in (21, 30, HEADER_SIZE, HEADER_SIZE + 3):
        buf = bytearray(batch())
        buf[at] ^= 0x40
        with pytest.raises(CorruptRecordError, match="CRC"):
            validate_batch(buf)


def test_wrong_magic_is_refused():
    buf = bytearray(batch())
    buf[16] = 1
    with pytest.raises(CorruptRecordError, match="magic 1; Sluice accepts only RecordBatch v2"):
        validate_batch(buf)


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_compression_codec_is_refused_by_the_header_view(codec_id):
    buf = bytearray(batch())
    struct.pack_into(">h", buf, 21, codec_id)
    with pytest.raises(CorruptRecordError, match=f"compression codec id {codec_id}"):
        validate_batch(with_crc(buf))


@pytest.mark.parametrize("size", [0, 5, 11])
def test_truncated_length_prefix_is_refused(size):
    with pytest.raises(CorruptRecordError, match="less than the 12-byte offset and length"):
        validate_batch(batch()[:size])


@pytest.mark.parametrize("length", [-1, 0, 48, -(2**31)])
def test_length_shorter_than_the_header_is_refused(length):
    buf = bytearray(batch())
    struct.pack_into(">i", buf, 8, length)
    with pytest.raises(CorruptRecordError, match=f"declares length {length}, shorter than"):
        validate_batch(buf)
    with pytest.raises(CorruptRecordError, match="shorter than the 49-byte minimum"):
        peek_batch_size(buf)


def test_truncated_batch_is_refused():
    good = batch()
    with pytest.raises(CorruptRecordError, match=f"declares {len(good)} bytes but only 70"):
        validate_batch(good[:70])


def test_batch_over_max_bytes_is_refused():
    good = batch()
    assert validate_batch(good, max_batch_bytes=len(good)).size == len(good)
    with pytest.raises(MessageTooLargeError, match=f"over max.message.bytes={len(good) - 1}"):
        validate_batch(good, max_batch_bytes=len(good) - 1)
    # Refused from the length prefix alone, before the rest has even arrived.
    with pytest.raises(MessageTooLargeError):
        validate_batch(good[:12], max_batch_bytes=100)


def test_negative_counts_are_refused():
    buf = bytearray(batch())
    struct.pack_into(">i", buf, 57, -1)
    with pytest.raises(CorruptRecordError, match="negative record count"):
        validate_batch(with_crc(buf))


def test_peek_batch_size():
    good = batch()
    assert peek_batch_size(good[:11]) is None
    assert peek_batch_size(good[:12]) == len(good)
    assert peek_batch_size(b"xx" + good, 2) == len(good)


def test_iter_batches_walks_back_to_back_batches():
    first, second = batch(base_offset=0), batch(base_offset=5, compression=Compression.GZIP)
    headers = list(iter_batches(first + second))
    assert [(h.position, h.base_offset) for h in headers] == [(0, 0), (len(first), 5)]
    assert list(iter_batches(b"")) == []


def test_iter_batches_refuses_a_torn_tail():
    buf = batch() + batch()[:30]
    walked = iter_batches(buf)
    next(walked)
    with pytest.raises(CorruptRecordError, match="truncated batch"):
        next(walked)


def test_set_base_offset_and_epoch_in_place():
    buf = bytearray(b"pad" + batch())
    set_base_offset(buf, 3, 10_000)
    set_partition_leader_epoch(buf, 3, 12)
    header = validate_batch(buf, 3)
    assert (header.base_offset, header.partition_leader_epoch) == (10_000, 12)
    assert [r.offset for r in decode_batch(buf, 3).records] == list(range(10_000, 10_005))
    view = memoryview(buf)
    set_base_offset(view, 3, 7)
    assert validate_batch(buf, 3).base_offset == 7


@settings(max_examples=60, deadline=None)
@given(record_lists(max_size=8), codecs, INT64, INT32)
def test_rewrites_keep_the_crc_valid(records, codec, base_offset, epoch):
    buf = bytearray(encode_batch(records, compression=codec))
    set_base_offset(buf, 0, base_offset)
    set_partition_leader_epoch(buf, 0, epoch)
    header = validate_batch(buf)
    assert (header.base_offset, header.partition_leader_epoch) == (base_offset, epoch)


@settings(max_examples=60, deadline=None)
@given(
    record_lists(max_size=10),
    codecs,
    st.integers(0, 2**40),
    st.booleans(),
    st.booleans(),
    st.none() | st.integers(0, 2**42),
)
def test_header_view_agrees_with_full_decode(records, codec, base, txn, control, horizon):
    buf = encode_batch(
        records,
        base_offset=base,
        compression=codec,
        is_transactional=txn,
        is_control=control,
        delete_horizon_ms=horizon,
        producer_id=5,
        producer_epoch=1,
        base_sequence=9,
    )
    header = validate_batch(buf)
    decoded = decode_batch(buf)
    assert decoded.header == header
    assert header.records_count == len(decoded.records) == len(records)
    assert header.compression == codec
    assert (header.is_transactional, header.is_control) == (txn, control)
    assert decoded.delete_horizon_ms == horizon
    if records:
        assert header.last_offset == decoded.records[-1].offset
        assert header.max_timestamp == max(r.timestamp for r in decoded.records)
        assert header.base_timestamp == (records[0].timestamp if horizon is None else horizon)
