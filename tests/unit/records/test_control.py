"""End-transaction markers: encode, decode, and refusal of what is not one."""

from __future__ import annotations

import struct

import pytest

from brokernodes.errors import CorruptRecordError
from brokernodes.records.batch import Record, decode_batch, encode_batch
from brokernodes.records.control import (
    ABORT,
    COMMIT,
    decode_txn_marker,
    encode_txn_marker,
    marker_is_commit,
)
from brokernodes.records.header import iter_batches, read_header


@pytest.mark.parametrize("commit", [True, False])
def test_marker_round_trip_in_kafkas_layout(commit):
    buf = encode_txn_marker(4242, 7, commit, 3, 1_700_000_000_000, base_offset=55)
    h = read_header(buf)
    assert h.is_control and h.is_transactional
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (4242, 7, -1, 1)
    record = decode_batch(buf).records[0]
    # key: version 0, type; value: version 0, coordinator epoch
    assert record.key == struct.pack(">hh", 0, COMMIT if commit else ABORT)
    assert record.value == struct.pack(">hi", 0, 3)
    marker = decode_txn_marker(buf)
    assert marker == (4242, 7, commit, 3, 1_700_000_000_000, 55)


def test_marker_type_found_inside_a_buffer_of_several_batches():
    data = encode_batch([Record(1, None, b"x")], producer_id=9, producer_epoch=0, base_sequence=0)
    buf = data + encode_txn_marker(9, 0, False, 0, 2) + encode_txn_marker(9, 0, True, 0, 3)
    headers = list(iter_batches(buf))
    assert [h.is_control for h in headers] == [False, True, True]
    assert [marker_is_commit(h, buf) for h in headers[1:]] == [False, True]


def test_not_a_marker_is_refused_with_the_reason():
    data = encode_batch([Record(1, b"k", b"v")])
    with pytest.raises(CorruptRecordError, match="not a control batch"):
        decode_txn_marker(data)
    odd = encode_batch(
        [Record(1, struct.pack(">hh", 0, 5), None)],
        producer_id=1,
        producer_epoch=0,
        is_control=True,
        is_transactional=True,
    )
    with pytest.raises(CorruptRecordError, match="type 5"):
        decode_txn_marker(odd)
    two = encode_batch(
        [Record(1, struct.pack(">hh", 0, 1), None), Record(1, struct.pack(">hh", 0, 1), None)],
        producer_id=1,
        producer_epoch=0,
        is_control=True,
    )
    with pytest.raises(CorruptRecordError, match="2 records"):
        decode_txn_marker(two)


def test_a_marker_needs_a_producer():
    with pytest.raises(ValueError, match="producer id and epoch"):
        encode_txn_marker(-1, 0, True, 0, 0)


def test_the_cleaner_reads_the_same_marker_type():
    from brokernodes.storage.cleaner_filter import CONTROL_ABORT, CONTROL_COMMIT, control_type

    assert control_type(encode_txn_marker(1, 0, True, 0, 0)) == CONTROL_COMMIT
    assert control_type(encode_txn_marker(1, 0, False, 0, 0)) == CONTROL_ABORT


def test_unverified_produce_paths_refuse_transactional_batches():
    from brokernodes.errors import InvalidRecordError
    from brokernodes.records.control import refuse_transactional

    plain = encode_batch([Record(1, None, b"x")])
    idempotent = encode_batch(
        [Record(1, None, b"x")], producer_id=3, producer_epoch=0, base_sequence=0
    )
    txn = encode_batch(
        [Record(1, None, b"x")],
        producer_id=3,
        producer_epoch=0,
        base_sequence=1,
        is_transactional=True,
    )
    refuse_transactional(plain + idempotent, "here")
    refuse_transactional(b"\x00" * 10, "here")  # malformed: the append's validation refuses it
    with pytest.raises(InvalidRecordError, match="here takes no transactional batches"):
        refuse_transactional(plain + txn, "here")
