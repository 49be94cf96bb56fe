"""The classic group protocol's pure state machine (``brokernodes.groups.classic``): every
transition, the deadlines, fencing, static membership, hostile inputs, and the
``__consumer_offsets`` record round trip."""

from __future__ import annotations

import itertools

import pytest

from brokernodes.groups import consumer_protocol as cp
from brokernodes.groups.classic import (
    ClassicConfig,
    ClassicGroup,
    ClassicGroupError,
    ClassicState,
    JoinResponse,
    Parked,
    SyncResponse,
)
from brokernodes.groups.records import group_records, load_records, record_diff
from brokernodes.groups.types import TopicPartition

DELAY = 300
SESSION = 10_000
REBALANCE = 30_000
J = 2 * DELAY  # when the initial join phase is over


def make_group(**config) -> ClassicGroup:
    counter = itertools.count(1)
    cfg = ClassicConfig(initial_rebalance_delay_ms=DELAY, **config)
    return ClassicGroup("g", cfg, member_id_factory=lambda prefix: f"{prefix}-{next(counter)}")


def sub(*topics: str) -> bytes:
    return cp.encode_subscription(list(topics))


def join(group, now, member_id="", *, protocols=None, instance_id=None, client="c", v4=True, **kw):
    return group.join(
        now,
        member_id=member_id,
        protocol_type=kw.pop("protocol_type", "consumer"),
        protocols=protocols if protocols is not None else [("range", sub("t"))],
        session_timeout_ms=kw.pop("session_timeout_ms", SESSION),
        rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", REBALANCE),
        instance_id=instance_id,
        client_id=client,
        client_host="/127.0.0.1",
        require_known_member_id=v4,
        **kw,
    )


def answers(group) -> dict[tuple[str, str], JoinResponse | SyncResponse]:
    return {(mid, kind): r for mid, kind, r in group.drain()}


def code(fn, *args, **kwargs) -> str:
    with pytest.raises(ClassicGroupError) as info:
        fn(*args, **kwargs)
    return info.value.error_code


def new_member(group, now, **kw) -> str:
    """MEMBER_ID_REQUIRED then the rejoin; returns the member id (its join parks)."""
    first = join(group, now, **kw)
    assert isinstance(first, JoinResponse) and first.error == "MEMBER_ID_REQUIRED"
    assert isinstance(join(group, now, first.member_id, **kw), Parked)
    return first.member_id


def finish_join(group, now: int = 0) -> None:
    """Run the initial delay out (extended once for members that joined during it)."""
    group.expire(now + DELAY)
    group.expire(now + 2 * DELAY)


def stable_group(n: int = 2, now: int = 0):
    """A group of ``n`` members in generation 1, Stable, leader assigned ``t-<i>`` to each."""
    g = make_group()
    ids = [new_member(g, now, client=f"c{i}") for i in range(n)]
    finish_join(g, now)
    joined = answers(g)
    assert all(joined[(m, "join")].generation_id == 1 for m in ids)
    leader = g.leader_id
    assignments = [(m, cp.encode_assignment([TopicPartition("t", i)])) for i, m in enumerate(ids)]
    for m in ids:
        if m != leader:
            assert isinstance(g.sync(now + J, member_id=m, generation_id=1), Parked)
    assert isinstance(
        g.sync(now + J, member_id=leader, generation_id=1, assignments=assignments), Parked
    )
    synced = answers(g)
    assert {k[0] for k in synced} == set(ids)
    assert g.state is ClassicState.STABLE
    return g, ids


# --- joining ---------------------------------------------------------------------------


def test_v4_join_without_member_id_is_told_its_id_and_stays_out_of_the_group():
    g = make_group()
    r = join(g, 0)
    assert r.error == "MEMBER_ID_REQUIRED" and r.member_id.startswith("c-")
    assert g.state is ClassicState.EMPTY and not g.members and r.member_id in g.pending_members
    assert not g.is_empty  # a pending member keeps the group


def test_v3_join_without_member_id_joins_at_once():
    g = make_group()
    r = join(g, 0, v4=False)
    assert isinstance(r, Parked) and r.member_id in g.members
    assert g.state is ClassicState.PREPARING_REBALANCE


def test_initial_delay_collects_members_and_extends_per_new_member():
    g = make_group()
    a = new_member(g, 0, client="a")
    assert g.next_deadline_ms() <= DELAY
    g.expire(DELAY - 1)
    assert g.state is ClassicState.PREPARING_REBALANCE and not g.drain()
    b = new_member(g, 200, client="b")  # a new member during the delay: wait once more
    g.expire(DELAY)
    assert g.state is ClassicState.PREPARING_REBALANCE
    g.expire(2 * DELAY)
    got = answers(g)
    assert g.state is ClassicState.COMPLETING_REBALANCE and g.generation == 1
    leader = got[(a, "join")]
    assert leader.leader == a and leader.protocol_name == "range"
    assert [m[0] for m in leader.members] == [a, b] and leader.members[1][2] == sub("t")
    assert got[(b, "join")].members == [] and got[(b, "join")].leader == a


def test_initial_delay_is_capped_by_the_rebalance_timeout():
    g = make_group()
    new_member(g, 0, rebalance_timeout_ms=500)
    for t in range(100, 500, 100):
        new_member(g, t, rebalance_timeout_ms=500, client=f"x{t}")
        g.expire(t)
    g.expire(500)
    assert g.state is ClassicState.COMPLETING_REBALANCE


def test_protocol_selection_prefers_what_members_list_first_among_common():
    g = make_group()
    a = new_member(g, 0, protocols=[("cooperative-sticky", b"1"), ("range", b"2")])
    new_member(g, 0, protocols=[("range", b"3"), ("cooperative-sticky", b"4"), ("x", b"")])
    new_member(g, 0, protocols=[("cooperative-sticky", b"5"), ("range", b"6")])
    finish_join(g)
    got = answers(g)
    assert g.protocol_name == "cooperative-sticky"
    assert [m[2] for m in got[(a, "join")].members] == [b"1", b"4", b"5"]


def test_inconsistent_protocols_are_refused():
    g = make_group()
    new_member(g, 0, protocols=[("range", b"")])
    assert code(join, g, 0, protocols=[("roundrobin", b"")]) == "INCONSISTENT_GROUP_PROTOCOL"
    assert code(join, g, 0, protocol_type="connect") == "INCONSISTENT_GROUP_PROTOCOL"
    assert code(join, make_group(), 0, protocols=[]) == "INCONSISTENT_GROUP_PROTOCOL"
    assert code(join, make_group(), 0, protocol_type="") == "INCONSISTENT_GROUP_PROTOCOL"


def test_session_timeout_bounds():
    assert code(join, make_group(), 0, session_timeout_ms=10) == "INVALID_SESSION_TIMEOUT"
    too_long = 10**9
    assert code(join, make_group(), 0, session_timeout_ms=too_long) == "INVALID_SESSION_TIMEOUT"


def test_v0_join_uses_the_session_timeout_as_rebalance_timeout():
    g = make_group()
    r = join(g, 0, v4=False, rebalance_timeout_ms=-1)
    assert g.members[r.member_id].rebalance_timeout_ms == SESSION


def test_unknown_member_and_dead_group():
    g = make_group()
    assert code(join, g, 0, "nobody") == "UNKNOWN_MEMBER_ID"
    g.mark_dead()
    assert code(join, g, 0) == "COORDINATOR_NOT_AVAILABLE"


def test_rejoin_in_completing_rebalance_with_same_protocols_gets_the_same_answer():
    g = make_group()
    a = new_member(g, 0)
    finish_join(g)
    first = answers(g)[(a, "join")]
    again = join(g, J + 1, a)
    assert isinstance(again, JoinResponse) and again.generation_id == first.generation_id
    assert again.members == first.members and g.state is ClassicState.COMPLETING_REBALANCE


def test_rejoin_in_completing_rebalance_with_new_protocols_rebalances():
    g = make_group()
    a = new_member(g, 0)
    b = new_member(g, 0)
    finish_join(g)
    g.drain()
    assert isinstance(g.sync(J, member_id=b, generation_id=1), Parked)
    assert isinstance(join(g, J, a, protocols=[("range", sub("t", "u"))]), Parked)
    got = answers(g)
    assert got[(b, "sync")].error == "REBALANCE_IN_PROGRESS"
    assert g.state is ClassicState.PREPARING_REBALANCE


def test_follower_rejoin_in_stable_without_change_returns_the_generation():
    g, (a, b) = stable_group()
    follower = b if g.leader_id == a else a
    r = join(g, 1000, follower)
    assert isinstance(r, JoinResponse) and r.generation_id == 1 and r.members == []
    assert g.state is ClassicState.STABLE


def test_leader_rejoin_in_stable_rebalances_and_completes_when_all_rejoin():
    g, ids = stable_group()
    leader = g.leader_id
    assert isinstance(join(g, 1000, leader), Parked)
    assert g.state is ClassicState.PREPARING_REBALANCE
    other = next(m for m in ids if m != leader)
    with pytest.raises(ClassicGroupError) as e:
        g.heartbeat(1000, member_id=other, generation_id=1)
    assert e.value.error_code == "REBALANCE_IN_PROGRESS"
    assert isinstance(join(g, 1001, other), Parked)  # everyone is in: no waiting
    got = answers(g)
    assert g.state is ClassicState.COMPLETING_REBALANCE and g.generation == 2
    assert got[(leader, "join")].members and got[(other, "join")].generation_id == 2


def test_members_not_rejoining_are_dropped_at_the_rebalance_timeout():
    g, _ids = stable_group(3)
    leader = g.leader_id
    join(g, 1000, leader)
    assert g.next_deadline_ms() <= 1000 + REBALANCE
    g.expire(1000 + REBALANCE)
    got = answers(g)
    assert set(g.members) == {leader} and got[(leader, "join")].generation_id == 2
    assert len(got[(leader, "join")].members) == 1


def test_group_max_size():
    g = make_group(max_size=2)
    new_member(g, 0)
    new_member(g, 0)
    assert code(join, g, 0) == "GROUP_MAX_SIZE_REACHED"


def test_hostile_inputs_huge_metadata_and_too_many_protocols():
    g = make_group(max_metadata_bytes=1000)
    assert code(join, g, 0, protocols=[("range", b"x" * 1001)]) == "INVALID_REQUEST"
    many = [(f"p{i}", b"") for i in range(100)]
    assert code(join, g, 0, protocols=many) == "INVALID_REQUEST"
    # duplicates keep the first, garbage metadata is opaque (describe copes)
    r = join(g, 0, v4=False, protocols=[("range", b"\xff\x00"), ("range", b"2")])
    assert g.members[r.member_id].protocols == (("range", b"\xff\x00"),)
    assert g.describe()["members"][0]["subscriptions"] == []


# --- syncing ---------------------------------------------------------------------------


def test_sync_followers_wait_for_the_leader_and_get_their_bytes():
    g, ids = stable_group(3)
    for i, m in enumerate(ids):
        assert cp.assigned_partitions(g.members[m].assignment) == [TopicPartition("t", i)]
    r = g.sync(2000, member_id=ids[1], generation_id=1)  # a late sync in Stable: at once
    assert isinstance(r, SyncResponse) and r.protocol_name == "range"
    assert cp.assigned_partitions(r.assignment) == [TopicPartition("t", 1)]


def test_leader_assignment_for_unknown_members_is_ignored_and_missing_ones_get_nothing():
    g = make_group()
    a = new_member(g, 0)
    b = new_member(g, 0)
    finish_join(g)
    g.drain()
    leader = g.leader_id
    g.sync(J, member_id=leader, generation_id=1, assignments=[("ghost", b"x"), (leader, b"L")])
    got = answers(g)
    assert got[(leader, "sync")].assignment == b"L"
    follower = b if leader == a else a
    assert g.sync(J, member_id=follower, generation_id=1).assignment == b""


def test_sync_errors():
    g = make_group()
    a = new_member(g, 0)
    assert code(g.sync, 0, member_id=a, generation_id=0) == "REBALANCE_IN_PROGRESS"
    assert code(g.sync, 0, member_id="x", generation_id=0) == "UNKNOWN_MEMBER_ID"
    finish_join(g)
    assert code(g.sync, J, member_id=a, generation_id=0) == "ILLEGAL_GENERATION"
    assert (
        code(g.sync, J, member_id=a, generation_id=1, protocol_name="roundrobin")
        == "INCONSISTENT_GROUP_PROTOCOL"
    )
    assert (
        code(g.sync, J, member_id=a, generation_id=1, protocol_type="connect")
        == "INCONSISTENT_GROUP_PROTOCOL"
    )


def test_members_that_never_sync_are_removed_at_the_rebalance_timeout():
    g = make_group()
    a = new_member(g, 0)
    b = new_member(g, 0)
    finish_join(g)
    g.drain()
    leader = g.leader_id
    follower = b if leader == a else a
    g.sync(J, member_id=leader, generation_id=1, assignments=[])
    g.drain()
    later = J + REBALANCE - 1000
    g.heartbeat(later, member_id=follower, generation_id=1)  # alive, but never syncs
    g.heartbeat(later, member_id=leader, generation_id=1)
    removed = g.expire(J + REBALANCE)
    assert removed == [follower] and g.state is ClassicState.PREPARING_REBALANCE


# --- heartbeats, sessions, leaving -------------------------------------------------------


def test_heartbeat_answers_by_state():
    g, (a, b) = stable_group()
    g.heartbeat(1000, member_id=a, generation_id=1)
    assert code(g.heartbeat, 1000, member_id=a, generation_id=0) == "ILLEGAL_GENERATION"
    assert code(g.heartbeat, 1000, member_id="zz", generation_id=1) == "UNKNOWN_MEMBER_ID"
    g.leave(1000, [(b, None)])
    assert (
        code(g.heartbeat, 1000, member_id=a, generation_id=1) == "REBALANCE_IN_PROGRESS"
    )  # told to rejoin


def test_heartbeat_in_completing_rebalance_is_fine():
    g = make_group()
    a = new_member(g, 0)
    finish_join(g)
    g.heartbeat(J + 1, member_id=a, generation_id=1)


def test_session_expiry_removes_a_silent_member_and_rebalances():
    g, (a, b) = stable_group()
    g.heartbeat(SESSION - 1, member_id=a, generation_id=1)
    assert g.expire(J + SESSION) == [b]
    assert g.state is ClassicState.PREPARING_REBALANCE
    join(g, J + SESSION, a)
    got = answers(g)
    assert got[(a, "join")].generation_id == 2 and g.leader_id == a


def test_parked_members_do_not_expire_by_session():
    g = make_group()
    a = new_member(g, 0)
    b = new_member(g, 0)
    finish_join(g)
    g.drain()
    follower = b if g.leader_id == a else a
    assert isinstance(g.sync(J, member_id=follower, generation_id=1), Parked)
    g.heartbeat(J + SESSION - 100, member_id=g.leader_id, generation_id=1)
    # the follower waits in SyncGroup past its session: only the sync deadline applies
    assert g.expire(J + SESSION + 1) == []
    assert follower in g.members and g.members[follower].awaiting_sync


def test_pending_member_that_never_rejoins_expires():
    g = make_group()
    r = join(g, 0)
    assert g.expire(SESSION) == [r.member_id]
    assert g.is_empty


def test_last_member_leaving_empties_the_group_with_a_new_generation():
    g, (a, b) = stable_group()
    out = g.leave(1000, [(a, None), (b, None), ("ghost", None)])
    assert out == [(a, None, None), (b, None, None), ("ghost", None, "UNKNOWN_MEMBER_ID")]
    assert g.state is ClassicState.EMPTY and g.generation == 2 and g.is_empty
    assert g.protocol_type == "consumer"


def test_leave_of_a_member_parked_in_join_answers_it():
    g = make_group()
    a = new_member(g, 0)
    g.leave(10, [(a, None)])
    assert answers(g)[(a, "join")].error == "UNKNOWN_MEMBER_ID"
    assert g.state is ClassicState.PREPARING_REBALANCE
    finish_join(g)
    assert g.state is ClassicState.EMPTY


def test_leave_of_a_pending_member():
    g = make_group()
    r = join(g, 0)
    assert g.leave(0, [(r.member_id, None)]) == [(r.member_id, None, None)]
    assert g.is_empty


# --- static membership ---------------------------------------------------------------


def static_group():
    g = make_group()
    assert isinstance(join(g, 0, instance_id="i1", client="a"), Parked)  # no MEMBER_ID_REQUIRED
    assert isinstance(join(g, 0, instance_id="i2", client="b"), Parked)
    finish_join(g)
    g.drain()
    ids = list(g.members)
    leader = g.leader_id
    for m in ids:
        if m != leader:
            g.sync(J, member_id=m, generation_id=1)
    g.sync(J, member_id=leader, generation_id=1, assignments=[(m, m.encode()) for m in ids])
    g.drain()
    return g, ids


def test_static_member_restart_in_stable_keeps_the_generation_and_assignment():
    g, (m1, _m2) = static_group()
    follower_instance = "i2" if g.leader_id == m1 else "i1"
    old = g.static_members[follower_instance]
    r = join(g, 1000, instance_id=follower_instance)
    assert isinstance(r, JoinResponse) and r.error is None and r.generation_id == 1
    assert r.member_id != old and g.state is ClassicState.STABLE
    assert g.sync(1000, member_id=r.member_id, generation_id=1).assignment == old.encode()
    # the old incarnation is fenced
    assert code(g.heartbeat, 1000, member_id=old, generation_id=1) == "UNKNOWN_MEMBER_ID"
    assert (
        code(g.heartbeat, 1000, member_id=old, generation_id=1, instance_id=follower_instance)
        == "FENCED_INSTANCE_ID"
    )


def test_static_leader_restart_v9_skips_assignment_older_versions_see_old_leader():
    g, _ = static_group()
    leader_instance = next(i for i, m in g.static_members.items() if m == g.leader_id)
    old_leader = g.leader_id
    r = join(g, 1000, instance_id=leader_instance, supports_skip_assignment=True)
    assert r.skip_assignment and r.leader == r.member_id and len(r.members) == 2
    r2 = join(g, 1001, instance_id=leader_instance)
    assert not r2.skip_assignment and r2.leader == r.member_id != r2.member_id
    assert old_leader not in g.members and g.state is ClassicState.STABLE


def test_static_member_with_changed_protocol_rebalances():
    g, _ = static_group()
    r = join(g, 1000, instance_id="i1", protocols=[("range", b"new")])
    # still range: the selected protocol does not change, so no rebalance
    assert isinstance(r, JoinResponse)
    g2, _ = static_group()
    r = join(g2, 1000, instance_id="i1", protocols=[("roundrobin", b""), ("range", b"")])
    # the votes tie; the first member's order decides, so this may or may not rebalance
    assert isinstance(r, JoinResponse | Parked)


def test_static_restart_while_parked_fences_the_old_join():
    g = make_group()
    first = join(g, 0, instance_id="i1")
    again = join(g, 10, instance_id="i1")
    got = answers(g)
    assert got[(first.member_id, "join")].error == "FENCED_INSTANCE_ID"
    assert isinstance(again, Parked) and list(g.members) == [again.member_id]


def test_static_members_that_do_not_rejoin_stay_until_their_session_ends():
    g, (m1, m2) = static_group()
    leader = g.leader_id
    other = m2 if leader == m1 else m1
    join(g, 1000, leader)
    assert code(g.heartbeat, REBALANCE, member_id=other, generation_id=1) == "REBALANCE_IN_PROGRESS"
    g.expire(1000 + REBALANCE)
    assert other in g.members  # static: kept through the join
    assert answers(g)[(leader, "join")].generation_id == 2


def test_leave_by_instance_id_and_fencing():
    g, (m1, _m2) = static_group()
    assert g.leave(0, [("", "nope")]) == [("", "nope", "UNKNOWN_MEMBER_ID")]
    assert g.leave(0, [(m1, "i2")])[0][2] == "FENCED_INSTANCE_ID"
    assert g.leave(0, [("", "i1")])[0][2] is None
    assert m1 not in g.members and "i1" not in g.static_members


# --- commits ---------------------------------------------------------------------------


def test_offset_commit_rules():
    g = make_group()
    g.validate_offset_commit(None, -1)  # empty group: standalone commits
    a = new_member(g, 0)
    assert code(g.validate_offset_commit, None, -1) == "UNKNOWN_MEMBER_ID"
    g.validate_offset_commit(a, 0)  # preparing: a member at the current generation may commit
    finish_join(g)
    assert code(g.validate_offset_commit, a, 1) == "REBALANCE_IN_PROGRESS"
    assert code(g.validate_offset_commit, a, 0) == "ILLEGAL_GENERATION"
    g.sync(J, member_id=a, generation_id=1, assignments=[])
    g.validate_offset_commit(a, 1)
    assert code(g.validate_offset_commit, "zombie", 1) == "UNKNOWN_MEMBER_ID"


# --- describe and persistence -----------------------------------------------------------


def test_describe_decodes_the_consumer_protocol():
    g, ids = stable_group()
    d = g.describe()
    assert d["state"] == "stable" and d["group_epoch"] == 1 and d["assignor"] == "range"
    by_id = {m["member_id"]: m for m in d["members"]}
    assert by_id[ids[0]]["subscriptions"] == ["t"]
    assert by_id[ids[0]]["assignment"] == [["t", 0]]
    assert by_id[ids[1]]["client_id"] == "c1" and by_id[ids[1]]["client_host"] == "/127.0.0.1"
    assert g.subscribed_topics() == frozenset({"t"})


def test_only_completed_generations_are_persisted_and_reload():
    g = make_group()
    new_member(g, 0)
    assert group_records(g) == {}  # nothing before the first generation completes
    g, ids = stable_group()
    snap = group_records(g)
    assert len(snap) == 1
    join(g, 1000, g.leader_id)  # a rebalance in progress does not change the record
    assert group_records(g) == snap
    state = load_records(list(snap.items()), 5000)
    loaded = state.groups["g"]
    assert isinstance(loaded, ClassicGroup) and loaded.state is ClassicState.STABLE
    assert loaded.generation == 1 and list(loaded.members) == ids
    for m in ids:
        assert loaded.members[m].assignment == g.members[m].assignment
        assert loaded.members[m].session_deadline_ms == 5000 + SESSION
    # members carry on after the failover
    loaded.heartbeat(6000, member_id=ids[0], generation_id=1)
    assert loaded.sync(6000, member_id=ids[1], generation_id=1).assignment


def test_an_emptied_group_persists_empty_and_a_conversion_tombstones_the_other_kind():
    g, (a, b) = stable_group()
    before = group_records(g)
    g.leave(0, [(a, None), (b, None)])
    after = group_records(g)
    state = load_records(list(after.items()), 0)
    assert state.groups["g"].state is ClassicState.EMPTY and state.groups["g"].generation == 2
    assert [k for k, _ in record_diff(before, after)] == list(after)
    from brokernodes.groups import ConsumerGroup

    diff = record_diff(after, group_records(ConsumerGroup("g")))
    assert (next(iter(after)), None) in diff


def test_consumer_protocol_round_trip_and_truncation():
    tps = [TopicPartition("a", 1), TopicPartition("b", 0), TopicPartition("a", 0)]
    assert cp.decode_assignment(cp.encode_assignment(tps)).partitions == tuple(sorted(tps))
    for version in range(4):
        s = cp.decode_subscription(cp.encode_subscription(["y", "x"], tps, version=version))
        assert s.topics == ("x", "y") and s.version == version
    data = cp.encode_subscription(["x"])
    for cut in range(len(data) - 1):
        with pytest.raises(ValueError):
            cp.decode_subscription(data[:cut])
    assert cp.subscribed_topics(b"\x00\x00\x7f\xff\xff\xff") == frozenset()
    assert cp.assigned_partitions(b"") == []
