"""Retention: the pure decision and PartitionLog applying it."""

from __future__ import annotations

import pytest

from brokernodes.errors import OffsetOutOfRangeError
from brokernodes.storage.config import LogConfig
from brokernodes.storage.log import LOG_START_OFFSET_CHECKPOINT, PartitionLog
from brokernodes.storage.retention import SegmentStats, plan_retention
from tests.unit.storage.batches import make_batch

DAY = 86_400_000


def stats(*segs, leo=None):
    """segs: (base, size, largest_ts); end offsets from the next base."""
    out = []
    for i, (base, size, ts) in enumerate(segs):
        end = segs[i + 1][0] if i + 1 < len(segs) else (leo if leo is not None else base + 10)
        out.append(SegmentStats(base, size, ts, end))
    return out


def plan(segs, now=10 * DAY, hw=10**9, start=0, **config):
    return plan_retention(
        segs, config=LogConfig(**config), now_ms=now, log_start_offset=start, high_watermark=hw
    )


SEGS = stats((0, 100, 1 * DAY), (10, 100, 5 * DAY), (20, 100, 2 * DAY), (30, 100, 9 * DAY))


def test_time_retention_deletes_a_prefix():
    d = plan(SEGS, retention_ms=6 * DAY)  # older than day 4
    assert d.count == 1  # segment 10 is young, so segment 20 (older) waits behind it
    assert "retention.ms" in d.reasons[0]
    assert plan(SEGS, retention_ms=4 * DAY).count == 3
    assert plan(SEGS, retention_ms=-1).count == 0


def test_never_the_active_segment():
    assert plan(SEGS, retention_ms=0).count == 3
    assert plan(SEGS, retention_bytes=0).count == 3


def test_size_retention():
    assert plan(SEGS, retention_bytes=250, retention_ms=-1).count == 1
    assert plan(SEGS, retention_bytes=200, retention_ms=-1).count == 2
    assert plan(SEGS, retention_bytes=400, retention_ms=-1).count == 0
    assert "retention.bytes" in plan(SEGS, retention_bytes=0, retention_ms=-1).reasons[0]


def test_high_watermark_bounds_deletion():
    assert plan(SEGS, retention_ms=0, hw=19).count == 1
    assert plan(SEGS, retention_ms=0, hw=20).count == 2


def test_log_start_offset_breach_any_policy():
    d = plan(SEGS, start=25, retention_ms=-1, cleanup_policy="compact")
    assert d.count == 2
    assert "log start offset" in d.reasons[0]


def test_compact_policy_ignores_time_and_size():
    assert plan(SEGS, retention_ms=0, retention_bytes=0, cleanup_policy="compact").count == 0
    assert plan(SEGS, retention_ms=0, cleanup_policy="compact,delete").count == 3


def test_longest_prefix_of_any_rule():
    segs = stats((0, 100, 9 * DAY), (10, 100, 1 * DAY), (20, 100, 9 * DAY), (30, 10, 9 * DAY))
    # time keeps nothing (first is young), size deletes two
    assert plan(segs, retention_ms=6 * DAY, retention_bytes=110).count == 2


# --- applied by the log ---------------------------------------------------------------------


class Clock:
    now = 100 * DAY

    def __call__(self):
        return self.now


def make_log(path, **config):
    size = len(make_batch(2))
    config.setdefault("segment_bytes", 2 * size)
    clock = Clock()
    log = PartitionLog(path, LogConfig(**config), clock=clock, fsync=False)
    return log, clock


def fill(log, n, ts):
    for i in range(n):
        log.append(make_batch(2, timestamp=ts + i), leader_epoch=i // 2)
    log.update_high_watermark(log.log_end_offset)


def test_apply_time_retention(tmp_path):
    log, clock = make_log(tmp_path / "t-0", retention_ms=DAY)
    fill(log, 6, ts=clock.now - 2 * DAY)  # segments [0..3] [4..7] [8..11]
    fill(log, 1, ts=clock.now)  # [12..13] in a new active segment
    assert log.segments.base_offsets == [0, 4, 8, 12]
    assert log.apply_retention() == 3
    assert log.segments.base_offsets == [12]
    assert log.log_start_offset == 12
    assert log.leader_epoch_cache.entries[0].start_offset == 12
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert log.read(12, 1000).size > 0
    text = (tmp_path / "t-0" / LOG_START_OFFSET_CHECKPOINT).read_text()
    assert text.endswith(" 12\n")
    log.close()
    log, _ = make_log(tmp_path / "t-0", retention_ms=DAY)
    assert log.log_start_offset == 12
    log.close()


def test_apply_size_retention_respects_high_watermark(tmp_path):
    size = len(make_batch(2))
    log, _ = make_log(tmp_path / "t-0", retention_bytes=2 * size, retention_ms=-1)
    fill(log, 8, ts=0)  # four full segments
    log.update_high_watermark(4)
    assert log.apply_retention() == 1
    log.update_high_watermark(16)
    assert log.apply_retention() == 2
    assert log.size_in_bytes == 2 * size
    assert log.log_start_offset == 12
    log.close()


def test_delete_records(tmp_path):
    log, _ = make_log(tmp_path / "t-0", retention_ms=-1)
    fill(log, 6, ts=0)
    log.update_high_watermark(9)
    with pytest.raises(OffsetOutOfRangeError, match="high watermark"):
        log.delete_records(10)
    assert log.delete_records(5) == 5
    assert log.segments.base_offsets == [4, 8]  # segment [0..3] wholly below went
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 100)
    assert log.read(5, 1).first_batch_base_offset == 4  # the batch holding 5
    log.close()
    log, _ = make_log(tmp_path / "t-0", retention_ms=-1)
    assert log.log_start_offset == 5
    log.close()
