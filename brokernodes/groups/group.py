"""The consumer group state machine: KIP-848 server-side assignment and incremental
reconciliation, as a pure class (no I/O, no clock: every call takes ``now_ms``).

Members heartbeat with ``(member_id, member_epoch, subscriptions, owned partitions,
instance_id)``. The coordinator keeps three epochs, as Kafka's ``GroupMetadataManager`` does:

- the **group epoch**, bumped whenever membership, a subscription or the subscribed topics'
  partition counts change;
- the **target assignment epoch**: the group epoch the target assignment was computed for
  (computed at once here, so it always equals the group epoch);
- each member's **member epoch**: the target epoch the member has reconciled to.

Reconciliation is incremental and per member (Kafka's ``CurrentAssignmentBuilder``): a member
whose target lost partitions is first asked to revoke them (state ``UNREVOKED_PARTITIONS``,
epoch unchanged); once a heartbeat reports it no longer owns them they are released, the member
moves to the target epoch and gets the target partitions that are free. Partitions still held
(or being revoked) by another member are withheld (``UNRELEASED_PARTITIONS``) until that
member lets go. ``owners`` maps every partition to the one member holding it, so no partition
ever has two owners, and members whose assignment does not change keep consuming throughout.

Leaving: member epoch -1 leaves; -2 is a static member's temporary leave, which keeps its
assignment for ``session_timeout_ms`` so that the same ``group.instance.id`` can rejoin (epoch
0) and pick it up again with no rebalance. :meth:`ConsumerGroup.expire` fences members whose
session or revocation (``rebalance_timeout_ms``) deadline passed.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from brokernodes.groups.assignors import DEFAULT_ASSIGNOR, get_assignor
from brokernodes.groups.errors import (
    FencedMemberEpochError,
    InvalidGroupRequestError,
    NonEmptyGroupError,
    StaleMemberEpochError,
    UnknownMemberIdError,
)
from brokernodes.groups.types import MemberSubscription, TopicPartition

__all__ = [
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "ConsumerGroup",
    "GroupState",
    "HeartbeatResponse",
    "Member",
    "MemberState",
]

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
EMPTY: frozenset[TopicPartition] = frozenset()


class MemberState(enum.Enum):
    """Where a member is in its reconciliation (Kafka's ``MemberState``)."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class GroupState(enum.Enum):
    """The group's state as ``kafka-consumer-groups --describe --state`` shows it."""

    EMPTY = "empty"
    ASSIGNING = "assigning"
    RECONCILING = "reconciling"
    STABLE = "stable"


@dataclass
class Member:
    """One member as the coordinator sees it.

    ``assigned`` are the partitions it may consume now; ``revoking`` those it has been asked to
    give up and has not yet reported as released. ``left`` marks a static member that sent
    epoch -2 and whose slot is kept until its session expires.
    """

    member_id: str
    subscriptions: frozenset[str]
    instance_id: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: frozenset[TopicPartition] = EMPTY
    revoking: frozenset[TopicPartition] = EMPTY
    session_timeout_ms: int = 45_000
    rebalance_timeout_ms: int = 300_000
    session_deadline_ms: int = 0
    revocation_deadline_ms: int | None = None
    left: bool = False

    @property
    def holds(self) -> frozenset[TopicPartition]:
        """Everything the member may still be consuming: assigned plus revoking."""
        return self.assigned | self.revoking


@dataclass(frozen=True)
class HeartbeatResponse:
    """What a heartbeat answers: the member's id and epoch, the partitions it may consume now
    (``assignment``), those it must stop consuming and report released (``revoking``), and the
    target partitions it will get once their previous owners release them (``pending``)."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: frozenset[TopicPartition] = EMPTY
    revoking: frozenset[TopicPartition] = EMPTY
    pending: frozenset[TopicPartition] = EMPTY


@dataclass
class ConsumerGroup:
    """One consumer group's coordinator state; see the module docstring."""

    group_id: str
    assignor: str = DEFAULT_ASSIGNOR
    session_timeout_ms: int = 45_000
    rebalance_timeout_ms: int = 300_000
    heartbeat_interval_ms: int = 5_000
    partition_counts: dict[str, int] = field(default_factory=dict)
    member_id_factory: Callable[[], str] = field(default=lambda: uuid.uuid4().hex, repr=False)
    group_epoch: int = 0
    target_assignment_epoch: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    target: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)
    owners: dict[TopicPartition, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        get_assignor(self.assignor)  # fail early on an unknown name

    # --- reading -------------------------------------------------------------------------

    @property
    def state(self) -> GroupState:
        if not self.members:
            return GroupState.EMPTY
        if self.target_assignment_epoch < self.group_epoch:
            return GroupState.ASSIGNING
        if all(
            m.state is MemberState.STABLE and m.member_epoch == self.target_assignment_epoch
            for m in self.members.values()
        ):
            return GroupState.STABLE
        return GroupState.RECONCILING

    @property
    def is_empty(self) -> bool:
        """No members, not even a static member that left temporarily (inactive group)."""
        return not self.members

    def member_by_instance(self, instance_id: str) -> Member | None:
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member
        return None

    def subscribed_topics(self) -> frozenset[str]:
        return frozenset().union(*(m.subscriptions for m in self.members.values()))

    # --- the heartbeat -------------------------------------------------------------------

    def heartbeat(
        self,
        member_id: str | None,
        member_epoch: int,
        now_ms: int,
        *,
        subscriptions: Iterable[str] | None = None,
        owned: Iterable[TopicPartition] | None = None,
        instance_id: str | None = None,
        rebalance_timeout_ms: int | None = None,
        renew_session: bool = True,
    ) -> HeartbeatResponse:
        """Handle one ``ConsumerGroupHeartbeat``.

        ``member_epoch`` 0 joins (or rejoins after a fence, having released everything), -1
        leaves, -2 is a static member's temporary leave. ``subscriptions`` and ``owned`` are
        ``None`` when unchanged since the last heartbeat (as in KIP-848); a member must report
        ``owned`` to complete a revocation. ``renew_session=False`` leaves the session deadline
        where the member's last heartbeat put it: a heartbeat the coordinator held and answers
        again later (``has_news``) says nothing about whether the member is still alive.
        """
        if isinstance(subscriptions, str):
            raise InvalidGroupRequestError("subscriptions must be a list of topic names")
        subs = frozenset(subscriptions) if subscriptions is not None else None
        owned_set = frozenset(TopicPartition(*tp) for tp in owned) if owned is not None else None
        if member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(member_id, member_epoch, instance_id, now_ms)
        if member_epoch < 0:
            raise InvalidGroupRequestError(f"invalid member epoch {member_epoch}")
        if member_epoch == 0:
            member = self._join(member_id, instance_id, subs, now_ms)
        else:
            member = self._existing(member_id, member_epoch, owned_set)
            if subs is not None and subs != member.subscriptions:
                member.subscriptions = subs
                self._bump_group_epoch()
        if rebalance_timeout_ms is not None:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if renew_session:
            member.session_deadline_ms = now_ms + member.session_timeout_ms
        self._reconcile(member, owned_set if member_epoch != 0 else EMPTY, now_ms)
        return self._response(member)

    def has_news(self, member_id: str, member_epoch: int, owned: frozenset[TopicPartition]) -> bool:
        """Whether a heartbeat of ``member_id`` at ``member_epoch`` reporting ``owned`` would
        now be answered with something the member does not know yet: partitions to revoke or
        to take (a pending one released), a new member epoch, or an error (it left or was
        fenced). A waiting heartbeat is held until this turns true (or its wait ends)."""
        member = self.members.get(member_id)
        if member is None or member.left or member.member_epoch != member_epoch:
            return True
        if member.revoking:
            return not owned & member.revoking  # released: the revocation completes
        if owned != member.assigned:
            return True
        target = self.target.get(member_id, EMPTY)
        if member.assigned - target or member.member_epoch != self.target_assignment_epoch:
            return True
        return any(self.owners.get(tp, member_id) == member_id for tp in target - member.assigned)

    def leave(self, member_id: str, now_ms: int, *, static: bool = False) -> HeartbeatResponse:
        """Leave the group (epoch -1), or with ``static`` leave temporarily (epoch -2)."""
        epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH if static else LEAVE_GROUP_MEMBER_EPOCH
        return self.heartbeat(member_id, epoch, now_ms)

    def _existing(self, member_id: str | None, epoch: int, owned: frozenset | None) -> Member:
        member = self.members.get(member_id or "")
        if member is None:
            raise UnknownMemberIdError(f"member {member_id!r} is not in group {self.group_id!r}")
        if member.left:
            raise FencedMemberEpochError(
                f"static member {member_id!r} left the group; rejoin with member epoch 0"
            )
        if epoch > member.member_epoch:
            raise FencedMemberEpochError(
                f"member epoch {epoch} is ahead of the coordinator's {member.member_epoch}"
            )
        if epoch < member.member_epoch and not (
            epoch == member.previous_member_epoch and owned is not None and owned <= member.assigned
        ):
            # The previous epoch is accepted only for a member that missed our last answer.
            raise FencedMemberEpochError(
                f"member epoch {epoch} is stale; the current one is {member.member_epoch}"
            )
        return member

    def _join(
        self,
        member_id: str | None,
        instance_id: str | None,
        subs: frozenset[str] | None,
        now_ms: int,
    ) -> Member:
        if instance_id is not None:
            static = self.member_by_instance(instance_id)
            if static is not None:
                return self._rejoin_static(static, member_id, subs)
        member = self.members.get(member_id) if member_id else None
        if member is not None:
            if member.instance_id is not None and member.instance_id != instance_id:
                raise InvalidGroupRequestError(
                    f"member {member_id!r} is static member {member.instance_id!r}"
                )
            # A known member rejoining with epoch 0 has given up everything it held.
            self._release(member, member.holds)
            member.assigned = member.revoking = EMPTY
            member.previous_member_epoch, member.member_epoch = member.member_epoch, 0
            member.state = MemberState.STABLE
            member.revocation_deadline_ms = None
            member.left = False
            member.instance_id = instance_id
            if subs is not None and subs != member.subscriptions:
                member.subscriptions = subs
                self._bump_group_epoch()
            return member
        if subs is None:
            raise InvalidGroupRequestError("a joining member must send its subscriptions")
        member = Member(
            member_id=member_id or self.member_id_factory(),
            subscriptions=subs,
            instance_id=instance_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            session_deadline_ms=now_ms + self.session_timeout_ms,
        )
        self.members[member.member_id] = member
        self._bump_group_epoch()
        return member

    def _rejoin_static(
        self, old: Member, member_id: str | None, subs: frozenset[str] | None
    ) -> Member:
        """A ``group.instance.id`` coming back: it takes over the old member's assignment and
        epoch, with no group epoch bump unless its subscriptions changed.

        After a temporary leave (-2) it keeps its member id. If the old incarnation never left
        (a crash and restart inside the session timeout) the new one gets a new member id, so
        the old incarnation is fenced (UNKNOWN_MEMBER_ID on heartbeats and commits).
        """
        if old.left or member_id == old.member_id:
            new_id = old.member_id
        else:
            new_id = member_id or self.member_id_factory()
            if new_id in self.members:
                raise InvalidGroupRequestError(f"member id {new_id!r} belongs to another member")
        # The new incarnation owns nothing yet: what the old one was revoking is free now.
        self._release(old, old.revoking)
        member = Member(
            member_id=new_id,
            subscriptions=old.subscriptions if subs is None else subs,
            instance_id=old.instance_id,
            member_epoch=old.member_epoch,
            previous_member_epoch=old.previous_member_epoch,
            state=MemberState.STABLE,
            assigned=old.assigned,
            session_timeout_ms=old.session_timeout_ms,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
        )
        del self.members[old.member_id]
        self.members[new_id] = member
        for tp in member.assigned:
            self.owners[tp] = new_id
        if new_id != old.member_id:
            self.target[new_id] = self.target.pop(old.member_id, EMPTY)
        if member.subscriptions != old.subscriptions:
            self._bump_group_epoch()
        return member

    def _leave(
        self, member_id: str | None, epoch: int, instance_id: str | None, now_ms: int
    ) -> HeartbeatResponse:
        member = self.members.get(member_id or "")
        if member is None and instance_id is not None:
            member = self.member_by_instance(instance_id)
        if member is None:
            raise UnknownMemberIdError(f"member {member_id!r} is not in group {self.group_id!r}")
        if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and member.instance_id is not None:
            # Keep the slot: the assignment stays reserved until the session expires.
            self._release(member, member.revoking)
            member.revoking = EMPTY
            member.left = True
            member.revocation_deadline_ms = None
            member.session_deadline_ms = now_ms + member.session_timeout_ms
        else:
            self._remove(member)
            self._bump_group_epoch()
        return HeartbeatResponse(member.member_id, epoch, self.heartbeat_interval_ms)

    # --- time and metadata -------------------------------------------------------------

    def expire(self, now_ms: int) -> list[str]:
        """Fence every member whose session deadline (no heartbeat for
        ``session.timeout.ms``) or revocation deadline (``rebalance.timeout.ms`` to revoke)
        has passed; their partitions become assignable. Returns the fenced member ids."""
        fenced = [
            m.member_id
            for m in self.members.values()
            if now_ms >= m.session_deadline_ms
            or (m.revocation_deadline_ms is not None and now_ms >= m.revocation_deadline_ms)
        ]
        for member_id in fenced:
            self._remove(self.members[member_id])
        if fenced:
            self._bump_group_epoch()
        return fenced

    def next_deadline_ms(self) -> int | None:
        """When :meth:`expire` next has something to do (for the broker's timer)."""
        deadlines = [m.session_deadline_ms for m in self.members.values()]
        deadlines += [
            m.revocation_deadline_ms
            for m in self.members.values()
            if m.revocation_deadline_ms is not None
        ]
        return min(deadlines, default=None)

    def update_metadata(self, partition_counts: Mapping[str, int]) -> bool:
        """New topic metadata; bumps the group epoch (a rebalance) if a subscribed topic's
        partition count changed, appeared or disappeared. Returns whether it did."""
        subscribed = self.subscribed_topics()
        changed = any(
            self.partition_counts.get(t, 0) != partition_counts.get(t, 0) for t in subscribed
        )
        self.partition_counts = dict(partition_counts)
        if changed:
            self._bump_group_epoch()
        return changed

    # --- offset commits ----------------------------------------------------------------

    def validate_offset_commit(self, member_id: str | None, member_epoch: int) -> None:
        """Refuse a commit from a zombie: an unknown member (UNKNOWN_MEMBER_ID) or a member
        epoch other than the member's current one (STALE_MEMBER_EPOCH). An admin or
        standalone commit (no member id, epoch -1) is allowed only on an empty group."""
        if not member_id and member_epoch < 0:
            if self.members:
                raise NonEmptyGroupError(
                    f"group {self.group_id!r} has members; only they may commit offsets"
                )
            return
        member = self.members.get(member_id or "")
        if member is None or member.left:
            raise UnknownMemberIdError(f"member {member_id!r} is not in group {self.group_id!r}")
        if member_epoch != member.member_epoch:
            raise StaleMemberEpochError(
                f"member epoch {member_epoch} is not the current {member.member_epoch}"
            )

    # --- internals -----------------------------------------------------------------------

    def _bump_group_epoch(self) -> None:
        """Membership, subscriptions or metadata changed: new group epoch, new target."""
        self.group_epoch += 1
        members = {
            m.member_id: MemberSubscription(m.subscriptions, m.instance_id)
            for m in self.members.values()
        }
        previous = {mid: tps for mid, tps in self.target.items() if mid in members}
        self.target = dict(get_assignor(self.assignor)(members, self.partition_counts, previous))
        self.target_assignment_epoch = self.group_epoch

    def _remove(self, member: Member) -> None:
        self._release(member, member.holds)
        self.members.pop(member.member_id, None)
        self.target.pop(member.member_id, None)

    def _release(self, member: Member, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            if self.owners.get(tp) == member.member_id:
                del self.owners[tp]

    def _reconcile(self, member: Member, owned: frozenset | None, now_ms: int) -> None:
        """Move ``member`` one step towards its target (Kafka's CurrentAssignmentBuilder)."""
        if member.revoking:
            if owned is None or owned & member.revoking:
                return  # still waiting for the member to release them
            self._release(member, member.revoking)
            member.revoking = EMPTY
            member.revocation_deadline_ms = None
        target = self.target.get(member.member_id, EMPTY)
        retained = member.assigned & target
        to_revoke = member.assigned - target
        if to_revoke:
            member.assigned = retained
            member.revoking = to_revoke
            member.state = MemberState.UNREVOKED_PARTITIONS
            member.revocation_deadline_ms = now_ms + member.rebalance_timeout_ms
            return
        if member.member_epoch != self.target_assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.target_assignment_epoch
        wanted = target - retained
        free = frozenset(
            tp for tp in wanted if self.owners.get(tp, member.member_id) == member.member_id
        )
        for tp in free:
            self.owners[tp] = member.member_id
        member.assigned = retained | free
        member.state = MemberState.UNRELEASED_PARTITIONS if wanted - free else MemberState.STABLE

    def _response(self, member: Member) -> HeartbeatResponse:
        target = self.target.get(member.member_id, EMPTY)
        return HeartbeatResponse(
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            assignment=member.assigned,
            revoking=member.revoking,
            pending=target - member.assigned,
        )

    def describe(self) -> dict[str, object]:
        """A JSON-able description, as ``ConsumerGroupDescribe`` answers it."""
        return {
            "group_id": self.group_id,
            "state": self.state.value,
            "assignor": self.assignor,
            "group_epoch": self.group_epoch,
            "assignment_epoch": self.target_assignment_epoch,
            "members": [
                {
                    "member_id": m.member_id,
                    "instance_id": m.instance_id,
                    "member_epoch": m.member_epoch,
                    "state": m.state.value,
                    "subscriptions": sorted(m.subscriptions),
                    "assignment": [list(tp) for tp in sorted(m.assigned)],
                    "revoking": [list(tp) for tp in sorted(m.revoking)],
                    "target": [list(tp) for tp in sorted(self.target.get(m.member_id, EMPTY))],
                }
                for m in sorted(self.members.values(), key=lambda m: m.member_id)
            ],
        }
