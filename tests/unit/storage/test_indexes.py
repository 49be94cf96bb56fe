"""OffsetIndex and TimeIndex: layout, lookups, truncation, reload, sanity checks."""

from __future__ import annotations

import struct

import pytest

from brokernodes.storage.offset_index import IndexCorruptError, OffsetIndex
from brokernodes.storage.time_index import TimeIndex


def test_offset_index_file_layout_and_lookup(tmp_path):
    path = str(tmp_path / "00000000000000000100.index")
    idx = OffsetIndex(path, 100)
    for i in range(1, 6):
        idx.append(100 + 10 * i, 1000 * i)
    idx.flush()
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == struct.pack(">ii", 10, 1000)
    assert len(data) == 40
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(109) == (100, 0)
    assert idx.lookup(110) == (110, 1000)
    assert idx.lookup(135) == (130, 3000)
    assert idx.lookup(10**6) == (150, 5000)
    assert idx.lookup_by_position(2999) == (120, 2000)
    assert idx.lookup_by_position(3000) == (130, 3000)
    idx.close()
    again = OffsetIndex(path, 100)
    assert again.entries() == [(100 + 10 * i, 1000 * i) for i in range(1, 6)]
    again.sanity_check(log_size=6000)
    again.close()


def test_offset_index_rejects_non_increasing(tmp_path):
    idx = OffsetIndex(str(tmp_path / "a.index"), 0)
    idx.append(5, 100)
    with pytest.raises(ValueError):
        idx.append(5, 200)
    with pytest.raises(ValueError):
        idx.append(6, 100)
    idx.close()


def test_offset_index_truncate_and_full(tmp_path):
    idx = OffsetIndex(str(tmp_path / "a.index"), 0, max_index_size=32)
    for i in range(4):
        idx.append(i * 10 + 9, i * 100 + 50)
    assert idx.is_full
    with pytest.raises(ValueError, match="full"):
        idx.append(100, 1000)
    idx.truncate_to_position(250)
    assert idx.entries() == [(9, 50), (19, 150)]
    idx.flush()
    assert (tmp_path / "a.index").stat().st_size == 16
    idx.reset()
    assert len(idx) == 0
    assert idx.lookup(1000) == (0, 0)
    idx.close()


def test_offset_index_sanity_check(tmp_path):
    path = tmp_path / "a.index"
    path.write_bytes(struct.pack(">iiii", 5, 100, 3, 200))
    with pytest.raises(IndexCorruptError, match="not increasing"):
        OffsetIndex(str(path), 0).sanity_check(1000)
    path.write_bytes(struct.pack(">ii", 5, 100) + b"xyz")
    with pytest.raises(IndexCorruptError, match="multiple"):
        OffsetIndex(str(path), 0).sanity_check(1000)
    path.write_bytes(struct.pack(">ii", 5, 2000))
    with pytest.raises(IndexCorruptError, match="past the end"):
        OffsetIndex(str(path), 0).sanity_check(1000)


def test_time_index_layout_lookup_and_monotonic(tmp_path):
    path = str(tmp_path / "00000000000000000050.timeindex")
    idx = TimeIndex(path, 50)
    assert idx.maybe_append(1_000, 55)
    assert not idx.maybe_append(1_000, 60)  # not greater: skipped
    assert not idx.maybe_append(900, 61)
    assert idx.maybe_append(2_000, 70)
    idx.flush()
    with open(path, "rb") as f:
        assert f.read() == struct.pack(">qiqi", 1_000, 5, 2_000, 20)
    assert idx.lookup(999) == (-1, 50)
    assert idx.lookup(1_500) == (1_000, 55)
    assert idx.lookup(5_000) == (2_000, 70)
    assert idx.last_entry == (2_000, 70)
    idx.truncate_to_offset(70)
    assert idx.entries() == [(1_000, 55)]
    idx.close()
    again = TimeIndex(path, 50)
    assert again.entries() == [(1_000, 55)]
    again.sanity_check(next_offset=56)
    with pytest.raises(IndexCorruptError, match="past the segment"):
        again.sanity_check(next_offset=55)
    again.close()


def test_time_index_full(tmp_path):
    idx = TimeIndex(str(tmp_path / "a.timeindex"), 0, max_index_size=24)
    idx.maybe_append(1, 1)
    idx.maybe_append(2, 2)
    assert idx.is_full
    with pytest.raises(ValueError, match="full"):
        idx.maybe_append(3, 3)
    assert idx.maybe_append(3, 3, skip_full_check=True)  # the final entry on roll
    idx.close()
