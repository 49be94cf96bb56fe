"""The cleaner and transactions: aborted records never come back as a key's latest value,
and a transaction marker goes once no batch of its transaction is left and its delete
horizon (``delete.retention.ms`` after that) has passed, as Kafka's cleaner does (KIP-98)."""

from __future__ import annotations

import struct

from brokernodes.records.batch import Record, decode_batch, decode_batches, encode_batch
from brokernodes.records.control import decode_txn_marker
from brokernodes.records.header import read_header
from brokernodes.server.replica.partition import Partition
from brokernodes.storage.cleaner import LogCleaner
from brokernodes.storage.cleaner_filter import (
    FilterStats,
    OffsetMap,
    filter_batch,
    iter_file_batches,
    scan_transactions,
)

from .cleaner_helpers import DAY, T0, append, latest, open_log

ABORT, COMMIT = 0, 1


def marker_batch(base: int, pid: int, kind: int) -> bytes:
    record = Record(T0, struct.pack(">hh", 0, kind), struct.pack(">hi", 0, 3))
    return encode_batch(
        [record],
        base_offset=base,
        producer_id=pid,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )


def txn_batch(base: int, pid: int, key: bytes, value: bytes) -> bytes:
    return encode_batch(
        [Record(T0, key, value)],
        base_offset=base,
        producer_id=pid,
        producer_epoch=0,
        is_transactional=True,
    )


def filter_marker(buf: bytes, now: int, *, empty: bool, retain: bool = False) -> bytes | None:
    header = read_header(buf)
    return filter_batch(
        header,
        buf,
        OffsetMap(),
        now_ms=now,
        delete_retention_ms=DAY,
        aborted=set(),
        retain_empty=retain,
        stats=FilterStats(),
        empty_markers={header.base_offset} if empty else set(),
    )


# --- the pure core -----------------------------------------------------------------------


def test_scan_names_the_markers_whose_transaction_has_no_batch_left():
    batches = [
        txn_batch(0, 1, b"a", b"1"),
        marker_batch(1, 1, COMMIT),  # its data is there
        marker_batch(2, 2, ABORT),  # its data was cleaned away
        txn_batch(3, 3, b"b", b"1"),
        marker_batch(4, 3, ABORT),
        marker_batch(5, 1, COMMIT),  # a second marker ends nothing
    ]
    scan = scan_transactions((read_header(b), b) for b in batches)
    assert scan.empty_markers == {2, 5}
    assert scan.aborted == {3}
    assert scan.first_unstable_offset is None


def test_a_marker_with_data_left_is_kept_byte_for_byte():
    m = marker_batch(7, 1, COMMIT)
    assert filter_marker(m, T0, empty=False) is m
    assert filter_marker(m, T0 + 10 * DAY, empty=False) is m


def test_an_empty_transactions_marker_is_stamped_then_dropped_at_its_horizon():
    m = marker_batch(7, 1, ABORT)
    stamped = filter_marker(m, T0, empty=True)
    assert stamped is not None and stamped is not m
    d = decode_batch(stamped)
    assert d.delete_horizon_ms == T0 + DAY
    assert (d.header.base_offset, d.header.is_control, d.header.is_transactional) == (7, True, True)
    assert (d.header.producer_id, d.header.producer_epoch) == (1, 0)
    marker = decode_txn_marker(stamped)  # still a readable ABORT marker
    assert (marker.commit, marker.coordinator_epoch) == (False, 3)
    assert filter_marker(stamped, T0 + DAY - 1, empty=True) is stamped
    stats = FilterStats()
    header = read_header(stamped)
    out = filter_batch(
        header,
        stamped,
        OffsetMap(),
        now_ms=T0 + DAY,
        delete_retention_ms=DAY,
        aborted=set(),
        retain_empty=False,
        stats=stats,
        empty_markers={7},
    )
    assert out is None
    assert stats.markers_removed == 1


def test_a_producers_last_marker_is_kept_whole():
    m = marker_batch(7, 1, COMMIT)
    assert filter_marker(m, T0, empty=True, retain=True) is m


# --- on a real log -------------------------------------------------------------------------


def append_txn(log, pid: int, key: bytes, value: bytes) -> None:
    log.append(txn_batch(0, pid, key, value))


def append_marker(log, pid: int, kind: int) -> None:
    log.append(marker_batch(0, pid, kind))


def data_records(log) -> list[tuple[int, bytes, bytes | None]]:
    raw = log.read(log.log_start_offset, 1 << 30).read_bytes()
    return [
        (r.offset, r.key, r.value)
        for b in decode_batches(raw)
        if not b.header.is_control
        for r in b.records
    ]


def markers(log) -> list[int]:
    raw = log.read(log.log_start_offset, 1 << 30).read_bytes()
    return [b.header.base_offset for b in decode_batches(raw) if b.header.is_control]


def replayed(log) -> tuple[dict[int, int], list[tuple[int, int, int]], int]:
    """What a restart's replay of the log finds: open transactions, aborted ones, the LSO."""
    state, aborted = Partition.rebuild_producer_state(log)
    return (
        dict(state.ongoing_transactions),
        [(a.producer_id, a.first_offset, a.last_offset) for a in aborted],
        state.last_stable_offset(log.high_watermark),
    )


def test_aborted_data_never_returns_and_markers_go_after_their_data_and_horizon(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, [(b"a", b"old")])  # 0
    append_txn(log, 7, b"a", b"aborted")  # 1
    append_marker(log, 7, ABORT)  # 2
    append(log, [(b"z", b"1")])  # 3
    log.roll()
    append_txn(log, 8, b"b", b"x")  # 4, superseded by 6
    append_marker(log, 8, COMMIT)  # 5
    append(log, [(b"b", b"y")])  # 6
    log.roll()
    append_txn(log, 7, b"d", b"1")  # 7
    append_marker(log, 7, COMMIT)  # 8
    append_txn(log, 8, b"e", b"1")  # 9
    append_marker(log, 8, COMMIT)  # 10
    append(log, [(b"f", b"1")])  # 11
    log.roll()
    append(log, [(b"g", b"1")])  # 12, the active segment
    leo = log.log_end_offset
    survivors = [
        (0, b"a", b"old"),
        (3, b"z", b"1"),
        (6, b"b", b"y"),
        (7, b"d", b"1"),
        (9, b"e", b"1"),
        (11, b"f", b"1"),
        (12, b"g", b"1"),
    ]
    try:
        assert replayed(log) == ({}, [(7, 1, 2)], leo)
        # the aborted value is gone: a read_uncommitted reader's latest "a" is the old one
        LogCleaner(now_ms=T0).clean(log, force=True)
        assert data_records(log) == survivors
        assert latest(data_records(log))[b"a"] == (0, b"old")
        # their data was still there when this pass scanned: every marker stays
        assert markers(log) == [2, 5, 8, 10]
        assert replayed(log) == ({}, [], leo)  # the ABORT marker ends nothing now
        # the next pass finds markers 2 and 5 alone and stamps them; 8 and 10 keep data
        LogCleaner(now_ms=T0 + 1).clean(log, force=True)
        assert markers(log) == [2, 5, 8, 10]
        LogCleaner(now_ms=T0 + DAY).clean(log, force=True)
        assert markers(log) == [2, 5, 8, 10]
        stats = LogCleaner(now_ms=T0 + 1 + DAY).clean(log, force=True)
        assert stats.records.markers_removed == 2
        assert markers(log) == [8, 10]
        assert data_records(log) == survivors
        assert log.log_end_offset == leo
        # what is left leaves no transaction open and none aborted
        scan = scan_transactions(
            b for s in list(log.segments) for b in iter_file_batches(s.log_path)
        )
        assert (scan.first_unstable_offset, scan.aborted) == (None, set())
        assert replayed(log) == ({}, [], leo)
    finally:
        log.close()


def test_a_marker_whose_transaction_is_open_elsewhere_is_untouched(tmp_path):
    # a transaction open below the active segment holds the clean back before its data:
    # its marker-to-be is never judged, and earlier markers keep their data's rule
    log = open_log(tmp_path / "t-0")
    append_txn(log, 7, b"a", b"1")  # 0
    append_marker(log, 7, COMMIT)  # 1
    append(log, [(b"p", b"1")])  # 2
    log.roll()
    append_txn(log, 9, b"c", b"open")  # 3: no marker yet
    append(log, [(b"q", b"1")])  # 4
    log.roll()
    append(log, [(b"r", b"1")])  # 5, active
    try:
        for now in (T0, T0 + 1, T0 + 2 * DAY):
            stats = LogCleaner(now_ms=now).clean(log, force=True)
            assert stats.range is not None and stats.range.first_uncleanable_offset == 3
        assert markers(log) == [1]  # its data (offset 0) is still there
        assert [r[0] for r in data_records(log)] == [0, 2, 3, 4, 5]
    finally:
        log.close()
