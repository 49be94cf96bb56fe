"""LogSegment: append with sparse indexing, translate, truncate, recovery of one segment."""

from __future__ import annotations

import os

from brokernodes.records.header import read_header
from brokernodes.storage.recovery import recover_segment
from brokernodes.storage.segment import LogSegment
from tests.unit.storage.batches import make_batch


def entries_for(batches):
    out = []
    pos = 0
    for b in batches:
        h = read_header(b)
        out.append((pos, len(b), h.last_offset, h.max_timestamp))
        pos += len(b)
    return out


def write(seg, batches):
    seg.append(b"".join(batches), entries_for(batches))


def make(tmp_path, n=30, base=100, interval=200):
    seg = LogSegment(str(tmp_path), base, index_interval_bytes=interval)
    batches = []
    offset = base
    for i in range(n):
        b = make_batch(3, base_offset=offset, timestamp=1_000 + 10 * i)
        batches.append(b)
        offset += 3
    return seg, batches


def test_files_named_by_base_offset(tmp_path):
    seg = LogSegment(str(tmp_path), 42)
    seg.close()
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000000042.index",
        "00000000000000000042.log",
        "00000000000000000042.timeindex",
    ]


def test_append_indexes_every_interval(tmp_path):
    seg, batches = make(tmp_path)
    write(seg, batches[:10])
    write(seg, batches[10:])
    size = len(batches[0])
    assert seg.size == size * 30
    assert seg.next_offset == 190
    entries = seg.offset_index.entries()
    # an entry each time more than 200 bytes were appended since the last one
    assert len(entries) == (30 - 1) // (200 // size + 1)
    for offset, pos in entries:
        assert read_header(seg.read_bytes(pos, 61)).last_offset == offset
    assert seg.max_timestamp == 1_292
    assert seg.time_index.entries()[-1][0] <= 1_292
    seg.on_become_inactive()
    assert seg.time_index.last_entry == (1_292, 189)
    seg.close()


def test_translate_offset_and_boundaries(tmp_path):
    seg, batches = make(tmp_path)
    write(seg, batches)
    size = len(batches[0])
    for offset in range(100, 190):
        h = seg.translate_offset(offset)
        assert h.base_offset == offset - (offset - 100) % 3
        assert h.position == (offset - 100) // 3 * size
    assert seg.translate_offset(190) is None
    assert seg.translate_offset(0).base_offset == 100
    # (position, the offset there): batches of 3 records from offset 100
    assert seg.last_boundary_at_or_before(5 * size + 3, 0) == (5 * size, 115)
    assert seg.last_boundary_at_or_before(5 * size, 0) == (5 * size, 115)
    assert seg.last_boundary_at_or_before(10**9, 0) == (seg.size, 190)
    assert seg.last_boundary_at_or_before(size - 1, 0) == (0, 100)
    assert seg.last_boundary_at_or_before(3 * size - 1, size) == (2 * size, 106)
    seg.close()


def test_find_by_timestamp(tmp_path):
    seg, batches = make(tmp_path)
    write(seg, batches)
    assert seg.find_by_timestamp(0).base_offset == 100
    assert seg.find_by_timestamp(1_052).base_offset == 115
    assert seg.find_by_timestamp(1_053).base_offset == 118
    assert seg.find_by_timestamp(1_053, min_offset=130).base_offset == 130
    assert seg.find_by_timestamp(2_000) is None
    seg.close()


def test_truncate_to(tmp_path):
    seg, batches = make(tmp_path)
    write(seg, batches)
    size = len(batches[0])
    assert seg.truncate_to(146) == 15 * size  # batch [145..147] and later go
    assert seg.size == 15 * size
    assert seg.next_offset == 145
    assert seg.max_timestamp == 1_142
    assert all(o < 145 for o, _ in seg.offset_index.entries())
    assert all(o < 145 for _, o in seg.time_index.entries())
    assert seg.truncate_to(500) == 0
    write(seg, [make_batch(1, base_offset=145)])
    assert seg.next_offset == 146
    seg.close()
    assert os.path.getsize(seg.log_path) == 15 * size + len(make_batch(1))


def test_reopen_reads_tail(tmp_path):
    seg, batches = make(tmp_path)
    write(seg, batches)
    index = seg.offset_index.entries()
    seg.close()
    again = LogSegment(str(tmp_path), 100, index_interval_bytes=200)
    again.sanity_check()
    assert again.next_offset == 190
    assert again.max_timestamp == 1_292
    assert again.offset_index.entries() == index
    again.close()


def test_recover_segment_rebuilds_and_cuts(tmp_path):
    seg, batches = make(tmp_path)
    write(seg, batches)
    index = seg.offset_index.entries()
    size = len(batches[0])
    seg.close()
    with open(seg.log_path, "r+b") as f:
        f.seek(20 * size + 30)
        byte = f.read(1)
        f.seek(20 * size + 30)
        f.write(bytes([byte[0] ^ 0x55]))
    seg = LogSegment(str(tmp_path), 100, index_interval_bytes=200)
    seen = []
    result = recover_segment(seg, seen.append)
    assert result.valid_bytes == 20 * size
    assert result.truncated_bytes == 10 * size
    assert "CRC" in result.reason
    assert len(seen) == 20
    assert seg.next_offset == 160
    assert seg.offset_index.entries() == [e for e in index if e[1] < 20 * size]
    seg.close()
    assert os.path.getsize(seg.log_path) == 20 * size


def test_delete_removes_files(tmp_path):
    seg, batches = make(tmp_path)
    write(seg, batches)
    seg.delete()
    assert os.listdir(tmp_path) == []
