"""Random programs against the classic group state machine: clients join (with
MEMBER_ID_REQUIRED), rejoin, sync, heartbeat, leave, crash, restart as static members, and
the clock jumps. After every step: one leader among the members, Empty exactly when there are
none, a parked request is answered at most once and nothing unasked is answered, every
member of a completed generation was given its leader's assignment. Then the surviving
clients behave and the group must settle: Stable, exactly them, each at the group's
generation with the bytes the leader gave it."""

from __future__ import annotations

import itertools

from hypothesis import event, given, settings
from hypothesis import strategies as st

from brokernodes.groups.classic import (
    ClassicConfig,
    ClassicGroup,
    ClassicGroupError,
    ClassicState,
    Parked,
)

DELAY = 300
SESSION = 6_000
REBALANCE = 8_000


class Client:
    def __init__(self, name: str, instance_id: str | None) -> None:
        self.name = name
        self.instance_id = instance_id
        self.member_id = ""
        self.generation = -1
        self.leader = False
        self.members: list[str] = []
        self.waiting: str | None = None  # "join" / "sync" parked
        self.assignment: bytes | None = None
        self.alive = True
        self.needs_sync = False


class World:
    def __init__(self) -> None:
        counter = itertools.count()
        self.group = ClassicGroup(
            "g",
            ClassicConfig(initial_rebalance_delay_ms=DELAY),
            member_id_factory=lambda prefix: f"{prefix}-{next(counter)}",
        )
        self.now = 0
        self.clients: list[Client] = []
        self.parked: dict[tuple[str, str], Client] = {}
        self.given: dict[int, dict[str, bytes]] = {}  # generation -> leader's assignment
        self.by_instance: dict[int, dict[str, bytes]] = {}  # the same by group.instance.id

    # --- client actions ----------------------------------------------------------------

    def join(self, c: Client) -> None:
        if c.waiting:
            return
        try:
            r = self.group.join(
                self.now,
                member_id=c.member_id,
                protocol_type="consumer",
                protocols=[("range", c.name.encode())],
                session_timeout_ms=SESSION,
                rebalance_timeout_ms=REBALANCE,
                instance_id=c.instance_id,
                client_id=c.name,
                require_known_member_id=True,
            )
        except ClassicGroupError as e:
            self.on_error(c, e.error_code)
            return
        self.on_join(c, r)

    def on_join(self, c: Client, r) -> None:
        if isinstance(r, Parked):
            c.member_id = r.member_id
            c.waiting = "join"
            self.parked[(r.member_id, "join")] = c
            return
        if r.error == "MEMBER_ID_REQUIRED":
            c.member_id = r.member_id
            return
        if r.error:
            self.on_error(c, r.error)
            return
        c.member_id, c.generation = r.member_id, r.generation_id
        c.leader = r.leader == r.member_id and bool(r.members) and not r.skip_assignment
        c.members = [m[0] for m in r.members]
        c.needs_sync = True

    def sync(self, c: Client) -> None:
        if c.waiting or not c.needs_sync:
            return
        assignments = [(m, f"{c.generation}:{m}".encode()) for m in c.members] if c.leader else []
        try:
            r = self.group.sync(
                self.now,
                member_id=c.member_id,
                generation_id=c.generation,
                assignments=assignments,
                instance_id=c.instance_id,
            )
        except ClassicGroupError as e:
            self.on_error(c, e.error_code)
            return
        if c.leader:
            self.given[c.generation] = dict(assignments)
            instances = {m.member_id: m.instance_id for m in self.group.members.values()}
            self.by_instance[c.generation] = {
                instances[m]: a for m, a in assignments if instances.get(m) is not None
            }
        c.needs_sync = False
        if isinstance(r, Parked):
            c.waiting = "sync"
            self.parked[(c.member_id, "sync")] = c
        else:
            self.on_sync(c, r)

    def on_sync(self, c: Client, r) -> None:
        if r.error:
            self.on_error(c, r.error)
            return
        c.assignment = r.assignment

    def heartbeat(self, c: Client) -> None:
        if c.waiting or not c.member_id or c.generation < 0:
            return
        try:
            self.group.heartbeat(
                self.now,
                member_id=c.member_id,
                generation_id=c.generation,
                instance_id=c.instance_id,
            )
        except ClassicGroupError as e:
            self.on_error(c, e.error_code)

    def leave(self, c: Client) -> None:
        if c.member_id:
            self.group.leave(self.now, [(c.member_id, c.instance_id)])
        c.alive = False

    def crash(self, c: Client) -> None:
        c.alive = False

    def restart_static(self, c: Client) -> Client:
        """A static member's process restarts: the same instance id, no member id."""
        c.alive = False
        fresh = Client(c.name + "'", c.instance_id)
        self.clients.append(fresh)
        self.join(fresh)
        return fresh

    def on_error(self, c: Client, code: str) -> None:
        c.needs_sync = False
        c.assignment = None
        if code in ("UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID"):
            if code == "FENCED_INSTANCE_ID":
                c.alive = False  # a fenced static incarnation stops, as clients do
            c.member_id, c.generation = "", -1
        elif code in ("REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION"):
            pass  # rejoin at the next turn
        else:
            raise AssertionError(f"unexpected error {code}")
        c.generation = -1 if code != "REBALANCE_IN_PROGRESS" else c.generation

    # --- the coordinator side ----------------------------------------------------------

    def tick(self, ms: int) -> None:
        self.now += ms
        self.group.expire(self.now)
        self.deliver()

    def deliver(self) -> None:
        for member_id, kind, response in self.group.drain():
            c = self.parked.pop((member_id, kind), None)
            assert c is not None, f"an answer nobody waits for: {member_id} {kind}"
            assert c.waiting == kind
            c.waiting = None
            if kind == "join":
                self.on_join(c, response)
            else:
                self.on_sync(c, response)
        self.check()

    def expected(self, generation: int, member_id: str) -> bytes:
        """What the leader gave this member, or (a static member restarted in place since)
        its instance."""
        given = self.given[generation]
        if member_id in given:
            return given[member_id]
        instance = self.group.members[member_id].instance_id
        return self.by_instance[generation].get(instance, b"") if instance else b""

    def check(self) -> None:
        g = self.group
        assert (g.state is ClassicState.EMPTY) == (not g.members) or g.state is (
            ClassicState.PREPARING_REBALANCE
        )
        if g.members:
            assert g.leader_id in g.members
        if g.state in (ClassicState.COMPLETING_REBALANCE, ClassicState.STABLE):
            assert not any(m.awaiting_join for m in g.members.values())
        if g.state is ClassicState.STABLE and g.generation in self.given:
            for m in g.members.values():
                assert m.assignment == self.expected(g.generation, m.member_id)
        for instance_id, member_id in g.static_members.items():
            assert g.members[member_id].instance_id == instance_id

    # --- a well-behaved client's turn --------------------------------------------------

    def behave(self, c: Client) -> None:
        if not c.alive or c.waiting:
            return
        if c.needs_sync:
            self.sync(c)
        elif c.generation < 0 or not c.member_id or c.member_id not in self.group.members:
            self.join(c)
        else:
            before = c.generation
            self.heartbeat(c)
            lost = c.generation != before or c.assignment is None
            rebalancing = self.group.state is ClassicState.PREPARING_REBALANCE
            if c.alive and not c.waiting and (lost or rebalancing):
                self.join(c)
        self.deliver()


ACTIONS = st.lists(
    st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(0, 4000)), max_size=40
)


@settings(max_examples=250, deadline=None)
@given(ACTIONS)
def test_random_programs_keep_the_invariants_and_settle(program):
    w = World()
    for kind, who, ms in program:
        live = [c for c in w.clients if c.alive]
        c = live[who % len(live)] if live else None
        if kind in (0, 7) or c is None:
            static = "i" + str(len(w.clients)) if who % 3 == 0 else None
            c = Client(f"c{len(w.clients)}", static)
            w.clients.append(c)
            w.join(c)
        elif kind == 1:
            w.behave(c)
        elif kind == 2:
            w.sync(c)
        elif kind == 3:
            w.leave(c)
        elif kind == 4:
            w.crash(c)
        elif kind == 5 and c.instance_id is not None:
            w.restart_static(c)
        elif kind == 6:
            w.heartbeat(c)
        w.deliver()
        w.tick(ms)
    # settle: survivors behave, the clock moves in heartbeat-sized steps
    for _ in range(600):
        for c in list(w.clients):
            w.behave(c)
        w.tick(200)
        live = {c.member_id for c in w.clients if c.alive}
        g = w.group
        if (
            g.state in (ClassicState.STABLE, ClassicState.EMPTY)
            and set(g.members) == live - {""}
            and all(c.assignment is not None for c in w.clients if c.alive)
        ):
            break
    live = [c for c in w.clients if c.alive]
    g = w.group
    event(f"{min(len(live), 3)}+ live members, generation {min(g.generation, 4)}+")
    assert set(g.members) == {c.member_id for c in live}
    if live:
        assert g.state is ClassicState.STABLE
        for c in live:
            assert c.generation == g.generation
            assert c.assignment == w.expected(g.generation, c.member_id)
    else:
        assert g.state is ClassicState.EMPTY
