"""The .cleaned/.swap/.deleted protocol: a crash after any single file operation recovers to
either the old segments or the new one, never a mix, never a loss."""

from __future__ import annotations

import os

import pytest

from brokernodes.records.batch import Record, encode_batch
from brokernodes.storage.cleaner_swap import (
    CLEANED_SUFFIX,
    commit_plan,
    complete_interrupted_swaps,
    replace_plan,
    run_plan,
    segment_file,
)


def batch(base, n):
    return encode_batch([Record(i, b"k%d" % (base + i), b"v") for i in range(n)], base_offset=base)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def snapshot(directory):
    out = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as f:
            out[name] = f.read()
    return out


@pytest.fixture
def layout(tmp_path):
    """Old segments 0 [0..9], 10 [10..19], 20 [20..24] with indexes; segment 30 untouched.
    The cleaned segment for 0..24 holds batches 0 (kept) and 20 (last batch kept)."""
    d = str(tmp_path)
    old = {0: batch(0, 10), 10: batch(10, 10), 20: batch(20, 5), 30: batch(30, 3)}
    for base, data in old.items():
        write(segment_file(d, base, ".log"), data)
        write(segment_file(d, base, ".index"), b"old-index-%d" % base)
        write(segment_file(d, base, ".timeindex"), b"old-time-%d" % base)
    write(os.path.join(d, "00000000000000000030.snapshot"), b"producer state")
    write(os.path.join(d, "leader-epoch-checkpoint"), b"0\n0\n")
    before = snapshot(d)
    new_log = batch(0, 10) + batch(20, 5)
    write(segment_file(d, 0, ".log") + CLEANED_SUFFIX, new_log)
    write(segment_file(d, 0, ".index") + CLEANED_SUFFIX, b"new-index")
    write(segment_file(d, 0, ".timeindex") + CLEANED_SUFFIX, b"new-time")
    after = {
        k: v
        for k, v in before.items()
        if not k.startswith(("00000000000000000010", "00000000000000000020"))
    }
    after["00000000000000000000.log"] = new_log
    after["00000000000000000000.index"] = b"new-index"
    after["00000000000000000000.timeindex"] = b"new-time"
    return d, before, after


def full_plan(d):
    ops = commit_plan(d, 0)
    # the replace plan is computed after the commit, as the cleaner does
    return ops, lambda: replace_plan(d, 0, [0, 10, 20])


def test_full_swap_gives_the_new_layout(layout):
    d, _, after = layout
    commit, replace = full_plan(d)
    run_plan(commit)
    run_plan(replace())
    assert snapshot(d) == after
    assert complete_interrupted_swaps(d) == []


def test_crash_after_every_operation_recovers_old_or_new(layout, tmp_path_factory):
    d, before, after = layout
    commit, replace = full_plan(d)
    pristine = snapshot(d)
    n_commit = len(commit)
    run_plan(commit)
    n_replace = len(replace())
    commit_point = next(i for i, op in enumerate(commit) if op.dst.endswith(".log.swap")) + 1
    seen = set()
    for k in range(n_commit + n_replace + 1):
        # restore the pre-swap state, then crash after k operations
        for name in os.listdir(d):
            os.unlink(os.path.join(d, name))
        for name, data in pristine.items():
            write(os.path.join(d, name), data)
        commit, replace = full_plan(d)
        run_plan(commit, stop_after=min(k, n_commit))
        if k > n_commit:
            run_plan(replace(), stop_after=k - n_commit)
        complete_interrupted_swaps(d)
        state = snapshot(d)
        logs = {n: v for n, v in state.items() if n.endswith(".log")}
        if k < commit_point:
            assert state == before, k
            seen.add("old")
        else:
            # new log, old segments gone; index files are new or absent (rebuilt on open)
            assert logs == {n: v for n, v in after.items() if n.endswith(".log")}, k
            for name, data in state.items():
                assert after.get(name) == data, (k, name)
            assert set(after) - set(state) <= {
                "00000000000000000000.index",
                "00000000000000000000.timeindex",
            }
            seen.add("new")
        assert not [n for n in state if n.endswith((".swap", ".cleaned", ".deleted"))]
    assert seen == {"old", "new"}


def test_recovery_without_index_files(tmp_path):
    d = str(tmp_path)
    write(segment_file(d, 0, ".log"), batch(0, 4))
    write(segment_file(d, 4, ".log"), batch(4, 4))
    write(segment_file(d, 0, ".log") + ".swap", batch(0, 1) + batch(4, 4))
    actions = complete_interrupted_swaps(d)
    assert actions
    assert sorted(os.listdir(d)) == ["00000000000000000000.log"]


def test_empty_trailing_segment_outside_swap_range_survives(tmp_path):
    d = str(tmp_path)
    write(segment_file(d, 0, ".log"), batch(0, 4))
    write(segment_file(d, 4, ".log"), b"")  # an empty segment after the group's last batch
    write(segment_file(d, 0, ".log") + ".swap", batch(3, 1))
    complete_interrupted_swaps(d)
    assert sorted(os.listdir(d)) == ["00000000000000000000.log", "00000000000000000004.log"]
