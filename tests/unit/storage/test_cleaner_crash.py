"""A crash at every step of the cleaner's segment swap, then a reopen: the log holds either the
old or the compacted records, every offset reads where it should, nothing lost or doubled."""

from __future__ import annotations

import os
import pathlib
import tempfile

import pytest

from brokernodes.records.batch import decode_batches
from brokernodes.storage.cleaner import LogCleaner
from brokernodes.storage.cleaner_swap import commit_plan, replace_plan, run_plan

from .cleaner_helpers import T0, append, compacted_model, latest, open_log, read_all

KEYS = [b"a", b"b", b"c", b"d", b"e"]


def build(path):
    """Many small closed segments of keyed updates, one tombstone, then the active segment."""
    log = open_log(path, segment_bytes=4000)
    n = 0
    for r in range(8):
        for k in KEYS[: 2 + r % 4]:
            value = None if (k == b"c" and r == 5) else b"%s%d" % (k, r)
            append(log, [(k, value), (b"z%d" % (n % 3), b"z")])
            n += 1
        log.roll()
    append(log, [(b"a", b"active")])
    return log


def check_offsets(log, survivors):
    offsets = [o for o, _, _ in survivors]
    assert offsets == sorted(set(offsets))
    for o in range(log.log_start_offset, log.log_end_offset):
        data = log.read(o, 1 << 20).read_bytes()
        first = next(r.offset for b in decode_batches(data) for r in b.records if r.offset >= o)
        assert first == min(x for x in offsets if x >= o), o


def swap_ops_count(tmp_path):
    log = build(tmp_path / "probe-0")
    cleaner = LogCleaner(now_ms=T0)
    plan = cleaner.prepare(log)
    cleaned = cleaner.write_group(log, plan, plan.groups[0])
    d = log.directory
    commit = commit_plan(d, cleaned.base_offset)
    run_plan(commit)
    replace = replace_plan(d, cleaned.base_offset, [s.base_offset for s in cleaned.old])
    log.close_without_flush()
    commit_point = 1 + next(i for i, op in enumerate(commit) if op.dst.endswith(".log.swap"))
    return len(commit), len(replace), commit_point


def _probe():
    with tempfile.TemporaryDirectory() as d:
        return swap_ops_count(pathlib.Path(d))


N_COMMIT, N_REPLACE, COMMIT_POINT = _probe()


def test_the_swap_plan_has_steps():
    assert N_COMMIT >= 2 and N_REPLACE >= 5
    assert 0 < COMMIT_POINT < N_COMMIT


@pytest.mark.parametrize("k", range(N_COMMIT + N_REPLACE + 1))
def test_crash_after_k_swap_operations(tmp_path, k):
    n_commit, n_replace, commit_point = N_COMMIT, N_REPLACE, COMMIT_POINT
    path = tmp_path / "t-0"
    log = build(path)
    before = read_all(log)
    leo = log.log_end_offset
    cleaner = LogCleaner(now_ms=T0)
    plan = cleaner.prepare(log)
    assert len(plan.groups[0]) > 1  # a real merge of several segments
    end = plan.range.first_uncleanable_offset
    cleaned = cleaner.write_group(log, plan, plan.groups[0])
    group_end = log.segments.higher(cleaned.old[-1].base_offset).base_offset
    d = log.directory
    commit = commit_plan(d, cleaned.base_offset)
    run_plan(commit, stop_after=k)
    if k > n_commit:
        replace = replace_plan(d, cleaned.base_offset, [s.base_offset for s in cleaned.old])
        assert len(replace) == n_replace
        run_plan(replace, stop_after=k - n_commit)
    log.close_without_flush()  # the crash: no flush, no clean-shutdown marker

    log = open_log(path)
    try:
        got = read_all(log)
        compacted = compacted_model(before, end)
        new_state = [r for r in compacted if r[0] < group_end] + [
            r for r in before if r[0] >= group_end
        ]
        assert got in (before, new_state), k
        assert got == (before if k < commit_point else new_state), k  # .log.swap commits
        assert log.log_end_offset == leo
        assert latest(got) == latest(before)
        check_offsets(log, got)
        names = os.listdir(path)
        assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
        # the next clean finishes the job
        log.update_high_watermark(log.log_end_offset)
        LogCleaner(now_ms=T0).clean(log, force=True)
        final = read_all(log)
        assert final == compacted
        check_offsets(log, final)
    finally:
        log.close()
    log = open_log(path)
    assert read_all(log) == compacted
    log.close()
