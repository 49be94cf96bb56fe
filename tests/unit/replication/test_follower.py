"""FollowerState and epoch-based truncation (KIP-101, KIP-279), including the classic
divergence scenarios that truncating to the high watermark gets wrong."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from brokernodes.replication import errors
from brokernodes.replication.follower import (
    FollowerPhase,
    FollowerState,
    TruncationDecision,
    out_of_range_decision,
    truncation_decision,
)
from brokernodes.replication.leader import answer_offsets_for_leader_epoch
from brokernodes.storage import leader_epoch as le
from brokernodes.storage.config import LogConfig
from brokernodes.storage.log import PartitionLog
from tests.unit.storage.batches import make_batch

E = le.EpochEntry


def entries_of(log):
    """Epoch entries of a log given as a list of epochs (offset = index)."""
    out: list[le.EpochEntry] = []
    for off, epoch in enumerate(log):
        out = le.assign(out, epoch, off) or out
    return out


def reconcile(follower_log, leader_log, *, leader_entries=None):
    """Run the follower's truncation against a leader until done; return the kept log."""
    f = FollowerState(replica_id=1)
    f.become_follower(0, 99)
    log = list(follower_log)
    lentries = leader_entries if leader_entries is not None else entries_of(leader_log)
    for _ in range(10):
        req = f.epoch_request(entries_of(log))
        if req is None:
            return log
        err, epoch, end = answer_offsets_for_leader_epoch(
            lentries, len(leader_log), 99, req.current_leader_epoch, req.requested_epoch
        )
        d = f.on_epoch_response(err, epoch, end, entries_of(log), len(log), 0)
        log = [] if d.start_at is not None else log[: d.truncate_to]
        if d.completed:
            assert f.phase is FollowerPhase.FETCHING
            return log
    raise AssertionError("no convergence")


def test_kip101_scenario1_hw_truncation_would_lose_a_committed_record():
    # A (leader, epoch 0) has m1, m2; B fetched both, but B's HW is still 1 when it restarts.
    # Truncating to its HW would drop m2, which A's HW already covers; then A dies and B
    # leads without m2. With epochs B asks A (epoch 0 -> end 2) and keeps m2.
    leader_log = [0, 0]
    follower_log = [0, 0]
    assert reconcile(follower_log, leader_log) == [0, 0]


def test_kip101_scenario2_fast_leader_change_with_unflushed_tail():
    # A had m1, m2 (epoch 0), B only m1. Both lose power; B comes back first, becomes leader
    # in epoch 1 and writes m3 at offset 1. A returns with m2 at offset 1 (its HW was 2):
    # truncating by HW keeps m2 and the logs diverge at offset 1. By epoch, B answers
    # (0, 1) and A cuts m2, then fetches m3.
    new_leader = [0, 1]
    old_leader = [0, 0]
    assert reconcile(old_leader, new_leader) == [0]


def test_kip279_follower_missing_the_leaders_epoch_asks_again():
    # Follower has epochs 1, 2 (2 was never seen by the leader), leader went 1 -> 3.
    leader_log = [1, 1, 1, 3, 3]
    follower_log = [1, 1, 2, 2, 2, 2]
    # asked for 2, the leader answers (1, 3); the follower's epoch 1 ends at 2: keep [0, 2)
    assert reconcile(follower_log, leader_log) == [1, 1]


def test_kip279_repeated_rounds_through_several_unknown_epochs():
    # Follower saw epochs 1, 2, 4; the leader only 1, 3, 5.
    leader_log = [1, 1, 3, 3, 5, 5, 5]
    follower_log = [1, 1, 1, 2, 4, 4]
    kept = reconcile(follower_log, leader_log)
    assert kept == [1, 1]
    assert kept == leader_log[: len(kept)]


def test_decision_intermediate_when_epoch_differs():
    follower = entries_of([1, 1, 2, 2])
    d = truncation_decision(
        follower, 4, leader_epoch=0, leader_end_offset=1, leader_log_start_offset=0
    )
    # below every follower epoch: the follower's answer is its first start (KIP-279)
    assert d == TruncationDecision(0, True)
    d = truncation_decision(
        follower, 4, leader_epoch=3, leader_end_offset=9, leader_log_start_offset=0
    )
    assert d == TruncationDecision(4, True)
    follower = entries_of([1, 1, 3, 3])
    d = truncation_decision(
        follower, 4, leader_epoch=2, leader_end_offset=3, leader_log_start_offset=0
    )
    assert d == TruncationDecision(2, False)  # follower has no epoch 2: cut to epoch 1's end
    d = truncation_decision(
        follower, 4, leader_epoch=1, leader_end_offset=3, leader_log_start_offset=0
    )
    assert d == TruncationDecision(2, True)


def test_never_truncates_above_own_leo():
    follower = entries_of([0, 0])
    d = truncation_decision(
        follower, 2, leader_epoch=0, leader_end_offset=10, leader_log_start_offset=0
    )
    assert d.truncate_to == 2 and d.completed


def test_undefined_answer_restarts_at_leader_log_start():
    follower = entries_of([0, 0, 0])
    d = truncation_decision(follower, 3, -1, -1, leader_log_start_offset=7)
    assert d == TruncationDecision(None, True, start_at=7)
    assert reconcile([0, 0, 0], [], leader_entries=[]) == []


def test_empty_follower_log_fetches_at_once():
    f = FollowerState(replica_id=1)
    f.become_follower(0, 3)
    assert f.epoch_request([]) is None
    assert f.phase is FollowerPhase.FETCHING
    req = f.fetch_request(0)
    assert (req.fetch_offset, req.current_leader_epoch) == (0, 3)


def test_fetch_waits_for_truncation_and_carries_epochs():
    f = FollowerState(replica_id=2, broker_epoch=11)
    f.become_follower(0, 4)
    assert f.fetch_request(5) is None
    req = f.epoch_request([E(2, 0)])
    assert (req.requested_epoch, req.current_leader_epoch) == (2, 4)
    assert f.on_epoch_response(errors.FENCED_LEADER_EPOCH, -1, -1, [E(2, 0)], 5) is None
    assert f.phase is FollowerPhase.TRUNCATING
    d = f.on_epoch_response(errors.NONE, 2, 5, [E(2, 0)], 5)
    assert d.completed and f.phase is FollowerPhase.FETCHING
    req = f.fetch_request(5)
    assert (req.replica_id, req.fetch_offset, req.current_leader_epoch, req.broker_epoch) == (
        2,
        5,
        4,
        11,
    )


def test_leader_change_restarts_truncation_and_stale_epochs_are_ignored():
    f = FollowerState(replica_id=1)
    assert f.become_follower(0, 4)
    f.epoch_request([])
    assert f.phase is FollowerPhase.FETCHING
    assert not f.become_follower(2, 3)
    assert f.phase is FollowerPhase.FETCHING
    assert f.become_follower(2, 5)
    assert f.phase is FollowerPhase.TRUNCATING


def test_fetch_error_returns_to_truncation():
    f = FollowerState(replica_id=1)
    f.become_follower(0, 1)
    f.epoch_request([])
    f.on_fetch_error(errors.FENCED_LEADER_EPOCH)
    assert f.phase is FollowerPhase.TRUNCATING


def test_follower_hw_is_leaders_capped_at_own_leo():
    f = FollowerState(replica_id=1)
    assert f.on_fetch_response(10, 7) == 7
    assert f.on_fetch_response(5, 9) == 5


def test_out_of_range():
    assert out_of_range_decision(12, 0, 10) == TruncationDecision(10, True)
    assert out_of_range_decision(3, 5, 10) == TruncationDecision(None, True, start_at=5)
    assert out_of_range_decision(7, 5, 10) == TruncationDecision(None, True)


@st.composite
def diverged_logs(draw):
    """A follower and a leader log sharing a prefix, then written by different leaders:
    every epoch has one leader, so the suffixes share no epoch (at most one of them goes
    on with the prefix's last epoch)."""
    prefix = sorted(draw(st.lists(st.integers(0, 3), max_size=8)))
    base = (prefix[-1] + 1) if prefix else 0
    pool = list(range(base, base + 8))
    mine = draw(st.lists(st.booleans(), min_size=len(pool), max_size=len(pool)))
    f_epochs = [e for e, m in zip(pool, mine, strict=True) if m]
    l_epochs = [e for e, m in zip(pool, mine, strict=True) if not m]
    cont = draw(st.sampled_from(["none", "follower", "leader"])) if prefix else "none"
    if cont == "follower":
        f_epochs = [prefix[-1], *f_epochs]
    elif cont == "leader":
        l_epochs = [prefix[-1], *l_epochs]
    f_suffix = sorted(draw(st.lists(st.sampled_from(f_epochs), max_size=8))) if f_epochs else []
    l_suffix = sorted(draw(st.lists(st.sampled_from(l_epochs), max_size=8))) if l_epochs else []
    return prefix, prefix + f_suffix, prefix + l_suffix


@settings(max_examples=500, deadline=None)
@given(diverged_logs())
def test_truncation_finds_the_exact_divergence_point(logs):
    prefix, follower_log, leader_log = logs
    # the leader assigned its current epoch at its log end when it was elected
    current = 100
    lentries = le.assign(entries_of(leader_log), current, len(leader_log))
    kept = reconcile(follower_log, leader_log, leader_entries=lentries)
    assert kept == prefix


def test_an_epoch_without_records_is_dropped_so_truncation_converges(tmp_path):
    """A replica led epoch 3 without appending (its cache says 3 starts at its log end, 1)
    and now follows a leader that went 2 -> 5. Asked for 3, the leader answers (2, 1); the
    follower's epoch below 2 is 1, ending at 1: truncate to 1, its log end, and ask again.
    The truncation drops the empty epoch 3, so the next round asks for 1 and converges
    (with the entry kept, every round asked for 3 again, forever)."""
    log = PartitionLog(tmp_path / "t-0", LogConfig(), fsync=False)
    log.append(make_batch(1), leader_epoch=1)
    log.leader_epoch_cache.assign(3, log.log_end_offset)  # took over in epoch 3, no appends
    leader_entries = [E(2, 0), E(5, 1)]
    f = FollowerState(replica_id=1)
    f.become_follower(0, 5)
    for _ in range(5):
        entries = log.leader_epoch_cache.entries
        req = f.epoch_request(entries)
        if req is None:
            break
        err, epoch, end = answer_offsets_for_leader_epoch(
            leader_entries, 1, 5, req.current_leader_epoch, req.requested_epoch
        )
        d = f.on_epoch_response(err, epoch, end, entries, log.log_end_offset, 0)
        if d.start_at is not None:
            log.truncate_fully_and_start_at(d.start_at)
        elif d.truncate_to is not None:
            log.truncate_to(d.truncate_to)
        if d.completed:
            break
    assert f.phase is FollowerPhase.FETCHING
    # the leader never had epoch 1: nothing of the follower's log can be matched
    assert log.log_end_offset == 0
    log.close()
