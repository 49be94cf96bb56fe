"""Kafka's classic consumer-group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) as a
pure state machine: no I/O, no clock (every call takes ``now_ms``), no futures.

The members' client-side assignor does the assigning: the coordinator only picks a protocol
every member supports, collects the members (the join phase), hands the leader everyone's
metadata, and passes the leader's assignment bytes to each member (the sync phase). Those
bytes are opaque here (``consumer_protocol`` decodes them only to describe a group).

States, as Kafka's: ``Empty`` (no members), ``PreparingRebalance`` (the join phase: members
rejoin), ``CompletingRebalance`` (a new generation waits for the leader's SyncGroup),
``Stable``, ``Dead``.

A JoinGroup or SyncGroup that must wait for the phase to end returns :class:`Parked`; when the
phase ends (a call or :meth:`ClassicGroup.expire` at :meth:`ClassicGroup.next_deadline_ms`)
the answers for every parked request are queued and :meth:`ClassicGroup.drain` hands them to
the shell, which resolves the waiting requests once it has persisted the group (so a member
never learns of an assignment a failover could forget). What is persisted is the last
completed generation (:meth:`ClassicGroup.persisted`), as Kafka stores a group at each
SyncGroup of its leader and when it becomes empty.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from brokernodes.errors import SluiceError
from brokernodes.groups import consumer_protocol as cp

__all__ = [
    "ClassicConfig",
    "ClassicGroup",
    "ClassicGroupError",
    "ClassicMember",
    "ClassicState",
    "JoinResponse",
    "Parked",
    "SyncResponse",
]


class ClassicGroupError(SluiceError):
    """A classic-group request refused with one of Kafka's group error codes
    (``ILLEGAL_GENERATION``, ``REBALANCE_IN_PROGRESS``, ``FENCED_INSTANCE_ID``, ...)."""

    def __init__(self, error_code: str, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class ClassicState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ClassicConfig:
    """The coordinator's classic-group settings (Kafka's ``group.*`` broker configs)."""

    initial_rebalance_delay_ms: int = 300  # group.initial.rebalance.delay.ms (Kafka: 3000)
    min_session_timeout_ms: int = 1_000  # group.min.session.timeout.ms (Kafka: 6000)
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    max_size: int = 1_000  # group.max.size: members and pending members
    max_rebalance_timeout_ms: int = 1_800_000
    max_metadata_bytes: int = 256 * 1024  # one member's protocols' metadata together
    # the persisted generation (members' metadata and assignments) must fit one
    # __consumer_offsets record under max.message.bytes (1 MiB) after base64
    max_group_bytes: int = 512 * 1024
    max_protocols: int = 64


@dataclass
class ClassicMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata) in the member's preference
    assignment: bytes = b""
    awaiting_join: bool = False  # a JoinGroup is parked
    awaiting_sync: bool = False  # a SyncGroup is parked
    session_deadline_ms: int = 0

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        return next(name for name in self.protocol_names if name in candidates)


@dataclass(frozen=True)
class Parked:
    """The request waits: its answer comes from :meth:`ClassicGroup.drain` as
    ``(member_id, kind, response)`` with ``kind`` "join" or "sync"."""

    member_id: str
    kind: str


@dataclass
class JoinResponse:
    member_id: str
    error: str | None = None  # Kafka's error name; None = NONE
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass
class SyncResponse:
    error: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


Completion = tuple[str, str, "JoinResponse | SyncResponse"]


def _err(code: str, message: str) -> ClassicGroupError:
    return ClassicGroupError(code, message)


def _new_member_id(prefix: str) -> str:
    return f"{prefix or 'member'}-{uuid.uuid4()}"


class ClassicGroup:
    """One classic group. Call the request methods under the shard's lock, then
    :meth:`drain` the answers to parked requests and persist :meth:`persisted`."""

    kind = "classic"

    def __init__(
        self,
        group_id: str,
        config: ClassicConfig | None = None,
        *,
        member_id_factory: Callable[[str], str] = _new_member_id,
    ) -> None:
        self.group_id = group_id
        self.config = config or ClassicConfig()
        self.member_id_factory = member_id_factory
        self.state = ClassicState.EMPTY
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicMember] = {}
        self.pending_members: dict[str, int] = {}  # MEMBER_ID_REQUIRED ids -> rejoin deadline
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.join_deadline_ms: int | None = None
        self._initial_join = False
        self._join_hard_deadline_ms = 0
        self._new_member_added = False
        self.pending_sync: set[str] = set()  # members of this generation yet to SyncGroup
        self.sync_deadline_ms: int | None = None
        self.partition_counts: dict[str, int] = {}  # unused: assignment is client-side
        self._outbox: list[Completion] = []
        self._persisted: dict | None = None

    # --- the shared group surface (as ConsumerGroup's) ---------------------------------

    @property
    def is_empty(self) -> bool:
        return not self.members and not self.pending_members

    def subscribed_topics(self) -> frozenset[str]:
        if self.protocol_type != cp.PROTOCOL_TYPE:
            return frozenset()
        out: set[str] = set()
        for m in self.members.values():
            out |= cp.subscribed_topics(m.metadata(self.protocol_name or m.protocol_names[0]))
        return frozenset(out)

    def update_metadata(self, partition_counts: Mapping[str, int]) -> bool:
        """Classic members watch metadata themselves and rejoin; nothing to do here."""
        self.partition_counts = dict(partition_counts)
        return False

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=60_000)

    def drain(self) -> list[Completion]:
        """The answers to parked requests queued since the last drain."""
        out, self._outbox = self._outbox, []
        return out

    # --- JoinGroup ---------------------------------------------------------------------

    def join(
        self,
        now_ms: int,
        *,
        member_id: str,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int = -1,
        instance_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
        require_known_member_id: bool = False,
        supports_skip_assignment: bool = False,
    ) -> JoinResponse | Parked:
        cfg = self.config
        if not cfg.min_session_timeout_ms <= session_timeout_ms <= cfg.max_session_timeout_ms:
            raise _err(
                "INVALID_SESSION_TIMEOUT",
                f"session timeout {session_timeout_ms} ms is outside "
                f"{cfg.min_session_timeout_ms}..{cfg.max_session_timeout_ms} ms",
            )
        if rebalance_timeout_ms < 0:  # JoinGroup v0: the session timeout bounds the join
            rebalance_timeout_ms = session_timeout_ms
        rebalance_timeout_ms = min(rebalance_timeout_ms, cfg.max_rebalance_timeout_ms)
        protos = self._protocols(protocols)
        if self.state is ClassicState.DEAD:
            raise _err("COORDINATOR_NOT_AVAILABLE", "the group is being removed; retry")
        if not self._supports(protocol_type, protos):
            raise _err(
                "INCONSISTENT_GROUP_PROTOCOL",
                f"protocol type {protocol_type!r} with protocols "
                f"{[n for n, _ in protos][:8]} does not match the group's "
                f"({self.protocol_type!r}, common {sorted(self._candidates())[:8]})",
            )
        details = dict(
            instance_id=instance_id,
            client_id=client_id,
            client_host=client_host,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            protocols=protos,
        )
        if not member_id:
            if instance_id is not None and instance_id in self.static_members:
                return self._replace_static(now_ms, supports_skip_assignment, **details)
            if len(self.members) + len(self.pending_members) >= cfg.max_size:
                raise _err("GROUP_MAX_SIZE_REACHED", f"the group has {cfg.max_size} members")
            new_id = self.member_id_factory(instance_id or client_id)
            if instance_id is None and require_known_member_id:
                self.pending_members[new_id] = now_ms + session_timeout_ms
                return JoinResponse(member_id=new_id, error="MEMBER_ID_REQUIRED")
            return self._add(now_ms, new_id, protocol_type, details)
        if member_id in self.pending_members:
            if instance_id is not None:
                raise _err("FENCED_INSTANCE_ID", "a pending member cannot name an instance id")
            del self.pending_members[member_id]
            return self._add(now_ms, member_id, protocol_type, details)
        member = self._validate_member(member_id, instance_id)
        if self.state is ClassicState.PREPARING_REBALANCE:
            self._update(member, details)
            member.awaiting_join = True
            self._maybe_complete_join(now_ms)
            return Parked(member_id, "join")
        if self.state is ClassicState.COMPLETING_REBALANCE:
            if member.protocols == protos:  # it missed our answer: the same one again
                return self._current_join_response(member, leader_view=True)
            self._update(member, details)
            member.awaiting_join = True
            self._rebalance(now_ms, member)
            return Parked(member_id, "join")
        if self.state is ClassicState.STABLE:
            if member_id == self.leader_id or member.protocols != protos:
                self._update(member, details)
                member.awaiting_join = True
                self._rebalance(now_ms, member)
                return Parked(member_id, "join")
            return self._current_join_response(member, leader_view=False)
        raise _err("UNKNOWN_MEMBER_ID", f"member {member_id!r} is not in the group")

    def _protocols(self, protocols: Sequence[tuple[str, bytes]]) -> tuple[tuple[str, bytes], ...]:
        cfg = self.config
        if len(protocols) > cfg.max_protocols:
            raise _err("INVALID_REQUEST", f"more than {cfg.max_protocols} protocols")
        seen: dict[str, bytes] = {}
        for name, meta in protocols:
            seen.setdefault(name, bytes(meta or b""))
        if sum(len(m) for m in seen.values()) > cfg.max_metadata_bytes:
            raise _err(
                "INVALID_REQUEST",
                f"protocol metadata over {cfg.max_metadata_bytes} bytes for one member",
            )
        return tuple(seen.items())

    def _candidates(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        out = set(members[0].protocol_names)
        for m in members[1:]:
            out &= set(m.protocol_names)
        return out

    def _supports(self, protocol_type: str, protos: tuple[tuple[str, bytes], ...]) -> bool:
        if not protocol_type or not protos:
            return False
        if not self.members:
            return True
        return protocol_type == self.protocol_type and bool(
            self._candidates() & {n for n, _ in protos}
        )

    def _validate_member(self, member_id: str, instance_id: str | None) -> ClassicMember:
        """Kafka's member check: an instance id must map to this member id."""
        if instance_id is not None:
            known = self.static_members.get(instance_id)
            if known is None:
                raise _err("UNKNOWN_MEMBER_ID", f"no member has instance id {instance_id!r}")
            if known != member_id:
                raise _err(
                    "FENCED_INSTANCE_ID",
                    f"instance id {instance_id!r} belongs to another member now",
                )
        member = self.members.get(member_id)
        if member is None:
            raise _err("UNKNOWN_MEMBER_ID", f"member {member_id!r} is not in the group")
        return member

    def _update(self, member: ClassicMember, details: dict) -> None:
        member.protocols = details["protocols"]
        member.session_timeout_ms = details["session_timeout_ms"]
        member.rebalance_timeout_ms = details["rebalance_timeout_ms"]
        member.client_id = details["client_id"]
        member.client_host = details["client_host"]

    def _add(self, now_ms: int, member_id: str, protocol_type: str, d: dict) -> Parked:
        if not self.members:
            self.protocol_type = protocol_type
        member = ClassicMember(
            member_id,
            d["instance_id"],
            d["client_id"],
            d["client_host"],
            d["session_timeout_ms"],
            d["rebalance_timeout_ms"],
            d["protocols"],
            awaiting_join=True,
            session_deadline_ms=now_ms + d["session_timeout_ms"],
        )
        self.members[member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member_id
        if self.leader_id is None:
            self.leader_id = member_id
        if self.state is ClassicState.PREPARING_REBALANCE and self._initial_join:
            self._new_member_added = True
        self._rebalance(now_ms, member)
        return Parked(member_id, "join")

    def _replace_static(
        self, now_ms: int, supports_skip_assignment: bool, **d
    ) -> JoinResponse | Parked:
        """A static member restarted (same instance id, no member id): the new incarnation
        takes the old one's place under a new member id; the old one is fenced."""
        instance_id = d["instance_id"]
        old_id = self.static_members[instance_id]
        old = self.members.pop(old_id)
        if old.awaiting_join:
            self._outbox.append(
                (old_id, "join", JoinResponse(member_id=old_id, error="FENCED_INSTANCE_ID"))
            )
        if old.awaiting_sync:
            self._outbox.append((old_id, "sync", SyncResponse(error="FENCED_INSTANCE_ID")))
        new_id = self.member_id_factory(instance_id)
        old_leader = self.leader_id
        member = ClassicMember(
            new_id,
            instance_id,
            d["client_id"],
            d["client_host"],
            d["session_timeout_ms"],
            d["rebalance_timeout_ms"],
            d["protocols"],
            assignment=old.assignment,
            session_deadline_ms=now_ms + d["session_timeout_ms"],
        )
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        if self.state is ClassicState.STABLE and self._select_protocol() == self.protocol_name:
            # nothing the assignment depends on changed: no rebalance
            self._persisted = None
            if supports_skip_assignment:
                leader = new_id == self.leader_id
                return self._current_join_response(member, leader_view=leader, skip=leader)
            response = self._current_join_response(member, leader_view=False)
            response.leader = old_leader or ""
            return response
        member.awaiting_join = True
        if self.state is ClassicState.PREPARING_REBALANCE:
            self._maybe_complete_join(now_ms)
        else:
            self._rebalance(now_ms, member)
        return Parked(new_id, "join")

    def _current_join_response(
        self, member: ClassicMember, *, leader_view: bool, skip: bool = False
    ) -> JoinResponse:
        is_leader = member.member_id == self.leader_id
        return JoinResponse(
            member_id=member.member_id,
            generation_id=self.generation,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader_id or "",
            skip_assignment=skip,
            members=self._member_list() if leader_view and is_leader else [],
        )

    def _member_list(self) -> list[tuple[str, str | None, bytes]]:
        return [
            (m.member_id, m.instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        ]

    # --- the join phase ------------------------------------------------------------------

    def _rebalance(self, now_ms: int, member: ClassicMember | None = None) -> None:
        """Start a join phase unless one is running, then see if it can end already."""
        if self.state is not ClassicState.PREPARING_REBALANCE:
            self._prepare_rebalance(now_ms)
        self._maybe_complete_join(now_ms)

    def _prepare_rebalance(self, now_ms: int) -> None:
        if self.state is ClassicState.COMPLETING_REBALANCE:
            # the leader's assignment for this generation will never come: parked syncs
            # learn that a new rebalance started
            for m in self.members.values():
                m.assignment = b""
                if m.awaiting_sync:
                    m.awaiting_sync = False
                    self._outbox.append(
                        (m.member_id, "sync", SyncResponse(error="REBALANCE_IN_PROGRESS"))
                    )
        self.pending_sync.clear()
        self.sync_deadline_ms = None
        if self.state is ClassicState.EMPTY:
            # a new (or emptied) group waits a little so that members starting together
            # join one generation (group.initial.rebalance.delay.ms)
            timeout = self.rebalance_timeout_ms
            self._initial_join = True
            self._new_member_added = False
            self._join_hard_deadline_ms = now_ms + timeout
            self.join_deadline_ms = now_ms + min(self.config.initial_rebalance_delay_ms, timeout)
        else:
            self._initial_join = False
            self.join_deadline_ms = now_ms + self.rebalance_timeout_ms
        self.state = ClassicState.PREPARING_REBALANCE

    def _all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def _maybe_complete_join(self, now_ms: int) -> None:
        if self.state is not ClassicState.PREPARING_REBALANCE:
            return
        deadline = self.join_deadline_ms or 0
        if self._initial_join:
            if now_ms < deadline:
                return
            if self._new_member_added and now_ms < self._join_hard_deadline_ms:
                self._new_member_added = False
                self.join_deadline_ms = min(
                    now_ms + self.config.initial_rebalance_delay_ms, self._join_hard_deadline_ms
                )
                return
        elif now_ms < deadline and not self._all_joined():
            return
        self._complete_join(now_ms)

    def _complete_join(self, now_ms: int) -> None:
        for m in [m for m in self.members.values() if not m.awaiting_join]:
            if m.instance_id is None:  # dynamic members that did not rejoin are out
                self._remove(m)
        joined = [m for m in self.members.values() if m.awaiting_join]
        if self.members and not joined:
            # only static members that have not rejoined: wait for them (or their sessions)
            self._initial_join = False
            self.join_deadline_ms = now_ms + self.rebalance_timeout_ms
            return
        self.generation += 1
        self.join_deadline_ms = None
        self._initial_join = False
        if not self.members:
            self.state = ClassicState.EMPTY
            self.protocol_name = None  # the protocol type stays, as Kafka shows it
            self.leader_id = None
            return
        leader = self.members.get(self.leader_id or "")
        if leader is None or not leader.awaiting_join:
            self.leader_id = joined[0].member_id
        self.protocol_name = self._select_protocol()
        self.state = ClassicState.COMPLETING_REBALANCE
        self.pending_sync = set(self.members)
        self.sync_deadline_ms = now_ms + self.rebalance_timeout_ms
        everyone = self._member_list()
        for m in self.members.values():
            m.session_deadline_ms = now_ms + m.session_timeout_ms
            if m.awaiting_join:
                m.awaiting_join = False
                response = self._current_join_response(m, leader_view=False)
                if m.member_id == self.leader_id:
                    response.members = everyone
                self._outbox.append((m.member_id, "join", response))

    def _select_protocol(self) -> str | None:
        """The protocol every member supports that most members list first among those."""
        candidates = self._candidates()
        if not candidates:
            return None
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        first = next(iter(self.members.values()))
        order = {name: i for i, name in enumerate(first.protocol_names)}
        return max(votes, key=lambda name: (votes[name], -order.get(name, 0)))

    # --- SyncGroup -----------------------------------------------------------------------

    def sync(
        self,
        now_ms: int,
        *,
        member_id: str,
        generation_id: int,
        assignments: Iterable[tuple[str, bytes]] = (),
        instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> SyncResponse | Parked:
        if self.state is ClassicState.DEAD:
            raise _err("COORDINATOR_NOT_AVAILABLE", "the group is being removed; retry")
        member = self._validate_member(member_id, instance_id)
        if generation_id != self.generation:
            raise _err(
                "ILLEGAL_GENERATION",
                f"generation {generation_id} is not the group's {self.generation}",
            )
        if (protocol_type is not None and protocol_type != self.protocol_type) or (
            protocol_name is not None and protocol_name != self.protocol_name
        ):
            raise _err(
                "INCONSISTENT_GROUP_PROTOCOL",
                f"the group runs {self.protocol_type!r}/{self.protocol_name!r}",
            )
        if self.state is ClassicState.PREPARING_REBALANCE:
            raise _err("REBALANCE_IN_PROGRESS", "the group is rebalancing; rejoin")
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        self.pending_sync.discard(member_id)
        if self.state is ClassicState.STABLE:
            return self._sync_response(member)
        if self.state is not ClassicState.COMPLETING_REBALANCE:
            raise _err("UNKNOWN_MEMBER_ID", f"member {member_id!r} is not in the group")
        given: dict[str, bytes] = {}
        if member_id == self.leader_id:
            for mid, data in assignments:
                given[mid] = bytes(data or b"")
            size = sum(
                len(m.metadata(self.protocol_name)) + len(given.get(m.member_id, b""))
                for m in self.members.values()
            )
            if size > self.config.max_group_bytes:
                # it could not be stored: the generation fails, everyone rejoins
                self._prepare_rebalance(now_ms)
                raise _err(
                    "UNKNOWN_SERVER_ERROR",
                    f"the group's metadata and assignments take {size} bytes, over the "
                    f"{self.config.max_group_bytes} a group may store",
                )
        member.awaiting_sync = True
        if member_id == self.leader_id:
            for m in self.members.values():
                m.assignment = given.get(m.member_id, b"")
            self.state = ClassicState.STABLE
            self._persisted = None
            for m in self.members.values():
                if m.awaiting_sync:
                    m.awaiting_sync = False
                    self._outbox.append((m.member_id, "sync", self._sync_response(m)))
        return Parked(member_id, "sync")

    def _sync_response(self, member: ClassicMember) -> SyncResponse:
        return SyncResponse(
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            assignment=member.assignment,
        )

    # --- Heartbeat, LeaveGroup, commits -----------------------------------------------

    def heartbeat(
        self, now_ms: int, *, member_id: str, generation_id: int, instance_id: str | None = None
    ) -> None:
        """Raises REBALANCE_IN_PROGRESS while members must rejoin (the member's session is
        refreshed all the same)."""
        if self.state is ClassicState.DEAD:
            raise _err("COORDINATOR_NOT_AVAILABLE", "the group is being removed; retry")
        member = self._validate_member(member_id, instance_id)
        if generation_id != self.generation:
            raise _err(
                "ILLEGAL_GENERATION",
                f"generation {generation_id} is not the group's {self.generation}",
            )
        if self.state is ClassicState.EMPTY:
            raise _err("UNKNOWN_MEMBER_ID", "the group is empty")
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        if self.state is ClassicState.PREPARING_REBALANCE:
            raise _err("REBALANCE_IN_PROGRESS", "the group is rebalancing; rejoin")

    def leave(
        self, now_ms: int, members: Iterable[tuple[str, str | None]]
    ) -> list[tuple[str, str | None, str | None]]:
        """LeaveGroup: ``[(member_id, instance_id)]`` -> ``[(member_id, instance_id,
        error or None)]``; a static member may be named by its instance id alone."""
        out: list[tuple[str, str | None, str | None]] = []
        for member_id, instance_id in members:
            if self.state is ClassicState.DEAD:
                out.append((member_id, instance_id, "COORDINATOR_NOT_AVAILABLE"))
                continue
            if not member_id and instance_id is not None:
                member_id = self.static_members.get(instance_id, "")
                if not member_id:
                    out.append(("", instance_id, "UNKNOWN_MEMBER_ID"))
                    continue
            if member_id in self.pending_members and instance_id is None:
                del self.pending_members[member_id]
                self._maybe_complete_join(now_ms)
                out.append((member_id, instance_id, None))
                continue
            try:
                member = self._validate_member(member_id, instance_id)
            except ClassicGroupError as e:
                out.append((member_id, instance_id, e.error_code))
                continue
            self._remove(member, "UNKNOWN_MEMBER_ID")
            self._after_removal(now_ms)
            out.append((member_id, instance_id, None))
        return out

    def validate_offset_commit(
        self, member_id: str | None, generation_id: int, instance_id: str | None = None
    ) -> None:
        """Kafka's classic commit rules: a member at the current generation; a standalone
        commit (generation < 0) only while the group is empty; none mid-assignment."""
        if self.state is ClassicState.DEAD:
            raise _err("COORDINATOR_NOT_AVAILABLE", "the group is being removed; retry")
        if generation_id < 0 and self.state is ClassicState.EMPTY:
            return
        if generation_id >= 0 or member_id or instance_id is not None:
            self._validate_member(member_id or "", instance_id)
            if generation_id != self.generation:
                raise _err(
                    "ILLEGAL_GENERATION",
                    f"generation {generation_id} is not the group's {self.generation}",
                )
        elif self.state is not ClassicState.EMPTY:
            raise _err("UNKNOWN_MEMBER_ID", "only the group's members may commit while it has any")
        if self.state is ClassicState.COMPLETING_REBALANCE:
            raise _err("REBALANCE_IN_PROGRESS", "the group is completing a rebalance")

    def touch(self, member_id: str | None, now_ms: int) -> None:
        """A member's accepted commit counts as a heartbeat, as in Kafka."""
        member = self.members.get(member_id or "")
        if member is not None:
            member.session_deadline_ms = now_ms + member.session_timeout_ms

    def mark_dead(self) -> None:
        """The group is deleted or unloaded: parked requests learn to find the coordinator."""
        for m in self.members.values():
            if m.awaiting_join:
                response = JoinResponse(member_id=m.member_id, error="COORDINATOR_NOT_AVAILABLE")
                self._outbox.append((m.member_id, "join", response))
            if m.awaiting_sync:
                self._outbox.append(
                    (m.member_id, "sync", SyncResponse("COORDINATOR_NOT_AVAILABLE"))
                )
            m.awaiting_join = m.awaiting_sync = False
        self.state = ClassicState.DEAD

    def _remove(self, member: ClassicMember, error: str | None = "UNKNOWN_MEMBER_ID") -> None:
        self.members.pop(member.member_id, None)
        if member.instance_id is not None and (
            self.static_members.get(member.instance_id) == member.member_id
        ):
            del self.static_members[member.instance_id]
        self.pending_sync.discard(member.member_id)
        if member.awaiting_join:
            response = JoinResponse(member_id=member.member_id, error=error)
            self._outbox.append((member.member_id, "join", response))
        if member.awaiting_sync:
            self._outbox.append((member.member_id, "sync", SyncResponse(error=error)))
        member.awaiting_join = member.awaiting_sync = False
        if self.leader_id == member.member_id:
            self.leader_id = next(iter(self.members), None)

    def _after_removal(self, now_ms: int) -> None:
        if self.state in (ClassicState.STABLE, ClassicState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now_ms)
        self._maybe_complete_join(now_ms)

    # --- time ----------------------------------------------------------------------------

    def expire(self, now_ms: int) -> list[str]:
        """Apply every deadline passed at ``now_ms``: pending members that never rejoined,
        sessions (members without a parked request), members that did not SyncGroup in
        time, and the end of the join phase. Returns the member ids removed."""
        removed: list[str] = []
        for mid, deadline in list(self.pending_members.items()):
            if now_ms >= deadline:
                del self.pending_members[mid]
                removed.append(mid)
        for m in list(self.members.values()):
            if m.member_id not in self.members:  # gone with an earlier removal's join
                continue
            if not m.awaiting_join and not m.awaiting_sync and now_ms >= m.session_deadline_ms:
                self._remove(m)
                removed.append(m.member_id)
                self._after_removal(now_ms)
        if (
            self.sync_deadline_ms is not None
            and now_ms >= self.sync_deadline_ms
            and self.state in (ClassicState.COMPLETING_REBALANCE, ClassicState.STABLE)
        ):
            late = [self.members[mid] for mid in self.pending_sync if mid in self.members]
            self.pending_sync.clear()
            self.sync_deadline_ms = None
            for m in late:
                self._remove(m, "REBALANCE_IN_PROGRESS")
                removed.append(m.member_id)
            if late:
                self._after_removal(now_ms)
        self._maybe_complete_join(now_ms)
        if not self.pending_sync:
            self.sync_deadline_ms = None
        return removed

    def next_deadline_ms(self) -> int | None:
        deadlines = list(self.pending_members.values())
        deadlines += [
            m.session_deadline_ms
            for m in self.members.values()
            if not m.awaiting_join and not m.awaiting_sync
        ]
        if self.pending_sync and self.sync_deadline_ms is not None:
            deadlines.append(self.sync_deadline_ms)
        if self.state is ClassicState.PREPARING_REBALANCE and self.join_deadline_ms is not None:
            deadlines.append(self.join_deadline_ms)
        return min(deadlines, default=None)

    # --- persistence and description ----------------------------------------------------

    def persisted(self) -> dict | None:
        """What ``__consumer_offsets`` holds for the group: its last completed generation
        (Stable, or Empty after one), as Kafka's GroupMetadata record; None before any."""
        if self.state is ClassicState.STABLE or (
            self.state is ClassicState.EMPTY and self.generation > 0
        ):
            self._persisted = {
                "protocol_type": self.protocol_type,
                "generation": self.generation,
                "protocol": self.protocol_name,
                "leader": self.leader_id,
                "members": [
                    {
                        "member_id": m.member_id,
                        "instance_id": m.instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "session_timeout_ms": m.session_timeout_ms,
                        "rebalance_timeout_ms": m.rebalance_timeout_ms,
                        "subscription": m.metadata(self.protocol_name),
                        "assignment": m.assignment,
                    }
                    for m in self.members.values()
                ]
                if self.state is ClassicState.STABLE
                else [],
            }
        return self._persisted

    @classmethod
    def restore(
        cls,
        group_id: str,
        doc: Mapping,
        now_ms: int,
        config: ClassicConfig | None = None,
        **kwargs,
    ) -> ClassicGroup:
        """The group as a new coordinator loads it: Stable with its members (fresh session
        deadlines, so a failover fences nobody), or Empty."""
        group = cls(group_id, config, **kwargs)
        group.generation = int(doc["generation"])
        group.protocol_type = doc.get("protocol_type")
        group.protocol_name = doc.get("protocol")
        for m in doc.get("members") or []:
            member = ClassicMember(
                member_id=str(m["member_id"]),
                instance_id=m.get("instance_id"),
                client_id=str(m.get("client_id") or ""),
                client_host=str(m.get("client_host") or ""),
                session_timeout_ms=int(m["session_timeout_ms"]),
                rebalance_timeout_ms=int(m["rebalance_timeout_ms"]),
                protocols=((str(group.protocol_name or ""), bytes(m["subscription"])),),
                assignment=bytes(m["assignment"]),
            )
            member.session_deadline_ms = now_ms + member.session_timeout_ms
            group.members[member.member_id] = member
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
        if group.members:
            group.state = ClassicState.STABLE
            leader = doc.get("leader")
            group.leader_id = leader if leader in group.members else next(iter(group.members))
        group.persisted()
        return group

    @property
    def state_name(self) -> str:
        return self.state.value

    def describe(self) -> dict[str, object]:
        """A JSON-friendly description in ``ConsumerGroup.describe``'s shape (subscriptions
        and assignments decoded from the consumer protocol's bytes), plus the classic
        fields."""
        consumer = self.protocol_type == cp.PROTOCOL_TYPE
        members = []
        for m in self.members.values():
            meta = m.metadata(self.protocol_name or (m.protocol_names or [None])[0])
            assigned = cp.assigned_partitions(m.assignment) if consumer else []
            members.append(
                {
                    "member_id": m.member_id,
                    "instance_id": m.instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_epoch": self.generation,
                    "state": "stable" if self.state is ClassicState.STABLE else "rebalancing",
                    "subscriptions": sorted(cp.subscribed_topics(meta)) if consumer else [],
                    "assignment": [list(tp) for tp in assigned],
                    "revoking": [],
                    "target": [list(tp) for tp in assigned],
                }
            )
        return {
            "group_id": self.group_id,
            "type": "classic",
            "state": _SNAKE[self.state],
            "assignor": self.protocol_name,
            "protocol_type": self.protocol_type,
            "group_epoch": self.generation,
            "assignment_epoch": self.generation,
            "leader": self.leader_id,
            "members": sorted(members, key=lambda m: m["member_id"]),
        }


_SNAKE = {
    ClassicState.EMPTY: "empty",
    ClassicState.PREPARING_REBALANCE: "preparing_rebalance",
    ClassicState.COMPLETING_REBALANCE: "completing_rebalance",
    ClassicState.STABLE: "stable",
    ClassicState.DEAD: "dead",
}
