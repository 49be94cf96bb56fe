"""The ConsumerGroup state machine: joins, incremental revocation, fencing, session timeouts,
static membership, leave, metadata changes and commit validation."""

from __future__ import annotations

import itertools

import pytest

from brokernodes.groups import (
    ConsumerGroup,
    FencedMemberEpochError,
    GroupState,
    InvalidGroupRequestError,
    MemberState,
    NonEmptyGroupError,
    StaleMemberEpochError,
    TopicPartition,
    UnknownMemberIdError,
    UnsupportedAssignorError,
)

TP = TopicPartition
SESSION = 10_000


def new_group(partitions: int = 6, **kw) -> ConsumerGroup:
    ids = (f"m{i}" for i in itertools.count(1))
    return ConsumerGroup(
        "g",
        session_timeout_ms=SESSION,
        rebalance_timeout_ms=30_000,
        partition_counts={"t": partitions},
        member_id_factory=lambda: next(ids),
        **kw,
    )


def settle(group: ConsumerGroup, now: int, owned: dict[str, frozenset] | None = None) -> dict:
    """Heartbeat every (non-left) member until nothing changes; members revoke at once.
    Returns member id -> owned partitions."""
    owned = dict(owned or {m: group.members[m].assigned for m in group.members})
    epochs = {m: group.members[m].member_epoch for m in group.members}
    for _ in range(10):
        for mid in sorted(group.members):
            if group.members[mid].left:
                continue
            r = group.heartbeat(mid, epochs[mid], now, owned=owned.get(mid, frozenset()))
            epochs[mid], owned[mid] = r.member_epoch, r.assignment
        if group.state is GroupState.STABLE:
            return owned
    raise AssertionError("did not settle")


def test_first_member_gets_everything_at_once():
    g = new_group()
    r = g.heartbeat(None, 0, 0, subscriptions=["t"])
    assert r.member_id == "m1" and r.member_epoch == 1 == g.group_epoch
    assert r.assignment == {TP("t", p) for p in range(6)} and not r.revoking
    assert g.state is GroupState.STABLE


def test_join_revokes_incrementally_and_never_double_assigns():
    g = new_group()
    a = g.heartbeat(None, 0, 0, subscriptions=["t"])
    b = g.heartbeat(None, 0, 1, subscriptions=["t"])
    # b's target partitions are still owned by a: b waits, with the new epoch.
    assert b.member_epoch == 2 and b.assignment == frozenset() and len(b.pending) == 3
    assert g.members["m2"].state is MemberState.UNRELEASED_PARTITIONS
    # a is asked to revoke 3; it keeps consuming the other 3 (no stop-the-world).
    ra = g.heartbeat("m1", a.member_epoch, 2, owned=a.assignment)
    assert len(ra.assignment) == 3 and len(ra.revoking) == 3 and ra.member_epoch == 1
    assert g.state is GroupState.RECONCILING
    # b heartbeats before a released: still nothing.
    assert g.heartbeat("m2", 2, 3, owned=[]).assignment == frozenset()
    # a reports it no longer owns them: released, a moves to epoch 2.
    ra2 = g.heartbeat("m1", 1, 4, owned=ra.assignment)
    assert ra2.member_epoch == 2 and not ra2.revoking and ra2.assignment == ra.assignment
    rb = g.heartbeat("m2", 2, 5, owned=[])
    assert rb.assignment == ra.revoking
    assert g.state is GroupState.STABLE


def test_revocation_waits_while_the_member_still_owns_the_partitions():
    g = new_group()
    a = g.heartbeat(None, 0, 0, subscriptions=["t"])
    g.heartbeat(None, 0, 1, subscriptions=["t"])
    r = g.heartbeat("m1", 1, 2, owned=a.assignment)
    for owned in (None, a.assignment):  # not reported / still owned
        again = g.heartbeat("m1", 1, 3, owned=owned)
        assert again.revoking == r.revoking and again.member_epoch == 1


def test_a_member_that_never_revokes_is_fenced_after_the_rebalance_timeout():
    g = new_group()
    a = g.heartbeat(None, 0, 0, subscriptions=["t"])
    g.heartbeat(None, 0, 1, subscriptions=["t"])
    g.heartbeat("m1", 1, 2, owned=a.assignment)
    for now in range(5_000, 30_000, 5_000):
        g.heartbeat("m1", 1, now, owned=a.assignment)
        g.heartbeat("m2", 2, now, owned=[])
    assert g.expire(32_000) == ["m1"]
    assert g.heartbeat("m2", 2, 32_001, owned=[]).assignment == {TP("t", p) for p in range(6)}


def test_session_timeout_fences_and_frees_partitions():
    g = new_group()
    g.heartbeat(None, 0, 0, subscriptions=["t"])
    g.heartbeat(None, 0, 0, subscriptions=["t"])
    settle(g, 0)
    assert g.expire(SESSION - 1) == []
    g.heartbeat("m2", g.members["m2"].member_epoch, 5_000, owned=g.members["m2"].assigned)
    assert g.expire(SESSION) == ["m1"]
    assert g.next_deadline_ms() == 5_000 + SESSION
    with pytest.raises(UnknownMemberIdError):
        g.heartbeat("m1", 2, SESSION + 1, owned=[])
    r = g.heartbeat("m2", g.members["m2"].member_epoch, SESSION + 1, owned=[])
    assert len(r.assignment) == 6


def test_epoch_fencing():
    g = new_group()
    for _ in range(3):
        g.heartbeat(None, 0, 0, subscriptions=["t"])
    owned = settle(g, 0)
    epoch, prev = g.members["m1"].member_epoch, g.members["m1"].previous_member_epoch
    older = next(e for e in range(1, epoch) if e != prev)
    with pytest.raises(FencedMemberEpochError):
        g.heartbeat("m1", epoch + 1, 1, owned=owned["m1"])
    # The previous epoch is fine for a member that missed our answer, owning a subset...
    assert g.heartbeat("m1", prev, 1, owned=owned["m1"]).member_epoch == epoch
    # ...but not when it claims partitions it no longer has, nor any other older epoch.
    with pytest.raises(FencedMemberEpochError):
        g.heartbeat("m1", prev, 1, owned=owned["m2"])
    with pytest.raises(FencedMemberEpochError):
        g.heartbeat("m1", older, 1, owned=owned["m1"])
    with pytest.raises(InvalidGroupRequestError):
        g.heartbeat("m1", -3, 1)
    with pytest.raises(UnknownMemberIdError):
        g.heartbeat("nobody", 1, 1)


def test_fenced_member_rejoins_with_epoch_zero_and_releases_everything():
    g = new_group()
    g.heartbeat(None, 0, 0, subscriptions=["t"])
    epoch_before = g.group_epoch
    r = g.heartbeat("m1", 0, 1, subscriptions=["t"])
    assert r.member_id == "m1" and len(r.assignment) == 6 and g.group_epoch == epoch_before


def test_leave_rebalances_to_the_rest():
    g = new_group()
    g.heartbeat(None, 0, 0, subscriptions=["t"])
    g.heartbeat(None, 0, 0, subscriptions=["t"])
    settle(g, 0)
    r = g.leave("m1", 1)
    assert r.member_epoch == -1 and "m1" not in g.members
    assert len(settle(g, 2)["m2"]) == 6
    with pytest.raises(UnknownMemberIdError):
        g.leave("m1", 3)


def test_static_member_restart_within_the_session_keeps_id_and_assignment():
    g = new_group()
    g.heartbeat(None, 0, 0, subscriptions=["t"], instance_id="host-a")
    g.heartbeat(None, 0, 0, subscriptions=["t"], instance_id="host-b")
    owned = settle(g, 0)
    epoch, snapshot = g.group_epoch, {m: g.members[m].assigned for m in g.members}
    g.leave("m1", 100, static=True)
    assert g.group_epoch == epoch and g.members["m1"].left
    # The other member is unaffected while host-a is away.
    assert (
        g.heartbeat("m2", g.members["m2"].member_epoch, 200, owned=owned["m2"]).assignment
        == (owned["m2"])
    )
    with pytest.raises(FencedMemberEpochError):
        g.heartbeat("m1", epoch, 300, owned=owned["m1"])
    r = g.heartbeat(None, 0, SESSION - 1, subscriptions=["t"], instance_id="host-a")
    assert r.member_id == "m1" and r.assignment == snapshot["m1"]
    assert g.group_epoch == epoch and g.state is GroupState.STABLE


def test_static_member_that_stays_away_is_removed_after_the_session():
    g = new_group()
    g.heartbeat(None, 0, 0, subscriptions=["t"], instance_id="host-a")
    g.heartbeat(None, 0, 0, subscriptions=["t"], instance_id="host-b")
    settle(g, 0)
    g.leave("m1", 100, static=True)
    g.heartbeat("m2", g.members["m2"].member_epoch, 9_000, owned=g.members["m2"].assigned)
    assert g.expire(100 + SESSION - 1) == []  # the session restarts at the leave
    assert g.expire(100 + SESSION) == ["m1"]
    assert len(settle(g, 100 + SESSION)["m2"]) == 6


def test_static_member_crash_restart_takes_over_with_a_new_id_fencing_the_zombie():
    g = new_group()
    g.heartbeat(None, 0, 0, subscriptions=["t"], instance_id="host-a")
    g.heartbeat(None, 0, 0, subscriptions=["t"], instance_id="host-b")
    settle(g, 0)
    epoch, old = g.group_epoch, g.members["m1"]
    r = g.heartbeat(None, 0, 50, subscriptions=["t"], instance_id="host-a")
    assert r.member_id == "m3" and r.assignment == old.assigned and g.group_epoch == epoch
    with pytest.raises(UnknownMemberIdError):
        g.heartbeat("m1", old.member_epoch, 60, owned=old.assigned)
    with pytest.raises(UnknownMemberIdError):
        g.validate_offset_commit("m1", old.member_epoch)
    assert {tp: m for tp, m in g.owners.items() if m == "m3"}.keys() == old.assigned


def test_subscription_and_metadata_changes_bump_the_group_epoch():
    g = new_group(partitions=2)
    g.heartbeat(None, 0, 0, subscriptions=["t"])
    assert g.update_metadata({"t": 2, "u": 3}) is False
    assert g.update_metadata({"t": 4, "u": 3}) is True and g.group_epoch == 2
    r = g.heartbeat("m1", 1, 1, subscriptions=["t", "u"], owned=[TP("t", 0), TP("t", 1)])
    assert g.group_epoch == 3 and r.member_epoch == 3 and len(r.assignment) == 7
    r = g.heartbeat("m1", 3, 2, subscriptions=["u"], owned=r.assignment)
    assert r.revoking == {TP("t", p) for p in range(4)} and r.member_epoch == 3
    r = g.heartbeat("m1", 3, 3, owned=r.assignment)
    assert r.member_epoch == 4 and r.assignment == {TP("u", p) for p in range(3)}
    # A topic deleted from the metadata is revoked too.
    g.update_metadata({})
    r = g.heartbeat("m1", 4, 4, owned=r.assignment)
    assert r.revoking == {TP("u", p) for p in range(3)}


def test_join_needs_subscriptions_and_assignor_must_exist():
    g = new_group()
    with pytest.raises(InvalidGroupRequestError):
        g.heartbeat(None, 0, 0)
    with pytest.raises(InvalidGroupRequestError):
        g.heartbeat(None, 0, 0, subscriptions="t")
    with pytest.raises(UnsupportedAssignorError):
        ConsumerGroup("g", assignor="nope")


def test_client_generated_member_id_is_kept():
    g = new_group()
    assert g.heartbeat("client-uuid", 0, 0, subscriptions=["t"]).member_id == "client-uuid"


def test_commit_validation_refuses_zombies():
    g = new_group()
    g.heartbeat(None, 0, 0, subscriptions=["t"])
    g.validate_offset_commit("m1", 1)
    with pytest.raises(StaleMemberEpochError):
        g.validate_offset_commit("m1", 0)
    with pytest.raises(UnknownMemberIdError):
        g.validate_offset_commit("ghost", 1)
    with pytest.raises(NonEmptyGroupError):
        g.validate_offset_commit(None, -1)
    g.leave("m1", 1)
    g.validate_offset_commit(None, -1)  # admin commit on an empty group


def test_describe_is_json_friendly():
    g = new_group(assignor="range")
    g.heartbeat(None, 0, 0, subscriptions=["t"])
    d = g.describe()
    assert d["state"] == "stable" and d["assignor"] == "range"
    assert d["members"][0]["assignment"] == [["t", p] for p in range(6)]


def test_member_ids_cannot_be_hijacked():
    g = new_group()
    g.heartbeat(None, 0, 0, subscriptions=["t"], instance_id="host-a")
    g.heartbeat(None, 0, 0, subscriptions=["t"], instance_id="host-b")
    with pytest.raises(InvalidGroupRequestError):  # host-a restarting under host-b's id
        g.heartbeat("m2", 0, 1, subscriptions=["t"], instance_id="host-a")
    with pytest.raises(InvalidGroupRequestError):  # a dynamic member claiming a static id
        g.heartbeat("m1", 0, 1, subscriptions=["t"])
    assert set(g.members) == {"m1", "m2"}


def test_has_news_tells_what_a_waiting_heartbeat_waits_for():
    g = new_group()
    a = g.heartbeat(None, 0, 0, subscriptions=["t"])
    # a holds exactly its assignment: a heartbeat now would tell it nothing new
    assert not g.has_news("m1", a.member_epoch, a.assignment)
    # ... but one reporting less than it was given would be answered with more
    assert g.has_news("m1", a.member_epoch, frozenset())
    b = g.heartbeat(None, 0, 1, subscriptions=["t"])
    # a join: a must revoke half; b waits for them (nothing to take yet, no news for b)
    assert g.has_news("m1", a.member_epoch, a.assignment)
    assert not g.has_news("m2", b.member_epoch, frozenset())
    ra = g.heartbeat("m1", a.member_epoch, 2, owned=a.assignment)
    assert ra.revoking
    # still owning what it revokes: nothing new until it lets go
    assert not g.has_news("m1", ra.member_epoch, a.assignment)
    ra2 = g.heartbeat("m1", ra.member_epoch, 3, owned=ra.assignment)
    # released: b's pending partitions are free, a news for b (not for a, settled)
    assert g.has_news("m2", b.member_epoch, frozenset())
    assert not g.has_news("m1", ra2.member_epoch, ra2.assignment)
    rb = g.heartbeat("m2", b.member_epoch, 4, owned=[])
    assert not g.has_news("m2", rb.member_epoch, rb.assignment)
    assert g.state is GroupState.STABLE
    # a stale epoch, a member that left or is unknown: news (the answer is an error)
    assert g.has_news("m2", rb.member_epoch - 1, rb.assignment)
    g.heartbeat("m2", rb.member_epoch, 5, owned=rb.assignment)
    g.leave("m2", 6)
    assert g.has_news("m2", rb.member_epoch, rb.assignment)
    assert g.has_news("nobody", 1, frozenset())
    # the leave bumped the group epoch: a must move to it (a new epoch is news)
    assert g.has_news("m1", ra2.member_epoch, ra2.assignment)


def test_a_heartbeat_answered_again_leaves_the_session_deadline():
    g = new_group()
    a = g.heartbeat(None, 0, 0, subscriptions=["t"])
    g.heartbeat("m1", a.member_epoch, 1_000, owned=a.assignment, renew_session=False)
    assert g.members["m1"].session_deadline_ms == SESSION
    g.heartbeat("m1", a.member_epoch, 1_000, owned=a.assignment)
    assert g.members["m1"].session_deadline_ms == 1_000 + SESSION
