"""KIP-354 ``max.compaction.lag.ms``: a dirty segment older than the lag is cleaned whatever
the dirty ratio, and a compacted log's active segment rolls within the lag."""

from __future__ import annotations

from brokernodes.records.batch import Record, encode_batch
from brokernodes.storage.cleaner import LogCleaner
from brokernodes.storage.config import LogConfig

from .cleaner_helpers import T0, append, open_log, read_all


def dirty_log(tmp_path, **kw):
    """A cleaned section of many keys, then one small dirty segment 10 s old."""
    log = open_log(tmp_path / "t-0", min_cleanable_dirty_ratio=0.5, **kw)
    append(log, [(b"k%d" % i, b"x" * 20) for i in range(10)], ts=T0 - 20_000)
    log.roll()
    assert LogCleaner(now_ms=T0 - 20_000).clean(log, force=True).cleaned
    append(log, [(b"k0", b"2")], ts=T0 - 10_000)
    log.roll()
    return log


def test_without_the_lag_a_low_dirty_ratio_waits(tmp_path):
    log = dirty_log(tmp_path)
    stats = LogCleaner(now_ms=T0).clean(log)
    assert not stats.cleaned and "dirty ratio" in stats.reason
    log.close()


def test_a_segment_older_than_the_lag_is_cleaned_below_the_ratio(tmp_path):
    log = dirty_log(tmp_path, max_compaction_lag_ms=5_000)
    assert LogCleaner(now_ms=T0).clean(log).cleaned
    records = read_all(log)
    assert len(records) == 10 and records[-1][1:] == (b"k0", b"2")
    log.close()


def test_a_segment_younger_than_the_lag_waits_for_the_ratio(tmp_path):
    log = dirty_log(tmp_path, max_compaction_lag_ms=60_000)
    assert not LogCleaner(now_ms=T0).clean(log).cleaned
    log.close()


def test_the_active_segment_of_a_compacted_log_rolls_within_the_lag(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=1 << 20, max_compaction_lag_ms=1_000)
    log.append(encode_batch([Record(T0, b"a", b"1")]))
    log.append(encode_batch([Record(T0 + 2_000, b"a", b"2")]))  # 2 s after the first batch
    assert len(list(log.segments)) == 2
    log.close()


def test_roll_ms_is_segment_ms_unless_compacted_with_a_lower_lag():
    assert LogConfig(segment_ms=10, max_compaction_lag_ms=5).roll_ms == 10
    compacted = LogConfig(cleanup_policy="compact", segment_ms=10, max_compaction_lag_ms=5)
    assert compacted.roll_ms == 5
    assert LogConfig(cleanup_policy="compact", segment_ms=10).roll_ms == 10
