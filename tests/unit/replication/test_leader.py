"""LeaderState: caught-up time, ISR shrink/expand proposals, pending ISR, HW, acks=all."""

from __future__ import annotations

import pytest

from brokernodes.replication import errors
from brokernodes.replication.leader import (
    REFUSED_EXPANSION_BACKOFF_MS,
    AckStatus,
    AlterPartitionResponse,
    LeaderState,
    answer_offsets_for_leader_epoch,
)
from brokernodes.storage.leader_epoch import EpochEntry

LAG = 100


def leader(isr=(0, 1, 2), *, leo=10, hw=0, min_isr=2, now=0, epoch=5, start=None):
    return LeaderState(
        broker_id=0,
        replicas=(0, 1, 2),
        isr=isr,
        leader_epoch=epoch,
        partition_epoch=7,
        log_end_offset=leo,
        high_watermark=hw,
        now_ms=now,
        min_insync_replicas=min_isr,
        replica_lag_time_max_ms=LAG,
        leader_epoch_start_offset=start,
    )


def accept(ls, req, epoch_bump=1):
    return ls.on_alter_partition_response(
        AlterPartitionResponse(
            errors.NONE, ls.leader_epoch, ls.partition_epoch + epoch_bump, req.isr
        )
    )


def test_leader_must_be_in_isr():
    with pytest.raises(ValueError):
        LeaderState(
            broker_id=3,
            replicas=(0, 1),
            isr=(0, 1),
            leader_epoch=0,
            partition_epoch=0,
            log_end_offset=0,
            high_watermark=0,
            now_ms=0,
        )


# --- high watermark ----------------------------------------------------------------------------


def test_hw_waits_for_every_isr_follower_to_fetch():
    ls = leader()
    assert ls.high_watermark == 0
    assert not ls.update_follower_fetch(1, 10, 1).high_watermark_changed
    assert ls.update_follower_fetch(2, 6, 1).high_watermark_changed
    assert ls.high_watermark == 6
    ls.update_follower_fetch(2, 10, 2)
    assert ls.high_watermark == 10


def test_hw_never_moves_back_even_when_a_follower_reports_less():
    ls = leader()
    ls.update_follower_fetch(1, 8, 1)
    ls.update_follower_fetch(2, 8, 1)
    assert ls.high_watermark == 8
    ls.update_follower_fetch(2, 3, 2)  # a restarted follower fetches from lower
    assert ls.high_watermark == 8


def test_hw_frozen_under_min_isr_kip966():
    ls = leader(isr=(0,), min_isr=2)
    assert not ls.on_leader_append(20)
    assert ls.high_watermark == 0
    ls2 = leader(isr=(0,), min_isr=1)
    assert ls2.on_leader_append(20)
    assert ls2.high_watermark == 20


def test_new_leader_hw_starts_at_its_own_and_is_capped_by_leo():
    ls = leader(leo=10, hw=15)
    assert ls.high_watermark == 10


# --- acks=all ----------------------------------------------------------------------------------


def test_acks_all_not_enough_replicas_before_append():
    ls = leader(isr=(0,), min_isr=2)
    assert ls.check_append(-1) == errors.NOT_ENOUGH_REPLICAS
    assert ls.check_append(1) == errors.NONE
    assert leader().check_append(-1) == errors.NONE


def test_acks_all_completes_when_hw_passes_last_offset():
    ls = leader(leo=10)
    ls.on_leader_append(13)
    assert ls.check_acks_all(12) is AckStatus.PENDING
    ls.update_follower_fetch(1, 13, 1)
    ls.update_follower_fetch(2, 12, 1)
    assert ls.high_watermark == 12
    assert ls.check_acks_all(12) is AckStatus.PENDING  # HW must be > L
    ls.update_follower_fetch(2, 13, 2)
    assert ls.check_acks_all(12) is AckStatus.COMPLETE


def test_acks_all_fails_after_append_when_isr_shrinks_below_min():
    ls = leader(isr=(0, 1), min_isr=2, leo=10)
    ls.on_leader_append(12)
    req = ls.maybe_shrink_isr(LAG + 1)
    assert req is not None and req.isr == (0,)
    # pending shrink: the maximal ISR still counts, the produce keeps waiting
    assert ls.check_acks_all(11) is AckStatus.PENDING
    accept(ls, req)
    assert ls.check_acks_all(11) is AckStatus.NOT_ENOUGH_REPLICAS_AFTER_APPEND


# --- lastCaughtUpTimeMs and shrink -------------------------------------------------------------


def test_caught_up_now_when_fetch_reaches_current_leo():
    ls = leader(leo=10)
    ls.update_follower_fetch(1, 10, 50)
    assert ls.progress(1).last_caught_up_time_ms == 50


def test_caught_up_as_of_previous_fetch_when_reaching_previous_leo():
    ls = leader(leo=10)
    ls.update_follower_fetch(1, 4, 10)  # behind; the leader's LEO at this fetch is 10
    ls.on_leader_append(20)
    ls.update_follower_fetch(1, 10, 30)  # reached the LEO as of the previous fetch
    assert ls.progress(1).last_caught_up_time_ms == 10
    ls.update_follower_fetch(1, 15, 40)  # not the previous fetch's LEO (20)
    assert ls.progress(1).last_caught_up_time_ms == 10


def test_shrink_after_lag_time_and_not_before():
    ls = leader(leo=10)
    ls.update_follower_fetch(1, 10, 0)
    ls.update_follower_fetch(2, 5, 0)
    ls.on_leader_append(12)
    assert ls.maybe_shrink_isr(LAG) is None
    req = ls.maybe_shrink_isr(LAG + 1)
    assert req is not None and req.isr == (0,)
    assert (req.leader_epoch, req.partition_epoch) == (5, 7)


def test_follower_at_leader_leo_is_never_out_of_sync():
    ls = leader(leo=10)
    ls.update_follower_fetch(1, 10, 0)
    ls.update_follower_fetch(2, 10, 0)
    assert ls.maybe_shrink_isr(10 * LAG) is None


def test_ineligible_isr_member_is_dropped():
    ls = leader(leo=10)
    ls.ineligible = frozenset({2})
    req = ls.maybe_shrink_isr(1)
    assert req is not None and req.isr == (0, 1)


def test_pending_shrink_keeps_the_member_for_hw():
    ls = leader(isr=(0, 1, 2), leo=10)
    ls.update_follower_fetch(1, 10, 0)
    ls.update_follower_fetch(2, 4, 0)
    assert ls.high_watermark == 4
    req = ls.maybe_shrink_isr(LAG + 1)
    assert req.isr == (0, 1)
    assert ls.maximal_isr == {0, 1, 2}
    ls.update_follower_fetch(1, 10, LAG + 2)
    assert ls.high_watermark == 4  # still held by 2 until the controller accepts
    assert accept(ls, req)
    assert ls.high_watermark == 10 and ls.isr == {0, 1} and ls.pending is None


def test_one_change_in_flight_at_a_time():
    ls = leader(isr=(0, 1), leo=10)
    assert ls.maybe_shrink_isr(LAG + 1) is not None
    assert ls.update_follower_fetch(2, 10, LAG + 1).alter_partition is None
    assert ls.maybe_shrink_isr(LAG + 2) is None


def test_rejected_change_reverts_to_committed():
    ls = leader(isr=(0, 1), leo=10)
    ls.maybe_shrink_isr(LAG + 1)
    ls.on_alter_partition_response(AlterPartitionResponse(errors.INVALID_UPDATE_VERSION))
    assert ls.pending is None and ls.isr == {0, 1}


# --- expand ------------------------------------------------------------------------------------


def test_expand_when_follower_reaches_hw_in_current_epoch():
    ls = leader(isr=(0, 1), leo=10, start=10)
    ls.update_follower_fetch(1, 10, 1)
    assert ls.high_watermark == 10
    assert ls.update_follower_fetch(2, 9, 1).alter_partition is None
    req = ls.update_follower_fetch(2, 10, 2).alter_partition
    assert req is not None and req.isr == (0, 1, 2)
    # pending expansion counts against the HW at once (KIP-497 maximal ISR)
    ls.on_leader_append(15)
    ls.update_follower_fetch(1, 15, 3)
    assert ls.high_watermark == 10
    accept(ls, req)
    assert ls.isr == {0, 1, 2}


def test_no_expand_before_current_epoch_start():
    ls = leader(isr=(0, 1), leo=10, hw=0, start=8)
    ls.update_follower_fetch(1, 0, 1)
    assert ls.high_watermark == 0
    assert ls.update_follower_fetch(2, 5, 1).alter_partition is None  # >= HW, < epoch start
    assert ls.update_follower_fetch(2, 8, 2).alter_partition is not None


def test_no_expand_of_ineligible_replica():
    ls = leader(isr=(0, 1), leo=10, start=0)
    ls.ineligible = frozenset({2})
    assert ls.update_follower_fetch(2, 10, 1).alter_partition is None


def test_refused_expansion_waits_before_proposing_the_replica_again():
    """INELIGIBLE_REPLICA: the same follower is not proposed on every fetch (a storm of
    AlterPartition calls), only after the backoff; another refusal holds it back again."""
    ls = leader(isr=(0, 1), leo=10, start=0)
    req = ls.update_follower_fetch(2, 10, 1000).alter_partition
    assert req is not None and req.isr == (0, 1, 2)
    ls.on_alter_partition_response(AlterPartitionResponse(errors.INELIGIBLE_REPLICA), 1000)
    assert ls.pending is None and ls.isr == {0, 1}
    for t in (1001, 1500, 1000 + REFUSED_EXPANSION_BACKOFF_MS - 1):
        assert ls.update_follower_fetch(2, 10, t).alter_partition is None
    again = ls.update_follower_fetch(2, 10, 1000 + REFUSED_EXPANSION_BACKOFF_MS)
    assert again.alter_partition is not None and again.alter_partition.isr == (0, 1, 2)
    accept(ls, again.alter_partition)
    assert ls.isr == {0, 1, 2}


def test_other_refusals_propose_again_at_the_next_fetch():
    ls = leader(isr=(0, 1), leo=10, start=0)
    ls.update_follower_fetch(2, 10, 1000)
    ls.on_alter_partition_response(AlterPartitionResponse(errors.INVALID_UPDATE_VERSION), 1000)
    assert ls.update_follower_fetch(2, 10, 1001).alter_partition is not None


def test_proposal_carries_broker_epochs():
    ls = leader(isr=(0, 1), leo=10, start=0)
    ls.update_follower_fetch(1, 10, 1, broker_epoch=41)
    req = ls.update_follower_fetch(2, 10, 1, broker_epoch=42).alter_partition
    assert req.new_isr == ((0, -1), (1, 41), (2, 42))


def test_stale_metadata_ignored_newer_replaces_pending():
    ls = leader(isr=(0, 1, 2), leo=10)
    ls.maybe_shrink_isr(LAG + 1)
    assert not ls.update_from_metadata(isr=(0,), leader_epoch=5, partition_epoch=6)
    assert ls.isr == {0, 1, 2} and ls.pending is not None
    ls.update_from_metadata(isr=(0, 1), leader_epoch=5, partition_epoch=9)
    assert ls.isr == {0, 1} and ls.pending is None and ls.partition_epoch == 9
    ls.update_from_metadata(isr=(0,), leader_epoch=6, partition_epoch=10)  # not ours
    assert ls.isr == {0, 1}


# --- OffsetsForLeaderEpoch ---------------------------------------------------------------------


def test_offsets_for_leader_epoch_is_fenced_by_current_epoch():
    entries = [EpochEntry(1, 0), EpochEntry(3, 5), EpochEntry(5, 9)]
    assert answer_offsets_for_leader_epoch(entries, 12, 5, 4, 3)[0] == errors.FENCED_LEADER_EPOCH
    assert answer_offsets_for_leader_epoch(entries, 12, 5, 6, 3)[0] == errors.UNKNOWN_LEADER_EPOCH
    assert answer_offsets_for_leader_epoch(entries, 12, 5, 5, 3) == (errors.NONE, 3, 9)
    assert answer_offsets_for_leader_epoch(entries, 12, 5, 5, 2) == (errors.NONE, 1, 5)
    assert answer_offsets_for_leader_epoch(entries, 12, 5, 5, 5) == (errors.NONE, 5, 12)


def test_fetch_validation_fences_stale_epochs_both_ways():
    ls = leader(epoch=5)
    assert ls.validate_fetch(1, 5) == errors.NONE
    assert ls.validate_fetch(1, 4) == errors.FENCED_LEADER_EPOCH
    # a zombie leader (paused past its session, epoch 5) meets followers of epoch 6
    assert ls.validate_fetch(1, 6) == errors.UNKNOWN_LEADER_EPOCH
    assert ls.validate_fetch(7, 5) == errors.NOT_LEADER_OR_FOLLOWER


def test_zombie_leader_never_acknowledges():
    # Fenced by the controller, the old leader keeps its state; its followers now fetch under
    # the new epoch and are refused, so its HW cannot pass what it appends.
    ls = leader(isr=(0, 1, 2), leo=10)
    ls.update_follower_fetch(1, 10, 1)
    ls.update_follower_fetch(2, 10, 1)
    ls.on_leader_append(15)
    for r in (1, 2):
        assert ls.validate_fetch(r, 6) != errors.NONE
    assert ls.check_acks_all(14) is AckStatus.PENDING
    assert ls.high_watermark == 10


def test_isr_member_fetching_below_the_hw_leaves_the_isr_at_once():
    """A follower whose log was cut below the HW (a scrubber repair) no longer holds
    committed records: it is proposed out at once, not after the lag time, and stays out of
    sync until it fetches from the HW again."""
    ls = leader()
    ls.update_follower_fetch(1, 10, 1)
    ls.update_follower_fetch(2, 10, 1)
    assert ls.high_watermark == 10
    update = ls.update_follower_fetch(2, 4, 2)  # well within the lag time
    assert update.alter_partition is not None and update.alter_partition.isr == (0, 1)
    assert update.alter_partition.below_high_watermark == (2,)  # never an ELR member
    assert not update.high_watermark_changed
    assert ls.out_of_sync_replicas(2) == frozenset({2})
    ls.pending = None  # the change was refused: the expiration pass proposes it again
    again = ls.maybe_shrink_isr(3)
    assert again.isr == (0, 1) and again.below_high_watermark == (2,)
