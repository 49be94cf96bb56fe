"""The leader's batch rewrites: LogAppendTime (header fields and CRC only) and recompression
to a topic's codec, each checked by decoding the result with the full reader."""

from __future__ import annotations

import pytest

from brokernodes.errors import CorruptRecordError, MessageTooLargeError
from brokernodes.records.batch import Record, decode_batch, encode_batch
from brokernodes.records.compression import Compression
from brokernodes.records.header import HEADER_SIZE, read_header, validate_batch
from brokernodes.records.rewrite import recompress_batch, set_log_append_time

CODECS = list(Compression)
RECORDS = [
    Record(1_700_000_000_000 + i, f"k{i}".encode(), b"value %d " % i * 20, (("h", b"v"),))
    for i in range(50)
]


def _batch(codec: int = Compression.NONE) -> bytearray:
    return bytearray(
        encode_batch(
            RECORDS,
            base_offset=7,
            compression=codec,
            producer_id=42,
            producer_epoch=3,
            base_sequence=100,
            partition_leader_epoch=5,
        )
    )


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_log_append_time_sets_type_bit_max_timestamp_and_a_valid_crc(codec):
    buf = _batch(codec)
    before = read_header(buf)
    records_before = bytes(buf[HEADER_SIZE:])
    set_log_append_time(buf, 0, 1_800_000_000_123)
    h = validate_batch(buf)  # the CRC check passes
    assert h.timestamp_type == 1
    assert h.max_timestamp == 1_800_000_000_123
    assert h.base_timestamp == before.base_timestamp  # as Kafka's setMaxTimestamp leaves it
    assert h.compression == codec
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, 100)
    assert bytes(buf[HEADER_SIZE:]) == records_before  # no record byte touched
    decoded = decode_batch(buf)
    assert [r.timestamp for r in decoded.records] == [1_800_000_000_123] * len(RECORDS)
    assert [r.value for r in decoded.records] == [r.value for r in RECORDS]


def test_log_append_time_at_an_offset_in_a_request_leaves_its_neighbours():
    first, second = _batch(), _batch(Compression.LZ4)
    buf = bytearray(first + second)
    set_log_append_time(buf, len(first), 99)
    assert bytes(buf[: len(first)]) == bytes(first)
    assert validate_batch(buf, len(first)).max_timestamp == 99


@pytest.mark.parametrize("source", CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("target", CODECS, ids=lambda c: c.name.lower())
def test_recompression_round_trips_every_codec_pair(source, target):
    buf = _batch(source)
    header = validate_batch(buf)
    out = recompress_batch(buf, header, int(target), 1 << 24)
    h = validate_batch(out)  # length and CRC are right
    assert h.compression == target
    assert h.size == len(out)
    for name in (
        "base_offset",
        "partition_leader_epoch",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
    ):
        assert getattr(h, name) == getattr(header, name), name
    assert h.attributes & ~0x07 == header.attributes & ~0x07
    original = decode_batch(buf).records
    assert decode_batch(out).records == original


def test_recompression_keeps_log_append_time_and_transactional_bits():
    buf = bytearray(
        encode_batch(RECORDS[:3], timestamp_type=1, is_transactional=True, producer_id=1)
    )
    out = recompress_batch(buf, validate_batch(buf), int(Compression.ZSTD), 1 << 20)
    h = validate_batch(out)
    assert h.timestamp_type == 1 and h.is_transactional and h.compression == Compression.ZSTD


def test_recompression_inflates_within_the_cap():
    buf = _batch(Compression.GZIP)
    with pytest.raises(MessageTooLargeError):
        recompress_batch(buf, validate_batch(buf), int(Compression.NONE), 1000)


def test_recompression_of_a_corrupt_payload_is_corrupt_message():
    buf = _batch(Compression.ZSTD)
    buf[HEADER_SIZE + 4 : HEADER_SIZE + 12] = b"\xff" * 8
    with pytest.raises(CorruptRecordError):
        recompress_batch(buf, read_header(buf), int(Compression.LZ4), 1 << 20)
