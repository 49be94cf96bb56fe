"""Controller decisions: elections (ISR, ELR, unclean), fencing, AlterPartition validation,
preferred leaders, reassignment, partition increase, controlled shutdown."""

from __future__ import annotations

import pytest

from brokernodes.replication import controller as ctl
from brokernodes.replication import errors
from brokernodes.replication.leader import AlterPartitionRequest

Reg = ctl.PartitionRegistration


def view(*live, epochs=None, shutting_down=()):
    return ctl.BrokerView(
        frozenset(live),
        epochs or {b: 10 + b for b in range(6)},
        frozenset(shutting_down),
    )


def reg(replicas=(0, 1, 2), isr=(0, 1, 2), leader=0, le=3, pe=8, **kw):
    return Reg(replicas, isr, leader, le, pe, **kw)


def req(isr, *, leader=0, le=3, pe=8, epochs=None):
    epochs = epochs or {}
    return AlterPartitionRequest(leader, le, pe, tuple((b, epochs.get(b, 10 + b)) for b in isr))


# --- elections ---------------------------------------------------------------------------------


def test_election_prefers_preferred_replica_from_isr():
    r = reg(leader=ctl.NO_LEADER, isr=(1, 2))
    e = ctl.elect_leader(r, view(0, 1, 2))
    assert e.leader == 1 and not e.unclean
    assert (e.registration.leader_epoch, e.registration.partition_epoch) == (4, 9)
    assert ctl.elect_leader(reg(leader=ctl.NO_LEADER), view(0, 1, 2)).leader == 0


def test_no_clean_candidate_stays_offline_unless_unclean_enabled():
    r = reg(leader=ctl.NO_LEADER, isr=(0,))
    assert ctl.elect_leader(r, view(1, 2)) is None
    e = ctl.elect_leader(r, view(1, 2), unclean_enabled=True)
    assert e.leader == 1 and e.unclean
    assert e.registration.isr == (1,)


def test_shutting_down_broker_is_not_elected():
    r = reg(leader=ctl.NO_LEADER)
    assert ctl.elect_leader(r, view(0, 1, 2, shutting_down=(0,))).leader == 1


def test_fencing_the_leader_moves_leadership_within_isr():
    e = ctl.fence_broker(reg(), 0, view(1, 2), min_isr=2)
    assert e.leader == 1
    assert e.registration.isr == (1, 2) and e.registration.elr == ()
    assert e.registration.leader_epoch == 4


def test_fencing_a_follower_bumps_partition_epoch_only():
    e = ctl.fence_broker(reg(), 2, view(0, 1), min_isr=2)
    assert e.leader == 0 and e.registration.isr == (0, 1)
    assert (e.registration.leader_epoch, e.registration.partition_epoch) == (3, 9)
    assert ctl.fence_broker(reg(isr=(0, 1)), 2, view(0, 1), min_isr=2) is None


def test_last_replica_standing_uses_elr_kip966():
    # ISR {0, 1}, min ISR 2: 1 falls out (ISR below min, 1 keeps every committed record)
    r = ctl.fence_broker(reg(isr=(0, 1)), 1, view(0, 2), min_isr=2).registration
    assert r.isr == (0,) and r.elr == (1,)
    # the last ISR member is killed: the partition goes offline, nobody is eligible yet
    e = ctl.fence_broker(r, 0, view(2), min_isr=2)
    assert e.leader == ctl.NO_LEADER and e.registration.isr == () and e.registration.elr == (0, 1)
    # 0 restarts after an unclean shutdown (unflushed tail cut): no longer eligible
    r = ctl.unclean_restart(e.registration, 0)
    assert r.elr == (1,) and r.isr == ()
    assert ctl.elect_leader(r, view(0, 2)) is None  # 2 was never eligible
    # 1 comes back (clean) and is elected from the ELR
    e = ctl.elect_leader(r, view(0, 1, 2))
    assert e.leader == 1 and e.from_elr and not e.unclean
    assert e.registration.isr == (1,)


def test_isr_back_at_min_clears_elr():
    r = reg(isr=(0,), elr=(1,))
    res = ctl.alter_partition(r, req((0, 2)), view(0, 1, 2), min_isr=2)
    assert res.error == errors.NONE
    assert res.registration.isr == (0, 2) and res.registration.elr == ()


def test_a_member_dropped_below_the_hw_never_enters_the_elr():
    """The leader saw replica 1 fetch below the HW (its log was repaired): dropping it puts
    the ISR under min ISR, yet it misses committed records, so it is no eligible leader."""
    r = reg(isr=(0, 1))
    below = AlterPartitionRequest(0, 3, 8, ((0, 10),), below_high_watermark=(1,))
    res = ctl.alter_partition(r, below, view(0, 1, 2), min_isr=2)
    assert res.error == errors.NONE
    assert res.registration.isr == (0,) and res.registration.elr == ()
    # the same drop for lag alone keeps KIP-966's rule: the member holds everything to the HW
    res = ctl.alter_partition(r, req((0,)), view(0, 1, 2), min_isr=2)
    assert res.registration.elr == (1,)


def test_unclean_restart_of_leader_takes_leadership_away():
    r = ctl.unclean_restart(reg(), 0)
    assert r.leader == ctl.NO_LEADER and r.isr == (1, 2) and r.leader_epoch == 4
    assert ctl.unclean_restart(reg(isr=(0, 1)), 2) is None


# --- AlterPartition ----------------------------------------------------------------------------


def test_alter_partition_accepts_and_bumps_partition_epoch():
    res = ctl.alter_partition(reg(), req((0, 1)), view(0, 1, 2), min_isr=2)
    assert res.error == errors.NONE
    assert res.registration.isr == (0, 1)
    assert (res.registration.leader_epoch, res.registration.partition_epoch) == (3, 9)


@pytest.mark.parametrize(
    ("request_", "brokers", "code"),
    [
        (req((0, 1), le=2), view(0, 1, 2), errors.FENCED_LEADER_EPOCH),
        (req((0, 1), le=4), view(0, 1, 2), errors.FENCED_LEADER_EPOCH),
        (req((0, 1), pe=7), view(0, 1, 2), errors.INVALID_UPDATE_VERSION),
        (req((0, 1), leader=1), view(0, 1, 2), errors.NOT_LEADER_OR_FOLLOWER),
        (req(()), view(0, 1, 2), errors.INVALID_REQUEST),
        (req((1, 2)), view(0, 1, 2), errors.INVALID_REQUEST),
        (req((0, 5)), view(0, 1, 2, 5), errors.INVALID_REQUEST),
        (req((0, 1, 1)), view(0, 1, 2), errors.INVALID_REQUEST),
        (req((0, 1, 2)), view(0, 1), errors.INELIGIBLE_REPLICA),
        (req((0, 1, 2), epochs={2: 99}), view(0, 1, 2), errors.INELIGIBLE_REPLICA),
        (req((0, 1, 2)), view(0, 1, 2, shutting_down=(2,)), errors.INELIGIBLE_REPLICA),
    ],
)
def test_alter_partition_rejections(request_, brokers, code):
    r = reg(isr=(0, 1))
    res = ctl.alter_partition(r, request_, brokers, min_isr=2)
    assert res.error == code
    assert res.registration is r


def test_stale_proposal_after_controller_change_is_refused():
    r = reg(isr=(0, 1, 2))
    proposal = req((0, 1, 2))
    fenced = ctl.fence_broker(r, 2, view(0, 1), min_isr=2).registration
    res = ctl.alter_partition(fenced, proposal, view(0, 1, 2), min_isr=2)
    assert res.error == errors.INVALID_UPDATE_VERSION


# --- preferred leaders -------------------------------------------------------------------------


def test_preferred_leader_election():
    r = reg(leader=1)
    new = ctl.preferred_leader_election(r, view(0, 1, 2))
    assert new.leader == 0 and new.leader_epoch == 4
    assert ctl.preferred_leader_election(reg(), view(0, 1, 2)) is None
    assert ctl.preferred_leader_election(reg(leader=1, isr=(1, 2)), view(0, 1, 2)) is None
    assert ctl.preferred_leader_election(r, view(1, 2)) is None


def test_rebalance_plan_uses_imbalance_ratio():
    parts = {
        ("t", 0): reg(replicas=(0, 1, 2), leader=1),
        ("t", 1): reg(replicas=(1, 2, 0), leader=1),
        ("t", 2): reg(replicas=(2, 0, 1), leader=2),
        ("t", 3): reg(replicas=(0, 2, 1), leader=0),
    }
    assert ctl.plan_preferred_rebalance(parts, view(0, 1, 2)) == [("t", 0)]
    assert ctl.plan_preferred_rebalance(parts, view(0, 1, 2), imbalance_percentage=50) == []
    assert ctl.plan_preferred_rebalance(parts, view(1, 2)) == []


# --- reassignment ------------------------------------------------------------------------------


def test_move_replicas_add_wait_then_remove():
    r = reg(replicas=(0, 1, 2), isr=(0, 1, 2), leader=0)
    r = ctl.start_reassignment(r, (3, 4, 1))
    assert r.replicas == (3, 4, 1, 0, 2)
    assert r.adding_replicas == (3, 4) and r.removing_replicas == (0, 2)
    brokers = view(0, 1, 2, 3, 4)
    assert ctl.maybe_complete_reassignment(r, brokers) is None
    res = ctl.alter_partition(r, req((0, 1, 2, 3), pe=r.partition_epoch), brokers, min_isr=2)
    assert res.registration.adding_replicas == (3, 4)  # 4 not in the ISR yet
    r = res.registration
    res = ctl.alter_partition(r, req((0, 1, 2, 3, 4), pe=r.partition_epoch), brokers, min_isr=2)
    done = res.registration
    assert done.replicas == (3, 4, 1) and not done.reassigning
    assert done.isr == (3, 4, 1)
    assert done.leader == 3 and done.leader_epoch == 4  # the old leader was removed


def test_add_and_remove_replicas_and_cancel():
    r = reg(replicas=(0, 1), isr=(0, 1))
    grown = ctl.start_reassignment(r, (0, 1, 2))
    assert grown.adding_replicas == (2,) and grown.removing_replicas == ()
    back = ctl.cancel_reassignment(grown)
    assert back.replicas == (0, 1) and not back.reassigning
    shrunk = ctl.start_reassignment(r, (0,))
    done = ctl.maybe_complete_reassignment(shrunk, view(0, 1))
    assert done.replicas == (0,) and done.isr == (0,) and done.leader == 0
    with pytest.raises(ValueError):
        ctl.start_reassignment(r, ())


def test_partition_increase_placement_balances_leaders():
    existing = [(0, 1, 2), (1, 2, 0)]
    new = ctl.place_partition_increase(existing, [0, 1, 2], 4)
    assert [p[0] for p in new[:1]] == [2]
    assert all(len(set(p)) == 3 for p in new)
    leaders = [p[0] for p in existing + new]
    assert max(leaders.count(b) for b in (0, 1, 2)) - min(leaders.count(b) for b in (0, 1, 2)) <= 1
    with pytest.raises(ValueError):
        ctl.place_partition_increase(existing, [0, 1], 1)


# --- controlled shutdown -----------------------------------------------------------------------


def test_controlled_shutdown_moves_leadership_first():
    parts = {
        "a": reg(leader=0),
        "b": reg(replicas=(1, 0, 2), leader=1),
        "c": reg(replicas=(0, 1), isr=(0,), leader=0),
        "d": reg(replicas=(3, 4), isr=(3, 4), leader=3),
    }
    plan = ctl.controlled_shutdown(parts, 0, view(0, 1, 2, 3, 4, shutting_down=(0,)), min_isr=2)
    assert plan.changes["a"].leader == 1 and plan.changes["a"].isr == (1, 2)
    assert plan.changes["b"].leader == 1 and plan.changes["b"].isr == (1, 2)
    assert plan.stuck == ["c"]
    assert "d" not in plan.changes
