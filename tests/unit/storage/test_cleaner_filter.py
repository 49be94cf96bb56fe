"""The cleaner's pure record logic: offset map, transactions, batch filtering."""

from __future__ import annotations

import struct

from brokernodes.records.batch import Record, decode_batch, encode_batch
from brokernodes.records.compression import Compression
from brokernodes.records.header import read_header, validate_batch
from brokernodes.storage.cleaner_filter import (
    FilterStats,
    OffsetMap,
    add_to_offset_map,
    empty_batch,
    filter_batch,
    scan_transactions,
)

NOW = 1_000_000
RETENTION = 86_400_000


def batch(base, *kvs, **kw):
    records = [Record(100 + i, k, v) for i, (k, v) in enumerate(kvs)]
    return encode_batch(records, base_offset=base, **kw)


def control(base, pid, kind, epoch=0):
    key = struct.pack(">hh", 0, kind)
    value = struct.pack(">hi", 0, 0)
    return encode_batch(
        [Record(5, key, value)],
        base_offset=base,
        producer_id=pid,
        producer_epoch=epoch,
        is_transactional=True,
        is_control=True,
    )


def hb(buf):
    return read_header(buf), buf


def run_filter(buf, omap, *, now=NOW, aborted=(), retain_empty=False, stats=None):
    return filter_batch(
        read_header(buf),
        buf,
        omap,
        now_ms=now,
        delete_retention_ms=RETENTION,
        aborted=set(aborted),
        retain_empty=retain_empty,
        stats=stats or FilterStats(),
    )


def kv(buf):
    return [(r.offset, r.key, r.value) for r in decode_batch(buf).records]


def build_map(*bufs, aborted=()):
    omap = OffsetMap()
    for b in bufs:
        add_to_offset_map(omap, read_header(b), b, set(aborted))
    return omap


def test_offset_map_keeps_latest_offset_per_key_and_skips_keyless():
    b1 = batch(0, (b"a", b"1"), (b"b", b"1"), (None, b"x"))
    b2 = batch(3, (b"a", b"2"), (b"c", None))
    omap = build_map(b1, b2)
    assert omap.offsets == {b"a": 3, b"b": 1, b"c": 4}
    assert omap.latest_offset == 4


def test_offset_map_skips_control_and_aborted_batches_but_moves_latest_offset():
    data = batch(0, (b"a", b"1"), producer_id=7, is_transactional=True)
    omap = build_map(data, control(1, 7, 0), aborted={0})
    assert omap.offsets == {}
    assert omap.latest_offset == 1


def test_fully_live_batch_is_copied_verbatim():
    b = batch(10, (b"a", b"1"), (b"b", b"2"), compression=Compression.GZIP)
    assert run_filter(b, build_map(b)) is b


def test_superseded_records_are_removed_with_offsets_preserved():
    b1 = batch(0, (b"a", b"1"), (b"b", b"1"), (b"c", b"1"), producer_id=3, base_sequence=9)
    b2 = batch(3, (b"a", b"2"), (b"c", b"2"))
    omap = build_map(b1, b2)
    out = run_filter(b1, omap)
    assert kv(out) == [(1, b"b", b"1")]
    h = validate_batch(out)
    assert (h.base_offset, h.producer_id, h.base_sequence) == (0, 3, 9)
    assert h.last_offset_delta == 1


def test_reencoding_keeps_compression_epoch_and_timestamps():
    records = [Record(500, b"a", b"1"), Record(700, b"b", b"1", [("h", b"v")])]
    b = encode_batch(
        records, base_offset=40, compression=Compression.ZSTD, partition_leader_epoch=4
    )
    omap = build_map(b, batch(42, (b"a", b"2")))
    out = decode_batch(run_filter(b, omap))
    assert out.header.compression == Compression.ZSTD
    assert out.header.partition_leader_epoch == 4
    assert [(r.offset, r.timestamp, r.headers) for r in out.records] == [(41, 700, [("h", b"v")])]


def test_emptied_batch_is_dropped_or_kept_header_only():
    b = batch(0, (b"a", b"1"), (b"b", b"1"), producer_id=5, producer_epoch=2, base_sequence=0)
    omap = build_map(b, batch(2, (b"a", b"2"), (b"b", b"2")))
    assert run_filter(b, omap) is None
    out = run_filter(b, omap, retain_empty=True)
    h = validate_batch(out)  # CRC valid
    assert (h.base_offset, h.last_offset_delta, h.records_count) == (0, 1, 0)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (5, 2, 0)
    assert decode_batch(out).records == []


def test_empty_batch_of_compressed_batch_is_uncompressed():
    b = batch(0, (b"a", b"1"), compression=Compression.LZ4)
    h = validate_batch(empty_batch(read_header(b)))
    assert h.compression == 0 and h.next_offset == 1


def test_keyless_records_are_dropped_and_counted():
    b = batch(0, (None, b"x"), (b"a", b"1"))
    stats = FilterStats()
    out = run_filter(b, build_map(b), stats=stats)
    assert kv(out) == [(1, b"a", b"1")]
    assert stats.invalid_records == 1


def test_records_past_the_map_are_kept():
    b = batch(5, (b"a", b"1"), (None, b"x"))
    omap = build_map(batch(0, (b"a", b"0")))
    assert run_filter(b, omap) is b


def test_tombstone_gets_delete_horizon_then_is_dropped_after_it():
    b = batch(0, (b"a", b"1"), (b"b", None))
    omap = build_map(b)
    first = run_filter(b, omap, now=NOW)
    d = decode_batch(first)
    assert d.delete_horizon_ms == NOW + RETENTION
    assert [(r.offset, r.key, r.value, r.timestamp) for r in d.records] == [
        (0, b"a", b"1", 100),
        (1, b"b", None, 101),
    ]
    # before the horizon: unchanged, byte for byte
    assert run_filter(first, omap, now=NOW + RETENTION - 1) is first
    # at the horizon: tombstone dropped, the horizon kept on the rewritten batch
    stats = FilterStats()
    later = run_filter(first, omap, now=NOW + RETENTION, stats=stats)
    assert kv(later) == [(0, b"a", b"1")]
    assert stats.tombstones_removed == 1


def test_superseded_tombstone_goes_at_once():
    b = batch(0, (b"a", None))
    omap = build_map(b, batch(1, (b"a", b"back")))
    assert run_filter(b, omap) is None


def test_control_batches_are_kept_unchanged():
    c = control(4, 9, 1)
    assert run_filter(c, build_map(c)) is c


def test_aborted_transaction_records_are_removed():
    data = batch(0, (b"a", b"1"), producer_id=7, is_transactional=True)
    assert run_filter(data, build_map(data), aborted={0}) is None


def test_scan_transactions():
    batches = [
        hb(batch(0, (b"a", b"1"), producer_id=1, is_transactional=True)),
        hb(batch(1, (b"b", b"1"), producer_id=2, is_transactional=True)),
        hb(batch(2, (b"a", b"2"), producer_id=1, is_transactional=True)),
        hb(control(3, 1, 0)),  # abort producer 1: batches 0 and 2
        hb(control(4, 2, 1)),  # commit producer 2
        hb(batch(5, (b"c", b"1"), producer_id=3, is_transactional=True)),  # still open
        hb(batch(6, (b"d", b"1"), producer_id=4)),
        hb(batch(7, (b"d", b"2"), producer_id=4)),
    ]
    scan = scan_transactions(batches)
    assert scan.aborted == {0, 2}
    assert scan.first_unstable_offset == 5
    assert scan.last_batch_of_producer == {1: 3, 2: 4, 3: 5, 4: 7}


def test_infinite_delete_retention_does_not_overflow():
    b = batch(0, (b"a", None))
    out = filter_batch(
        read_header(b),
        b,
        build_map(b),
        now_ms=NOW,
        delete_retention_ms=2**63 - 1,
        aborted=set(),
        retain_empty=False,
        stats=FilterStats(),
    )
    assert decode_batch(out).delete_horizon_ms == 2**63 - 1


def test_log_append_time_batch_keeps_its_timestamps():
    records = [Record(1, b"a", b"1"), Record(2, b"b", b"1")]
    b = encode_batch(records, base_offset=0, timestamp_type=1)
    omap = build_map(b, batch(2, (b"a", b"2")))
    h = validate_batch(b)
    out = decode_batch(run_filter(b, omap))
    assert out.header.timestamp_type == 1
    assert out.header.max_timestamp == h.max_timestamp
    assert [(r.offset, r.timestamp) for r in out.records] == [(1, h.max_timestamp)]
