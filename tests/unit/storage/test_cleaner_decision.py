"""cleanable_range and group_segments: what the cleaner may touch and how it groups it."""

from __future__ import annotations

from brokernodes.storage.cleaner import SegmentInfo, cleanable_range, group_segments

NOW = 10_000_000


def segs(*specs):
    """(base, size, largest_timestamp) tuples; the last one is the active segment."""
    return [SegmentInfo(b, size, ts) for b, size, ts in specs]


LOG = segs((0, 100, 1000), (10, 100, 2000), (20, 100, 3000), (30, 50, 4000))


def rng(**kw):
    args = {
        "log_start_offset": 0,
        "log_end_offset": 35,
        "checkpoint_offset": None,
        "now_ms": NOW,
    }
    args.update(kw)
    return cleanable_range(LOG, **args)


def test_fresh_log_is_all_dirty_up_to_the_active_segment():
    r = rng()
    assert (r.first_dirty_offset, r.first_uncleanable_offset) == (0, 30)
    assert (r.clean_bytes, r.dirty_bytes) == (0, 300)
    assert r.dirty_ratio == 1.0
    assert r.should_clean(0.5)


def test_checkpoint_splits_clean_and_dirty():
    r = rng(checkpoint_offset=20)
    assert (r.first_dirty_offset, r.first_uncleanable_offset) == (20, 30)
    assert (r.clean_bytes, r.dirty_bytes) == (200, 100)
    assert not r.should_clean(0.5)
    assert r.should_clean(0.3)


def test_checkpoint_at_active_segment_means_nothing_dirty():
    r = rng(checkpoint_offset=30)
    assert r.dirty_bytes == 0
    assert not r.should_clean(0.0)


def test_invalid_checkpoint_restarts_at_log_start():
    assert rng(checkpoint_offset=99).first_dirty_offset == 0
    assert rng(log_start_offset=10, checkpoint_offset=5).first_dirty_offset == 10


def test_high_watermark_inside_a_segment_excludes_that_segment():
    r = rng(max_cleanable_offset=15)
    assert r.first_uncleanable_offset == 10
    assert rng(max_cleanable_offset=20).first_uncleanable_offset == 20


def test_min_compaction_lag_stops_at_first_young_segment():
    r = rng(now_ms=2500, min_compaction_lag_ms=1000)  # segments with ts > 1500 are young
    assert r.first_uncleanable_offset == 10
    assert rng(now_ms=5000, min_compaction_lag_ms=1000).first_uncleanable_offset == 30


def test_single_active_segment_has_nothing_to_clean():
    r = cleanable_range(
        segs((0, 500, 1)),
        log_start_offset=0,
        log_end_offset=9,
        checkpoint_offset=None,
        now_ms=NOW,
    )
    assert (r.first_uncleanable_offset, r.dirty_bytes) == (0, 0)


def test_group_segments_by_size():
    s = segs((0, 40, 0), (10, 40, 0), (20, 40, 0), (30, 10, 0), (40, 90, 0))
    groups = group_segments(s, max_size=100, end_offset=50)
    assert [[x.base_offset for x in g] for g in groups] == [[0, 10], [20, 30], [40]]


def test_group_segments_respects_relative_offset_range():
    s = [SegmentInfo(0, 10), SegmentInfo(2**31 - 1, 10), SegmentInfo(2**31 + 5, 10)]
    groups = group_segments(s, max_size=10**9, end_offset=2**31 + 10)
    assert [[x.base_offset for x in g] for g in groups] == [[0], [2**31 - 1, 2**31 + 5]]
