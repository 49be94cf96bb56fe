"""Produce-time record validation: batches with a valid CRC and garbage inside are refused.

Every bad batch here has a correct CRC-32C (``recrc``), so only the record walk can catch it.
"""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings

from brokernodes.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
)
from brokernodes.records.batch import Record, encode_batch
from brokernodes.records.compression import Compression, compress
from brokernodes.records.header import ATTRIBUTES_AT, CRC_AT, HEADER_SIZE, validate_batch
from brokernodes.records.validator import (
    RecordRules,
    validate_records,
    walk_lengths,
    walk_records,
)
from brokernodes.records.varint import encode_varint

from .strategies import record_lists

NOW = 1_750_000_000_000
RULES = RecordRules(max_inflated_bytes=1024 * 1024)
COMPACTED = RecordRules(max_inflated_bytes=1024 * 1024, require_keys=True)
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
RECORDS_COUNT_AT = 57
MAX_TIMESTAMP_AT = 35
CODECS = list(Compression)


def recrc(buf: bytearray) -> bytearray:
    struct.pack_into(">I", buf, CRC_AT, crc32c(bytes(buf[ATTRIBUTES_AT:])))
    return buf


def with_records_section(batch: bytes, section: bytes, codec: int = 0) -> bytearray:
    """``batch``'s header around another records section (length and CRC fixed up)."""
    payload = compress(codec, section) if codec else section
    buf = bytearray(batch[:HEADER_SIZE]) + payload
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">h", buf, ATTRIBUTES_AT, codec)
    return recrc(buf)


def check(buf: bytes | bytearray, rules: RecordRules = RULES, now: int = NOW) -> None:
    validate_records(bytes(buf), validate_batch(buf), rules, now)


def records(n: int = 3, ts: int = NOW, key: bytes | None = b"k") -> list[Record]:
    return [Record(ts, key, b"value-%d" % i, [("h", b"x")] if i % 2 else ()) for i in range(n)]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_good_batches_pass(codec):
    check(encode_batch(records(50), compression=codec))
    check(encode_batch(records(50), compression=codec), COMPACTED)
    check(encode_batch([Record(-1, b"k", b"v")], compression=codec))  # no timestamp at all


@settings(max_examples=150, deadline=None)
@given(record_lists(min_size=1, gaps=False))
def test_every_batch_the_encoder_writes_passes_both_walks(recs):
    buf = encode_batch(recs)
    h = validate_batch(buf)
    full = walk_records(buf, HEADER_SIZE, len(buf), h.records_count)
    cheap = walk_lengths(buf, HEADER_SIZE, len(buf), h.records_count)
    assert full[:2] == cheap[:2]
    deltas = [r.timestamp - h.base_timestamp for r in recs]
    assert full[:2] == (min(deltas), max(deltas))


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("declared", [2, 4, 0])
def test_a_record_count_that_disagrees_is_corrupt(codec, declared):
    buf = bytearray(encode_batch(records(3), compression=codec))
    struct.pack_into(">i", buf, RECORDS_COUNT_AT, declared)
    struct.pack_into(">i", buf, 23, max(declared - 1, 0))  # keep lastOffsetDelta consistent
    with pytest.raises(CorruptRecordError, match="declares"):
        check(recrc(buf))


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("rules", [RULES, COMPACTED], ids=["cheap", "full"])
def test_garbage_records_with_a_valid_crc_are_corrupt(codec, rules):
    good = encode_batch(records(1))
    section = good[HEADER_SIZE:]
    cases = {
        "length past the end": encode_varint(500) + section[1:],
        "negative length": encode_varint(-3) + section[1:],
        "a varint that never ends": b"\xff" * 12,
        "trailing bytes": section + b"\x00\x00",
        "random bytes": bytes(range(7, 60)),
    }
    for name, bad in cases.items():
        with pytest.raises(CorruptRecordError):
            check(with_records_section(good, bad, codec), rules)
        assert name


def test_the_full_walk_checks_fields_inside_a_record():
    good = encode_batch([Record(NOW, b"key", b"value")])
    section = bytearray(good[HEADER_SIZE:])
    # the key length (byte 4: length, attributes, timestamp delta, offset delta) claims 40
    section[4] = 80
    bad = with_records_section(good, bytes(section))
    with pytest.raises(CorruptRecordError):
        check(bad, COMPACTED)
    check(bad, RULES)  # the cheap pass of uncompressed batches reads no field inside
    with pytest.raises(CorruptRecordError):  # compressed batches always get the full walk
        check(with_records_section(good, bytes(section), Compression.GZIP), RULES)


def test_offset_deltas_must_count_from_zero():
    buf = encode_batch([Record(NOW, b"k", b"a", (), 0), Record(NOW, b"k", b"b", (), 2)])
    buf = bytearray(buf)
    struct.pack_into(">i", buf, 23, 1)  # lastOffsetDelta = count - 1, as the log demands
    with pytest.raises(CorruptRecordError, match="offset delta 2, not 1"):
        check(recrc(buf))


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_compacted_topics_refuse_keyless_records(codec):
    buf = encode_batch([Record(NOW, b"k", b"v"), Record(NOW, None, b"v")], compression=codec)
    check(buf)
    with pytest.raises(InvalidRecordError, match=r"record 1 .* has none"):
        check(buf, COMPACTED)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("ts", [INT64_MAX, NOW + 3_600_001, 2**62])
def test_timestamps_too_far_ahead_are_refused(codec, ts):
    buf = encode_batch([Record(NOW, b"k", b"a"), Record(ts, b"k", b"b")], compression=codec)
    with pytest.raises(InvalidTimestampError, match=r"message\.timestamp\.after\.max\.ms=3600000"):
        check(buf)
    check(buf, RecordRules(RULES.max_inflated_bytes, timestamp_after_max_ms=2**64))


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_timestamps_at_the_int64_minimum_are_refused(codec):
    buf = encode_batch([Record(NOW, b"k", b"a")], compression=codec)
    buf = bytearray(buf)
    # base timestamp = INT64_MIN; the record's delta is 0, so it reads as INT64_MIN
    struct.pack_into(">qq", buf, 27, INT64_MIN, INT64_MIN)
    with pytest.raises(InvalidTimestampError, match="before"):
        check(recrc(buf))


def test_timestamp_before_max_ms_and_the_default_bounds():
    old = encode_batch([Record(NOW - 10_000, b"k", b"a")])
    check(old)  # before.max.ms defaults to Long.MAX
    with pytest.raises(InvalidTimestampError, match=r"before\.max\.ms=5000"):
        check(old, RecordRules(RULES.max_inflated_bytes, timestamp_before_max_ms=5000))
    check(encode_batch([Record(NOW + 3_600_000, b"k", b"a")]))  # exactly one hour ahead


def test_a_lying_max_timestamp_in_the_header_is_checked_too():
    buf = bytearray(encode_batch([Record(NOW, b"k", b"a")]))
    struct.pack_into(">q", buf, MAX_TIMESTAMP_AT, INT64_MAX)
    with pytest.raises(InvalidTimestampError):
        check(recrc(buf))


def test_log_append_time_batches_are_judged_by_their_max_timestamp():
    buf = bytearray(encode_batch([Record(NOW, b"k", b"a")], timestamp_type=1))
    check(buf)
    struct.pack_into(">q", buf, MAX_TIMESTAMP_AT, INT64_MAX)
    with pytest.raises(InvalidTimestampError):
        check(recrc(buf))


def test_a_compressed_bomb_is_refused_before_the_walk():
    buf = encode_batch([Record(NOW, b"k", bytes(4 * 1024 * 1024))], compression=Compression.ZSTD)
    assert len(buf) < 4096
    with pytest.raises(MessageTooLargeError):
        check(buf)


def test_clients_may_not_write_control_batches():
    buf = encode_batch(
        [Record(NOW, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")], is_control=True
    )
    with pytest.raises(InvalidRecordError, match="control batch"):
        check(buf)
