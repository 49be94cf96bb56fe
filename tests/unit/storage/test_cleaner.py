"""LogCleaner on a real PartitionLog: compaction, tombstones, offsets, composition."""

from __future__ import annotations

import os
import struct
import threading

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brokernodes.records.batch import Record, decode_batches, encode_batch
from brokernodes.storage.cleaner import CLEANER_CHECKPOINT_FILENAME, LogCleaner
from brokernodes.storage.cleaner_swap import commit_plan, replace_plan, run_plan

from .cleaner_helpers import DAY, T0, append, compacted_model, open_log, read_all


def fill(log, rounds=6, keys=(b"a", b"b", b"c", b"d")):
    for r in range(rounds):
        for k in keys:
            append(log, [(k, b"%s-%d" % (k, r))])
    log.roll()


def test_compaction_keeps_latest_value_per_key_at_original_offsets(tmp_path):
    log = open_log(tmp_path / "t-0")
    fill(log)
    before = read_all(log)
    leo, start, size = log.log_end_offset, log.log_start_offset, log.size_in_bytes
    stats = LogCleaner(now_ms=T0).clean(log)
    assert stats.cleaned, stats.reason
    after = read_all(log)
    assert after == compacted_model(before, leo)
    assert {k: v for _, k, v in after} == {k: v for k, (_, v) in _latest(before).items()}
    assert [o for o, _, _ in after] == [20, 21, 22, 23]
    assert (log.log_end_offset, log.log_start_offset) == (leo, start)
    assert log.size_in_bytes < size
    assert stats.records.records_read == 24 and stats.records.records_written == 4
    # appends keep working and offsets continue
    assert append(log, [(b"a", b"new")]) == leo
    log.close()


def _latest(records):
    out = {}
    for offset, key, value in records:
        out[key] = (offset, value)
    return out


def test_every_offset_reads_where_it_should(tmp_path):
    log = open_log(tmp_path / "t-0")
    fill(log, rounds=5, keys=(b"a", b"b", b"c"))
    for k in (b"x", b"y"):
        append(log, [(k, b"1")])  # in the active segment: not cleaned
    LogCleaner(now_ms=T0).clean(log)
    survivors = read_all(log)
    offsets = [o for o, _, _ in survivors]
    for o in range(log.log_start_offset, log.log_end_offset):
        data = log.read(o, 1 << 20).read_bytes()
        first = next(r.offset for b in decode_batches(data) for r in b.records if r.offset >= o)
        assert first == min(x for x in offsets if x >= o)
    log.close()


def test_clean_survives_reopen_and_is_idempotent(tmp_path):
    log = open_log(tmp_path / "t-0")
    fill(log)
    LogCleaner(now_ms=T0).clean(log)
    once = read_all(log)
    log.close()
    log = open_log(tmp_path / "t-0")
    assert read_all(log) == once
    stats = LogCleaner(now_ms=T0).clean(log, force=True)
    assert read_all(log) == once
    assert stats.segments_written == 0
    log.close()
    log = open_log(tmp_path / "t-0")
    assert read_all(log) == once
    log.close()


def test_tombstones_kept_until_delete_horizon_then_dropped(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, [(b"a", b"1"), (b"b", b"1")])
    append(log, [(b"a", None)])  # delete a
    log.roll()
    LogCleaner(now_ms=T0).clean(log)
    assert read_all(log) == [(1, b"b", b"1"), (2, b"a", None)]
    # before the horizon (first clean + delete.retention.ms): still there
    LogCleaner(now_ms=T0 + DAY - 1).clean(log, force=True)
    assert read_all(log) == [(1, b"b", b"1"), (2, b"a", None)]
    # at the horizon it goes; the log end offset does not move
    leo = log.log_end_offset
    LogCleaner(now_ms=T0 + DAY).clean(log, force=True)
    assert read_all(log) == [(1, b"b", b"1")]
    assert log.log_end_offset == leo
    log.close()


def test_newer_value_after_tombstone_wins(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, [(b"a", b"1")])
    append(log, [(b"a", None)])
    append(log, [(b"a", b"2")])
    log.roll()
    LogCleaner(now_ms=T0).clean(log)
    assert read_all(log) == [(2, b"a", b"2")]
    log.close()


def test_keyless_records_are_dropped(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, [(None, b"x"), (b"a", b"1"), (None, b"y")])
    log.roll()
    stats = LogCleaner(now_ms=T0).clean(log)
    assert read_all(log) == [(1, b"a", b"1")]
    assert stats.records.invalid_records == 2
    log.close()


def test_active_segment_and_records_above_high_watermark_are_not_cleaned(tmp_path):
    log = open_log(tmp_path / "t-0")
    fill(log, rounds=3)
    hw = log.log_end_offset
    fill(log, rounds=3)
    log.update_high_watermark(hw)
    append(log, [(b"a", b"active")])
    log.update_high_watermark(hw)
    before = read_all(log)
    stats = LogCleaner(now_ms=T0).clean(log)
    assert stats.range.first_uncleanable_offset <= hw
    end = stats.range.first_uncleanable_offset
    assert read_all(log) == compacted_model(before, end)
    assert [r for r in read_all(log) if r[0] >= end] == [r for r in before if r[0] >= end]
    log.close()


def test_dirty_ratio_and_checkpoint(tmp_path):
    log = open_log(tmp_path / "t-0", min_cleanable_dirty_ratio=0.5)
    fill(log, rounds=4)
    assert LogCleaner(now_ms=T0).clean(log).cleaned
    checkpoint = (tmp_path / "t-0" / CLEANER_CHECKPOINT_FILENAME).read_text().split()
    assert int(checkpoint[2]) == log.segments.last.base_offset
    append(log, [(b"a", b"tiny")])
    log.roll()
    stats = LogCleaner(now_ms=T0).clean(log)
    assert not stats.cleaned and "dirty ratio" in stats.reason
    fill(log, rounds=6)
    assert LogCleaner(now_ms=T0).clean(log).cleaned
    log.close()


def test_min_compaction_lag_holds_back_young_segments(tmp_path):
    log = open_log(tmp_path / "t-0", min_compaction_lag_ms=1000)
    append(log, [(b"a", b"old")], ts=T0 - 5000)
    log.roll()
    append(log, [(b"a", b"young")], ts=T0)
    log.roll()
    stats = LogCleaner(now_ms=T0).clean(log)
    assert stats.range.first_uncleanable_offset == 1
    assert [r[2] for r in read_all(log)] == [b"old", b"young"]
    LogCleaner(now_ms=T0 + 2000).clean(log)
    assert read_all(log) == [(1, b"a", b"young")]
    log.close()


def test_delete_policy_is_not_compacted(tmp_path):
    log = open_log(tmp_path / "t-0", cleanup_policy="delete")
    fill(log, rounds=2)
    stats = LogCleaner(now_ms=T0).clean(log)
    assert not stats.cleaned and "does not compact" in stats.reason
    log.close()


def test_compact_delete_composes_with_retention(tmp_path):
    log = open_log(tmp_path / "t-0", cleanup_policy="compact,delete", retention_ms=1000)
    for i in range(10):
        append(log, [(b"k%d" % (i % 3), b"old%d" % i)], ts=T0 - 10_000)
    log.roll()
    for i in range(6):
        append(log, [(b"k%d" % (i % 2), b"new%d" % i)], ts=T0)
    log.roll()
    before = read_all(log)
    LogCleaner(now_ms=T0).clean(log)
    assert read_all(log) == compacted_model(before, log.segments.last.base_offset)
    removed = log.apply_retention(now_ms=T0)
    assert removed >= 1
    remaining = read_all(log)
    assert all(v.startswith(b"new") for _, _, v in remaining)
    assert latest(remaining) == {
        k: v for k, v in latest(compacted_model(before, 16)).items() if v[1].startswith(b"new")
    }
    LogCleaner(now_ms=T0).clean(log, force=True)
    assert read_all(log) == remaining
    log.close()


def latest(records):
    return _latest(records)


def test_no_leftover_files(tmp_path):
    log = open_log(tmp_path / "t-0")
    fill(log)
    LogCleaner(now_ms=T0).clean(log)
    names = os.listdir(tmp_path / "t-0")
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
    log.close()


ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("append"),
            st.lists(
                st.tuples(
                    st.sampled_from([b"a", b"b", b"c", b"d", b"e", None]),
                    st.one_of(st.none(), st.binary(min_size=1, max_size=30)),
                ),
                min_size=1,
                max_size=4,
            ),
        ),
        st.tuples(st.just("roll")),
        st.tuples(st.just("clean"), st.integers(0, 2 * DAY)),
        st.tuples(st.just("crash_during_clean"), st.integers(0, 40)),
        st.tuples(st.just("reopen")),
    ),
    max_size=30,
)


def _crash_during_clean(log, path, k):
    """Run a clean's first group swap up to file operation ``k``, crash, reopen."""
    cleaner = LogCleaner(now_ms=T0)
    plan = cleaner.prepare(log, force=True)
    if plan is not None:
        cleaned = None
        for group in plan.groups:
            cleaned = cleaner.write_group(log, plan, group)
            if cleaned is not None:
                break
        if cleaned is not None:
            d = log.directory
            commit = commit_plan(d, cleaned.base_offset)
            run_plan(commit, stop_after=k)
            if k > len(commit):
                bases = [s.base_offset for s in cleaned.old]
                run_plan(replace_plan(d, cleaned.base_offset, bases), stop_after=k - len(commit))
    log.close_without_flush()
    log = open_log(path)
    log.update_high_watermark(log.log_end_offset)
    return log, (plan.range.first_uncleanable_offset if plan else 0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_random_appends_and_cleans_match_model(tmp_path_factory, operations):
    path = tmp_path_factory.mktemp("log") / "t-0"
    log = open_log(path)
    model: list[tuple[int, bytes | None, bytes | None]] = []  # everything ever appended
    touched = 0  # no clean ever reached offsets at or above this
    clock = T0
    try:
        for op in operations:
            if op[0] == "append":
                first = append(log, op[1])
                model += [(first + i, k, v) for i, (k, v) in enumerate(op[1])]
            elif op[0] == "roll":
                log.roll()
            elif op[0] == "reopen":
                log.close()
                log = open_log(path)
                log.update_high_watermark(log.log_end_offset)
            elif op[0] == "crash_during_clean":
                log, end = _crash_during_clean(log, path, op[1])
                touched = max(touched, end)
            else:
                clock += op[1]
                stats = LogCleaner(now_ms=clock).clean(log, force=True)
                if stats.cleaned:
                    end = stats.range.first_uncleanable_offset
                    touched = max(touched, end)
                    # right after a clean: below its end, exactly the latest record per key
                    # (a tombstone possibly gone), nothing keyless
                    got = read_all(log)
                    expected = [r for r in compacted_model(model, end) if r[0] < end]
                    below = [r for r in got if r[0] < end]
                    assert [r for r in below if r[2] is not None] == [
                        r for r in expected if r[2] is not None
                    ]
                    assert set(below) <= set(expected)
            got = read_all(log)
            offsets = [o for o, _, _ in got]
            assert offsets == sorted(set(offsets))  # no duplicates, in order
            assert log.log_end_offset == (model[-1][0] + 1 if model else 0)
            assert set(got) <= set(model)  # nothing invented
            # nothing at or above what any clean reached has changed
            assert [r for r in got if r[0] >= touched] == [r for r in model if r[0] >= touched]
            # a record is only ever removed if a later record has its key, or it is a
            # tombstone or keyless
            kept = set(got)
            last_offset = {k: o for o, k, _ in model}
            for r in model:
                if r not in kept:
                    assert r[1] is None or r[2] is None or last_offset[r[1]] > r[0], r
            # reading the log as a consumer gives the model's key -> latest value
            want = {k: v for k, (_, v) in latest(model).items() if k is not None}
            have = {k: v for k, (_, v) in latest(got).items() if k is not None}
            assert {k: v for k, v in have.items() if v is not None} == {
                k: v for k, v in want.items() if v is not None
            }
    finally:
        log.close()


def _txn_batch(log, pid, pairs):
    records = [Record(T0, k, v) for k, v in pairs]
    log.append(encode_batch(records, producer_id=pid, producer_epoch=0, is_transactional=True))


def _marker(log, pid, kind):
    record = Record(T0, struct.pack(">hh", 0, kind), struct.pack(">hi", 0, 0))
    log.append(
        encode_batch(
            [record], producer_id=pid, producer_epoch=0, is_transactional=True, is_control=True
        )
    )


def test_aborted_transactions_removed_markers_kept_open_transaction_blocks(tmp_path):
    log = open_log(tmp_path / "t-0")
    _txn_batch(log, 7, [(b"a", b"aborted"), (b"b", b"aborted")])  # 0, 1
    _marker(log, 7, 0)  # 2: ABORT
    log.roll()
    _txn_batch(log, 8, [(b"a", b"committed")])  # 3
    _marker(log, 8, 1)  # 4: COMMIT
    log.roll()
    append(log, [(b"c", b"1")])  # 5
    log.roll()
    _txn_batch(log, 9, [(b"c", b"open")])  # 6: no marker yet
    log.roll()
    append(log, [(b"d", b"1")])  # 7
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    stats = LogCleaner(now_ms=T0).clean(log)
    assert stats.range.first_uncleanable_offset == 6
    data = log.read(0, 1 << 20).read_bytes()
    batches = decode_batches(data)
    assert [(b.header.base_offset, b.header.is_control) for b in batches] == [
        (2, True),
        (3, False),
        (4, True),
        (5, False),
        (6, False),
        (7, False),
    ]
    values = [
        (r.offset, r.key, r.value) for b in batches if not b.header.is_control for r in b.records
    ]
    assert values == [(3, b"a", b"committed"), (5, b"c", b"1"), (6, b"c", b"open"), (7, b"d", b"1")]
    log.close()


def test_cleaned_indexes_equal_a_rebuild(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=3000, index_interval_bytes=100)
    for r in range(30):
        append(log, [(b"k%d" % (r % 7), b"v" * (r % 5 + 1)), (b"x%d" % r, b"y")], ts=T0 + r)
        if r % 4 == 3:
            log.roll()
    log.roll()
    LogCleaner(now_ms=T0).clean(log)
    built = {
        s.base_offset: (s.offset_index.entries(), s.time_index.entries())
        for s in list(log.segments)[:-1]
    }
    log.close()
    for s in list(built):
        for ext in (".index", ".timeindex"):
            os.unlink(tmp_path / "t-0" / f"{s:020d}{ext}")
    log = open_log(tmp_path / "t-0")  # missing indexes are rebuilt from the .log
    rebuilt = {
        s.base_offset: (s.offset_index.entries(), s.time_index.entries())
        for s in list(log.segments)[:-1]
    }
    assert built == rebuilt
    assert any(offsets for offsets, _ in built.values())
    log.close()


def test_appends_and_rolls_during_a_clean_are_kept(tmp_path):
    log = open_log(tmp_path / "t-0")
    fill(log, rounds=4)
    cleaner = LogCleaner(now_ms=T0)
    plan = cleaner.prepare(log)
    append(log, [(b"a", b"during")])
    log.roll()
    append(log, [(b"b", b"during")])
    before = read_all(log)
    for group in plan.groups:
        cleaned = cleaner.write_group(log, plan, group)
        assert cleaned is not None and cleaner.swap_in(log, plan, cleaned)
    end = plan.range.first_uncleanable_offset
    assert read_all(log) == compacted_model(before, end)
    log.close()


def test_segment_deleted_by_retention_during_a_clean_aborts_safely(tmp_path):
    log = open_log(tmp_path / "t-0", cleanup_policy="compact,delete", retention_ms=1000)
    for r in range(4):
        append(log, [(b"a", b"old%d" % r)], ts=T0 - 10_000)
        log.roll()
    fill(log, rounds=3)
    cleaner = LogCleaner(now_ms=T0)
    plan = cleaner.prepare(log)
    assert log.apply_retention(now_ms=T0) > 0
    before = read_all(log)
    results = []
    for group in plan.groups:
        try:
            cleaned = cleaner.write_group(log, plan, group)
        except FileNotFoundError:
            results.append("gone")
            continue
        if cleaned is not None:
            results.append(cleaner.swap_in(log, plan, cleaned))
    assert "gone" in results or False in results
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith(".cleaned")]
    got = read_all(log)
    assert set(got) <= set(before)
    assert latest(got) == latest(before)
    stats = LogCleaner(now_ms=T0).clean(log, force=True)
    assert stats.cleaned, stats.reason
    log.close()


def test_clean_reports_a_segment_that_went_away(tmp_path, monkeypatch):
    log = open_log(tmp_path / "t-0")
    fill(log, rounds=3)
    cleaner = LogCleaner(now_ms=T0)
    real_prepare = cleaner.prepare

    def prepare_then_lose_a_segment(*a, **kw):
        plan = real_prepare(*a, **kw)
        log.delete_records(log.segments.higher(0).base_offset)  # deletes segment 0
        return plan

    monkeypatch.setattr(cleaner, "prepare", prepare_then_lose_a_segment)
    stats = cleaner.clean(log)
    assert not stats.cleaned and "went away" in stats.reason
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith(".cleaned")]
    log.close()


def test_cleaning_in_a_thread_while_appending(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=600)
    model = []
    for r in range(40):
        first = append(log, [(b"k%d" % (r % 5), b"v%d" % r)])
        model.append((first, b"k%d" % (r % 5), b"v%d" % r))
    errors = []

    def cleaner_loop():
        try:
            for i in range(5):
                LogCleaner(now_ms=T0 + i).clean(log, force=True)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    thread = threading.Thread(target=cleaner_loop)
    thread.start()
    for r in range(40, 200):
        first = append(log, [(b"k%d" % (r % 5), b"v%d" % r)])
        model.append((first, b"k%d" % (r % 5), b"v%d" % r))
    thread.join()
    assert not errors
    got = read_all(log)
    assert set(got) <= set(model)
    assert latest(got) == latest(model)
    assert log.log_end_offset == 200
    log.close()
