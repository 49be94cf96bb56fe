"""Randomised simulation of a group: members join, leave, crash, restart (static members)
and heartbeat in random orders, revoking late or at once, while the clock moves.

After every step: no partition is held by two members in the coordinator, and no two live
consumers are consuming the same partition; commits pass only for a member at its current
epoch. After ``settle``: every subscribed partition is owned by exactly one live member and
the ownership equals the target assignment.
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from brokernodes.groups import (
    ConsumerGroup,
    FencedMemberEpochError,
    GroupState,
    StaleMemberEpochError,
    TopicPartition,
    UnknownMemberIdError,
)

SESSION = 10_000
COUNTS = {"a": 4, "b": 3}
SUBSCRIPTIONS = [frozenset({"a"}), frozenset({"b"}), frozenset({"a", "b"})]


@dataclass
class Client:
    """A simulated consumer: what it believes and what it is consuming."""

    subscriptions: frozenset[str]
    instance_id: str | None
    member_id: str | None = None
    epoch: int = 0
    consuming: set[TopicPartition] = field(default_factory=set)
    revoking: frozenset[TopicPartition] = frozenset()
    last_ok_ms: int = 0
    alive: bool = True
    left: bool = False

    def lose_everything(self) -> None:
        self.consuming = set()
        self.revoking = frozenset()


class GroupSimulation(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.group = ConsumerGroup("unused")
        self.clients: list[Client] = []
        self.now = 0
        self.instances = itertools.count()

    @initialize(assignor=st.sampled_from(["uniform", "uniform", "range", "round-robin"]))
    def start(self, assignor):
        ids = (f"member-{i}" for i in itertools.count())
        self.group = ConsumerGroup(
            "g",
            assignor=assignor,
            session_timeout_ms=SESSION,
            rebalance_timeout_ms=10**9,
            partition_counts=dict(COUNTS),
            member_id_factory=lambda: next(ids),
        )

    # --- one client's heartbeat --------------------------------------------------------

    def beat(self, c: Client, release: bool, lost: bool = False) -> None:
        """One heartbeat; with ``lost`` the coordinator handles it but the answer never
        reaches the client (it then retries with what it had)."""
        if release:
            c.consuming -= c.revoking
        try:
            r = self.group.heartbeat(
                c.member_id,
                c.epoch,
                self.now,
                subscriptions=c.subscriptions,
                owned=frozenset(c.consuming) if c.epoch else None,
                instance_id=c.instance_id,
            )
        except UnknownMemberIdError:
            c.lose_everything()  # fenced for good: rejoin as a new member
            c.member_id, c.epoch = None, 0
            return
        except FencedMemberEpochError:
            c.lose_everything()  # rejoin with the same id, epoch 0
            c.epoch = 0
            return
        if lost:
            return
        c.member_id, c.epoch, c.last_ok_ms = r.member_id, r.member_epoch, self.now
        c.consuming = set(r.assignment) | (c.consuming & set(r.revoking))
        c.revoking = r.revoking

    def live(self) -> list[Client]:
        return [c for c in self.clients if c.alive and not c.left]

    # --- rules -------------------------------------------------------------------------

    @rule(subs=st.sampled_from(SUBSCRIPTIONS), static=st.booleans())
    def join(self, subs, static):
        if len(self.live()) >= 5:
            return
        c = Client(subs, f"host-{next(self.instances)}" if static else None)
        self.clients.append(c)
        self.beat(c, release=False)

    @rule(i=st.integers(0, 20), release=st.booleans())
    def heartbeat(self, i, release):
        live = self.live()
        if live:
            self.beat(live[i % len(live)], release)

    @rule(i=st.integers(0, 20), release=st.booleans())
    def heartbeat_answer_lost(self, i, release):
        live = [c for c in self.live() if c.epoch > 0]
        if live:
            self.beat(live[i % len(live)], release, lost=True)

    @rule(i=st.integers(0, 20))
    def leave(self, i):
        live = [c for c in self.live() if c.member_id is not None]
        if not live:
            return
        c = live[i % len(live)]
        with contextlib.suppress(UnknownMemberIdError):  # already expired: nothing to leave
            self.group.leave(c.member_id, self.now, static=c.instance_id is not None)
        c.lose_everything()
        c.left = True

    @rule(i=st.integers(0, 20))
    def crash(self, i):
        live = self.live()
        if live:
            c = live[i % len(live)]
            c.alive = False
            c.lose_everything()

    @rule(i=st.integers(0, 20))
    def restart_static(self, i):
        gone = [c for c in self.clients if (not c.alive or c.left) and c.instance_id]
        if not gone or len(self.live()) >= 5:
            return
        old = gone[i % len(gone)]
        self.clients.remove(old)
        # A new process with the same group.instance.id; a graceful leaver keeps its id.
        c = Client(old.subscriptions, old.instance_id, old.member_id if old.left else None)
        self.clients.append(c)
        self.beat(c, release=False)

    @rule(ms=st.integers(0, 4_000))
    def tick(self, ms):
        self.now += ms
        self.group.expire(self.now)
        for c in self.live():
            if self.now - c.last_ok_ms >= SESSION:
                c.lose_everything()  # the client knows its session is gone

    @rule()
    def settle(self):
        for c in self.live():
            self.beat(c, release=True)
        self.now += SESSION - 1
        for c in self.live():
            self.beat(c, release=True)
        self.now += 2
        self.group.expire(self.now)  # everyone dead or away has expired by now
        for _ in range(6):
            for c in self.live():
                self.beat(c, release=True)
            self.check_no_double_ownership()
        assert self.group.state in (GroupState.STABLE, GroupState.EMPTY), self.group.describe()
        members = self.group.members
        live = self.live()
        assert {c.member_id for c in live} == set(members)
        wanted = {
            TopicPartition(t, p)
            for m in members.values()
            for t in m.subscriptions
            for p in range(COUNTS[t])
        }
        owners: dict[TopicPartition, list[str]] = {}
        for c in live:
            assert c.consuming == set(members[c.member_id].assigned)
            assert members[c.member_id].assigned == self.group.target[c.member_id]
            for tp in c.consuming:
                owners.setdefault(tp, []).append(c.member_id)
        assert set(owners) == wanted
        assert all(len(v) == 1 for v in owners.values())

    # --- invariants --------------------------------------------------------------------

    @invariant()
    def check_no_double_ownership(self):
        seen: dict[TopicPartition, str] = {}
        for m in self.group.members.values():
            assert not (m.assigned & m.revoking)
            for tp in m.holds:
                assert tp not in seen, f"{tp} held by {seen[tp]} and {m.member_id}"
                seen[tp] = m.member_id
                assert self.group.owners[tp] == m.member_id
        assert set(self.group.owners) == set(seen)
        consuming: dict[TopicPartition, Client] = {}
        for c in self.live():
            for tp in c.consuming:
                assert tp not in consuming, f"{tp} consumed twice"
                consuming[tp] = c

    @invariant()
    def zombies_cannot_commit(self):
        for c in self.clients:
            if c.member_id is None:
                continue
            m = self.group.members.get(c.member_id)
            if m is None or m.left:
                with pytest.raises(UnknownMemberIdError):
                    self.group.validate_offset_commit(c.member_id, c.epoch)
            elif m.member_epoch != c.epoch:
                with pytest.raises(StaleMemberEpochError):
                    self.group.validate_offset_commit(c.member_id, c.epoch)
            else:
                self.group.validate_offset_commit(c.member_id, c.epoch)
            if m is not None and not m.left:
                with pytest.raises(StaleMemberEpochError):
                    self.group.validate_offset_commit(c.member_id, m.member_epoch - 1)


GroupSimulation.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestGroupSimulation = GroupSimulation.TestCase


# --- static membership: a restart inside the session timeout moves nothing --------------


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(2, 5),
    partitions=st.integers(1, 12),
    who=st.integers(0, 4),
    graceful=st.booleans(),
    away_ms=st.integers(0, SESSION - 1),
)
def test_static_restart_inside_the_session_timeout_causes_no_reassignment(
    n, partitions, who, graceful, away_ms
):
    ids = (f"m{i}" for i in itertools.count())
    g = ConsumerGroup(
        "g",
        session_timeout_ms=SESSION,
        partition_counts={"t": partitions},
        member_id_factory=lambda: next(ids),
    )
    for i in range(n):
        g.heartbeat(None, 0, 0, subscriptions=["t"], instance_id=f"host-{i}")
    for _ in range(4):
        for mid, m in sorted(g.members.items()):
            g.heartbeat(mid, m.member_epoch, 0, owned=m.assigned)
    assert g.state is GroupState.STABLE
    before_epoch = g.group_epoch
    before = {m.instance_id: m.assigned for m in g.members.values()}
    target_before = {g.members[mid].instance_id: tps for mid, tps in g.target.items()}
    victim = sorted(g.members)[who % n]
    instance = g.members[victim].instance_id
    if graceful:
        g.leave(victim, 0, static=True)
    assert g.expire(away_ms) == []
    r = g.heartbeat(None, 0, away_ms, subscriptions=["t"], instance_id=instance)
    assert r.assignment == before[instance] and not r.revoking and not r.pending
    assert (r.member_id == victim) is graceful
    assert g.group_epoch == before_epoch and g.state is GroupState.STABLE
    assert {m.instance_id: m.assigned for m in g.members.values()} == before
    assert {g.members[mid].instance_id: tps for mid, tps in g.target.items()} == target_before
