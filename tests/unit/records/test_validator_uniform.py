"""``walk_lengths`` on batches of equal-length records: the strided-slice check
(``_walk_uniform``) gives what the record-by-record walk gives, and every batch it declines
is still judged by the loop, so bad batches are refused with the same errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokernodes.errors import CorruptRecordError
from brokernodes.records.batch import Record, encode_batch
from brokernodes.records.header import HEADER_SIZE, validate_batch
from brokernodes.records.validator import (
    _UNIFORM_MAX_RECORDS,
    _walk_uniform,
    walk_lengths,
    walk_records,
)

NOW = 1_750_000_000_000


def fixed(n: int, deltas: list[int] | None = None, value: int = 100) -> bytes:
    """``n`` records with 10-byte keys and ``value``-byte values (one length within each run
    of equal offset delta widths: records 0-63, 64-8191, 8192 on), timestamps NOW +
    ``deltas[i]``."""
    deltas = deltas or [0] * n
    return encode_batch([Record(NOW + deltas[i], b"key-%06d" % i, b"v" * value) for i in range(n)])


def walks(buf: bytes | bytearray, count: int | None = None):
    """(uniform, cheap, full) walks of the records section of the batch ``buf``."""
    h = validate_batch(buf)
    n = h.records_count if count is None else count
    return (
        _walk_uniform(buf, HEADER_SIZE, len(buf), n),
        walk_lengths(buf, HEADER_SIZE, len(buf), n),
        walk_records(buf, HEADER_SIZE, len(buf), n),
    )


@pytest.mark.parametrize("n", [2, 3, 63, 64, 65, 66, 136, 500, 8191, 8192, 8193, 12_000])
def test_equal_length_records_take_the_strided_check(n):
    for buf in (fixed(n), bytearray(fixed(n))):
        uniform, cheap, full = walks(buf)
        assert uniform == cheap == (full[0], full[1], None) == (0, 0, None)


def test_timestamp_deltas_of_one_byte_either_sign():
    deltas = [0, -64, 63, 5, -1, 17] * 30
    uniform, cheap, full = walks(fixed(len(deltas), deltas))
    assert uniform == cheap == (-64, 63, None)
    assert full[:2] == (-64, 63)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-64, 63), min_size=1, max_size=300), st.integers(0, 300))
def test_any_uniform_batch_agrees_with_the_full_walk(rest, value):
    deltas = [0, *rest]  # the first record's timestamp is the batch's base timestamp
    buf = fixed(len(deltas), deltas, value)
    uniform, cheap, full = walks(buf)
    assert uniform == cheap == (full[0], full[1], None) == (min(deltas), max(deltas), None)


@pytest.mark.parametrize(
    "records",
    [
        # one value a byte longer: lengths differ
        [Record(NOW, b"k%03d" % i, b"v" * (101 if i == 70 else 100)) for i in range(136)],
        # one two-byte timestamp delta
        [Record(NOW + (100 if i == 3 else 0), b"k%03d" % i, b"v" * 100) for i in range(136)],
        # a record with a header
        [Record(NOW, b"k%03d" % i, b"v" * 100, [("h", b"x")] if i == 5 else ()) for i in range(9)],
        # one record only
        [Record(NOW, b"k", b"v")],
    ],
    ids=["lengths", "timestamp", "header", "single"],
)
def test_other_batches_are_declined_and_walked_record_by_record(records):
    buf = encode_batch(records)
    uniform, cheap, full = walks(buf)
    assert uniform is None
    assert cheap == (full[0], full[1], None)


@pytest.mark.parametrize("index", [10, 63, 64, 100, 135])
def test_a_wrong_offset_delta_is_refused(index):
    # record ``index`` claims offset delta index + 1 (the same varint width)
    recs = [Record(NOW, b"key-%06d" % i, b"v" * 100, (), i) for i in range(136)]
    recs[index] = recs[index]._replace(offset_delta=index + 1)
    for later in range(index + 1, 136):
        recs[later] = recs[later]._replace(offset_delta=later + 1)
    buf = encode_batch(recs)
    assert _walk_uniform(buf, HEADER_SIZE, len(buf), 136) is None
    with pytest.raises(CorruptRecordError, match=f"record {index} has offset delta"):
        walk_lengths(buf, HEADER_SIZE, len(buf), 136)


def test_a_wrong_offset_delta_among_three_byte_deltas_is_refused():
    # librdkafka's large batches run past record 8192, where the offset delta takes 3 bytes
    n, index = 9000, 8500
    recs = [Record(NOW, b"key-%06d" % i, b"v" * 100, (), i) for i in range(n)]
    for later in range(index, n):
        recs[later] = recs[later]._replace(offset_delta=later + 1)
    buf = encode_batch(recs)
    assert _walk_uniform(buf, HEADER_SIZE, len(buf), n) is None
    with pytest.raises(CorruptRecordError, match=f"record {index} has offset delta"):
        walk_lengths(buf, HEADER_SIZE, len(buf), n)


def test_batches_over_the_uniform_bound_are_walked_record_by_record():
    n = _UNIFORM_MAX_RECORDS + 1
    buf = encode_batch([Record(NOW, None, b"") for _ in range(n)])
    assert _walk_uniform(buf, HEADER_SIZE, len(buf), n) is None
    assert walk_lengths(buf, HEADER_SIZE, len(buf), n) == (0, 0, None)


@pytest.mark.parametrize("declared", [135, 137, 1, 8193])
def test_a_count_that_disagrees_is_refused(declared):
    buf = fixed(136)
    assert _walk_uniform(buf, HEADER_SIZE, len(buf), declared) is None
    with pytest.raises(CorruptRecordError):
        walk_lengths(buf, HEADER_SIZE, len(buf), declared)


def test_a_section_longer_than_its_records_is_refused():
    buf = fixed(136) + b"\x00" * 5
    assert _walk_uniform(buf, HEADER_SIZE, len(buf), 136) is None
    with pytest.raises(CorruptRecordError, match="follow them"):
        walk_lengths(buf, HEADER_SIZE, len(buf), 136)
