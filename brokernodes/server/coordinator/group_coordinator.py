"""``GroupCoordinator``: the consumer-group coordinator shell around ``brokernodes.groups``.

Each ``__consumer_offsets`` partition this broker leads is a ``Shard``: the groups and
committed offsets rebuilt from that partition (``load_records``) when the broker becomes its
leader. Every request that changes a group runs under the shard's lock: apply it to the pure
state machine, append the diff of the group's records (``record_diff``) plus any offset
records to the partition with acks=all, then answer. A timer expires sessions
(``ConsumerGroup.expire`` at ``next_deadline_ms``) and a metadata listener passes partition
counts to the groups and loads or drops shards as leadership moves.

A request for a group whose partition another broker leads answers NOT_COORDINATOR naming that
broker; one that arrives while the shard loads answers COORDINATOR_LOAD_IN_PROGRESS.

A shard holds KIP-848 groups (``ConsumerGroup``) and classic groups (``ClassicGroup``, Kafka's
JoinGroup/SyncGroup protocol) side by side; the classic requests, which park until their
rebalance phase ends, are the ``ClassicGroupRequests`` mixin (``classic_requests.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from brokernodes.errors import SluiceError
from brokernodes.groups import (
    ConsumerGroup,
    GroupIdNotFoundError,
    HeartbeatResponse,
    InvalidGroupRequestError,
    NonEmptyGroupError,
    OffsetAndMetadata,
    OffsetStore,
    TopicPartition,
    delete_group,
    group_records,
    load_records,
    record_diff,
    validate_commit,
)
from brokernodes.groups.assignors import ASSIGNORS
from brokernodes.groups.classic import ClassicConfig, ClassicGroup, ClassicGroupError
from brokernodes.server.coordinator.classic_requests import ClassicGroupRequests
from brokernodes.server.coordinator.offsets_topic import (
    append_records,
    offsets_topic,
    partition_for,
    qualify,
    unqualify,
)
from brokernodes.server.coordinator.txn_offsets import (
    TxnOffsetRequests,
    pending_offsets,
    read_records_txn,
)
from brokernodes.server.metadata.cluster import ClusterMetadata, TopicInfo

if TYPE_CHECKING:
    from brokernodes.server.metadata.cluster import MetadataSource
    from brokernodes.server.replica.manager import ReplicaManager
    from brokernodes.server.replica.partition import Partition

logger = logging.getLogger("sluice.broker.groups")

MIN_SESSION_TIMEOUT_MS = 1_000
MAX_SESSION_TIMEOUT_MS = 300_000
DEFAULT_SESSION_TIMEOUT_MS = 45_000
DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000
MAX_HEARTBEAT_WAIT_MS = 30_000  # the longest a waiting heartbeat is held
TIMER_INTERVAL_S = 0.1


class NotCoordinatorError(SluiceError):
    """Another broker coordinates this group; ``details`` names it."""

    error_code = "NOT_COORDINATOR"

    def __init__(self, message: str, coordinator_id: int, coordinator_url: str | None) -> None:
        super().__init__(message)
        self.details = {"coordinator_id": coordinator_id, "coordinator_url": coordinator_url}


class CoordinatorLoadInProgressError(SluiceError):
    error_code = "COORDINATOR_LOAD_IN_PROGRESS"


class CoordinatorNotAvailableError(SluiceError):
    error_code = "COORDINATOR_NOT_AVAILABLE"


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Shard:
    """One led ``__consumer_offsets`` partition's groups and offsets."""

    partition: int
    leader_epoch: int
    groups: dict[str, ConsumerGroup | ClassicGroup] = field(default_factory=dict)
    offsets: OffsetStore = field(default_factory=OffsetStore)
    written: dict[str, dict[bytes, bytes]] = field(default_factory=dict)  # last snapshots
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    loaded: asyncio.Event = field(default_factory=asyncio.Event)
    failed: bool = False
    # parked classic JoinGroup/SyncGroup requests: (group, member id, "join"|"sync") -> future
    waiters: dict[tuple[str, str, str], asyncio.Future] = field(default_factory=dict)
    # transactional offsets awaiting their producer's marker: producer id -> offsets
    pending_txn: dict[int, dict] = field(default_factory=dict)


@dataclass(frozen=True)
class Coordinator:
    partition: int
    broker_id: int
    url: str | None


def locate(image, topic: TopicInfo | None, qualified: str, missing: str) -> Coordinator:
    """The coordinator of ``qualified`` (a group or transactional id): the leader of its
    partition of ``topic`` (an internal topic of ``image``); ``missing`` says what is
    unavailable while the topic does not exist."""
    if topic is None or not topic.partitions:
        raise CoordinatorNotAvailableError(missing)
    number = partition_for(qualified, len(topic.partitions))
    leader = topic.partitions[number].leader
    return Coordinator(number, leader, image.broker_url(leader) if leader >= 0 else None)


async def loaded_shard(shards: dict, c: Coordinator, broker_id: int, of: str, loading: str):
    """This broker's shard for coordinator ``c`` once it has loaded; NOT_COORDINATOR
    (naming the broker that is) when another broker leads ``c.partition``,
    COORDINATOR_LOAD_IN_PROGRESS after 5 s of loading, COORDINATOR_NOT_AVAILABLE when the
    load failed. ``of`` and ``loading`` name what the shard holds in those messages."""
    shard = shards.get(c.partition)
    if shard is None:
        raise NotCoordinatorError(
            f"broker {broker_id} is not the coordinator of this {of}; "
            + (f"broker {c.broker_id} at {c.url} is" if c.url else "no broker is right now"),
            c.broker_id,
            c.url,
        )
    if not shard.loaded.is_set():
        try:
            await asyncio.wait_for(shard.loaded.wait(), 5)
        except TimeoutError:
            raise CoordinatorLoadInProgressError(
                f"the coordinator is still loading {loading}; retry shortly"
            ) from None
    if shard.failed:
        raise CoordinatorNotAvailableError("the coordinator could not load; retry shortly")
    return shard


class GroupCoordinator(ClassicGroupRequests, TxnOffsetRequests):
    def __init__(
        self,
        metadata: MetadataSource,
        replicas: ReplicaManager,
        classic_config: ClassicConfig | None = None,
    ) -> None:
        self.metadata = metadata
        self.replicas = replicas
        self.classic_config = classic_config or ClassicConfig()
        self.shards: dict[int, Shard] = {}
        self._tasks: list[asyncio.Task] = []
        self._loads: set[asyncio.Task] = set()
        self.on_change: list = []  # callables(qualified group id): WebSocket pushes
        self.client_ids: dict[tuple[str, str], str] = {}  # (group, member) -> client id
        self.client_hosts: dict[tuple[str, str], str] = {}  # (group, member) -> host
        self.known_ends: dict = {}  # (tenant, tp) -> a high watermark seen (commit checks)
        # set (and dropped) when a group's records change: waiting heartbeats look again
        self._group_changed: dict[str, asyncio.Event] = {}

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        await self.on_metadata(self.metadata.global_image())
        self.metadata.add_listener(self.on_metadata)
        self._tasks.append(asyncio.create_task(self._timer(), name="sluice-group-timer"))

    async def close(self) -> None:
        for shard in self.shards.values():  # parked classic requests: find a coordinator
            self._fail_waiters(shard, "COORDINATOR_NOT_AVAILABLE")
        self._wake_waiting()
        for t in [*self._tasks, *self._loads]:
            t.cancel()
        for t in [*self._tasks, *self._loads]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    def _partition(self, image: ClusterMetadata, number: int) -> Partition | None:
        topic = offsets_topic(image)
        if topic is None or number >= len(topic.partitions):
            return None
        info = topic.partitions[number]
        return self.replicas.partitions.get((info.log_key, number))

    async def on_metadata(self, image: ClusterMetadata) -> None:
        """Load shards for newly led partitions, drop those led elsewhere now, and pass
        partition counts to the groups."""
        image = image.root or image
        topic = offsets_topic(image)
        led = {}
        if topic is not None:
            led = {
                p.partition: p.leader_epoch for p in topic.partitions if p.leader == image.broker_id
            }
        for number, shard in list(self.shards.items()):
            if led.get(number) != shard.leader_epoch:
                del self.shards[number]
                self._fail_waiters(shard)
                self._wake_waiting()  # their next look answers NOT_COORDINATOR
                logger.info("no longer coordinating %s-%d", topic and topic.name, number)
        for number, epoch in led.items():
            if number not in self.shards:
                shard = self.shards[number] = Shard(number, epoch)
                task = asyncio.create_task(self._load(shard))
                self._loads.add(task)
                task.add_done_callback(self._loads.discard)
        for shard in list(self.shards.values()):
            if shard.loaded.is_set() and not shard.failed:
                await self._update_counts(shard, image)

    def _reload(self, shard: Shard) -> None:
        """Forget a shard whose memory may differ from its log; load it again."""
        self._fail_waiters(shard)
        if self.shards.get(shard.partition) is not shard:
            return
        fresh = self.shards[shard.partition] = Shard(shard.partition, shard.leader_epoch)
        task = asyncio.create_task(self._load(fresh))
        self._loads.add(task)
        task.add_done_callback(self._loads.discard)

    async def _load(self, shard: Shard) -> None:
        started = time.monotonic()
        for _ in range(200):  # the replica manager may still be opening the partition
            p = self._partition(self.metadata.global_image(), shard.partition)
            if p is not None and p.is_leader:
                break
            await asyncio.sleep(0.05)
        else:
            shard.failed = True
            shard.loaded.set()
            logger.error("__consumer_offsets-%d is not hosted here; cannot load", shard.partition)
            return
        records, pending = await asyncio.to_thread(read_records_txn, p)
        state = load_records(records, now_ms(), classic_config=self.classic_config)
        shard.pending_txn = {pid: pending_offsets(kvs, now_ms()) for pid, kvs in pending.items()}
        shard.groups = state.groups
        shard.offsets = OffsetStore(state.offsets)
        shard.written = {gid: group_records(g) for gid, g in state.groups.items()}
        shard.loaded.set()
        logger.info(
            "loaded __consumer_offsets-%d: %d records, %d groups, %d offsets in %.1f ms",
            shard.partition,
            len(records),
            len(state.groups),
            len(state.offsets),
            (time.monotonic() - started) * 1000,
        )
        await self._update_counts(shard, self.metadata.global_image())

    # --- lookup ------------------------------------------------------------------------

    def coordinator(self, qualified: str) -> Coordinator:
        image = self.metadata.global_image()
        return locate(
            image,
            offsets_topic(image),
            qualified,
            "the __consumer_offsets topic does not exist in this cluster yet; "
            "consumer groups are unavailable until it is created",
        )

    async def shard_for(self, qualified: str) -> Shard:
        return await loaded_shard(
            self.shards,
            self.coordinator(qualified),
            self.metadata.current().broker_id,
            "group",
            "this group's offsets",
        )

    def partition_counts(self, qualified: str, topics: Iterable[str]) -> dict[str, int]:
        tenant, _ = unqualify(qualified)
        root = self.metadata.global_image()
        view = root if tenant is None else root.for_tenant(tenant)
        return {t: len(view.topics[t].partitions) for t in topics if t in view.topics}

    async def _update_counts(self, shard: Shard, image: ClusterMetadata) -> None:
        for gid, group in list(shard.groups.items()):
            counts = self.partition_counts(gid, group.subscribed_topics())
            if counts == group.partition_counts:
                continue
            async with shard.lock:
                group.update_metadata(counts)
                await self._persist(shard, gid)

    # --- writing -----------------------------------------------------------------------

    async def _persist(
        self, shard: Shard, gid: str, extra: Iterable[tuple[bytes, bytes | None]] = ()
    ) -> None:
        """Append the group's changed records (and ``extra``) with acks=all; call under the
        shard's lock, after applying the change in memory. Then answers the parked requests
        a classic group's change completed (only once their outcome is durable), and wakes
        the group's waiting heartbeats if the group changed."""
        group = current = shard.groups.get(gid)
        if group is not None and group.is_empty and not shard.offsets.fetch(gid):
            # an empty group with no committed offsets is gone (Kafka expires it)
            del shard.groups[gid]
            group = None
        after = group_records(group) if group is not None else {}
        records = record_diff(shard.written.get(gid, {}), after)
        changed = bool(records)  # the group itself, not only offsets
        records.extend(extra)
        if records:
            p = self._partition(self.metadata.global_image(), shard.partition)
            if p is None or not p.is_leader:
                self._reload(shard)
                raise CoordinatorNotAvailableError(
                    "this broker stopped leading the group's __consumer_offsets partition"
                )
            try:
                await append_records(p, records)
            except BaseException:
                # memory is ahead of the log now: rebuild the shard from what was written
                self._reload(shard)
                raise
        if group is None:
            shard.written.pop(gid, None)
        else:
            shard.written[gid] = after
        if changed:
            event = self._group_changed.pop(gid, None)
            if event is not None:
                event.set()
        if isinstance(current, ClassicGroup):
            self._resolve(shard, gid, current.drain())
        for callback in self.on_change:
            callback(gid)

    # --- requests ----------------------------------------------------------------------

    async def heartbeat(
        self,
        qualified: str,
        member_id: str | None,
        member_epoch: int,
        *,
        subscriptions: list[str] | None = None,
        owned: list[TopicPartition] | None = None,
        instance_id: str | None = None,
        rebalance_timeout_ms: int | None = None,
        assignor: str | None = None,
        session_timeout_ms: int | None = None,
        heartbeat_interval_ms: int | None = None,
        wait_ms: int = 0,
    ) -> HeartbeatResponse:
        """ConsumerGroupHeartbeat (KIP-848). A join (epoch 0) to a group that does not
        exist creates it with the given assignor and timeouts.

        ``wait_ms`` (Sluice's HTTP heartbeat; Kafka's has none) makes it a long poll: when the
        answer tells a member reporting ``owned`` nothing new (the same epoch, it holds
        exactly its assignment, nothing to revoke), it is held until the group changes in a way the
        member must hear of (``ConsumerGroup.has_news``: partitions to revoke, a pending
        partition released, a new epoch), and then answered as a heartbeat sent at that
        moment would be, or until ``wait_ms`` (at most the group's heartbeat interval) has
        passed, answered as it stands. A member so learns of a rebalance within a round trip
        instead of at its next heartbeat. The session deadline stays where the heartbeat's
        arrival put it."""
        response = await self._heartbeat(
            qualified,
            member_id,
            member_epoch,
            subscriptions=subscriptions,
            owned=owned,
            instance_id=instance_id,
            rebalance_timeout_ms=rebalance_timeout_ms,
            assignor=assignor,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
        )
        if wait_ms <= 0 or owned is None or response.member_epoch <= 0:
            return response
        owned_set = frozenset(TopicPartition(*tp) for tp in owned)
        if (
            response.member_epoch != member_epoch
            or response.assignment != owned_set
            or response.revoking
        ):
            return response  # news already (a new epoch, partitions to take or revoke)
        loop = asyncio.get_running_loop()
        wait_s = min(wait_ms, response.heartbeat_interval_ms, MAX_HEARTBEAT_WAIT_MS) / 1000
        deadline = loop.time() + wait_s
        while True:
            event = self._group_changed.setdefault(qualified, asyncio.Event())
            shard = await self.shard_for(qualified)
            group = shard.groups.get(qualified)
            if not isinstance(group, ConsumerGroup) or group.has_news(
                response.member_id, response.member_epoch, owned_set
            ):
                # as if the member sent the same heartbeat again now (it has seen nothing
                # since: this answer is its next), its session left as it was
                return await self._heartbeat(
                    qualified,
                    response.member_id,
                    response.member_epoch,
                    owned=list(owned_set),
                    renew_session=False,
                )
            remaining = deadline - loop.time()
            if remaining <= 0:
                return response
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except TimeoutError:
                return response

    def _wake_waiting(self) -> None:
        """Wake every waiting heartbeat (leadership moved, or the coordinator stops)."""
        events, self._group_changed = self._group_changed, {}
        for event in events.values():
            event.set()

    async def _heartbeat(
        self,
        qualified: str,
        member_id: str | None,
        member_epoch: int,
        *,
        subscriptions: list[str] | None = None,
        owned: list[TopicPartition] | None = None,
        instance_id: str | None = None,
        rebalance_timeout_ms: int | None = None,
        assignor: str | None = None,
        session_timeout_ms: int | None = None,
        heartbeat_interval_ms: int | None = None,
        renew_session: bool = True,
    ) -> HeartbeatResponse:
        shard = await self.shard_for(qualified)
        async with shard.lock:
            group = shard.groups.get(qualified)
            if isinstance(group, ClassicGroup):
                if not group.is_empty:
                    raise ClassicGroupError(
                        "INCONSISTENT_GROUP_PROTOCOL",
                        "this group id is in use by a classic group with members; "
                        "use another group id",
                    )
                group = None  # an empty classic group: the consumer protocol takes it over
            if group is None:
                if member_epoch != 0:
                    from brokernodes.groups import UnknownMemberIdError

                    raise UnknownMemberIdError(
                        f"member {member_id!r} is not in this group (it does not exist); "
                        "rejoin with member epoch 0"
                    )
                if assignor is not None and assignor not in ASSIGNORS:
                    raise InvalidGroupRequestError(
                        f"unknown assignor {assignor!r}; use one of {', '.join(ASSIGNORS)}"
                    )
                group = ConsumerGroup(
                    qualified,
                    **({"assignor": assignor} if assignor else {}),
                    session_timeout_ms=session_timeout_ms or DEFAULT_SESSION_TIMEOUT_MS,
                    heartbeat_interval_ms=heartbeat_interval_ms or DEFAULT_HEARTBEAT_INTERVAL_MS,
                )
                shard.groups[qualified] = group
            topics = set(group.subscribed_topics()) | set(subscriptions or ())
            group.update_metadata(self.partition_counts(qualified, topics))
            try:
                response = group.heartbeat(
                    member_id,
                    member_epoch,
                    now_ms(),
                    subscriptions=subscriptions,
                    owned=owned,
                    instance_id=instance_id,
                    rebalance_timeout_ms=rebalance_timeout_ms,
                    renew_session=renew_session,
                )
            finally:
                # a failed first join leaves no empty group behind
                fresh = qualified not in shard.written and not shard.offsets.fetch(qualified)
                if not group.members and fresh:
                    shard.groups.pop(qualified, None)
            await self._persist(shard, qualified)
            return response

    async def commit(
        self,
        qualified: str,
        member_id: str | None,
        member_epoch: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        log_end_offsets: Mapping[TopicPartition, int] | None,
        *,
        instance_id: str | None = None,
    ) -> None:
        """OffsetCommit, fenced by member epoch (a zombie gets STALE_MEMBER_EPOCH or
        UNKNOWN_MEMBER_ID); for a classic group ``member_epoch`` is the generation
        (ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID as Kafka's)."""
        shard = await self.shard_for(qualified)
        async with shard.lock:
            group = shard.groups.get(qualified)
            name = unqualify(qualified)[1]
            if isinstance(group, ClassicGroup):
                group.validate_offset_commit(member_id, member_epoch, instance_id)
                member = bool(member_id) or member_epoch >= 0
                if member and log_end_offsets is not None:
                    # a member's commit is not checked against the end (validate_commit's
                    # rule); its partitions must still be known
                    log_end_offsets = {
                        tp: max(end, offsets[tp].offset) if tp in offsets else end
                        for tp, end in log_end_offsets.items()
                    }
                validate_commit(
                    None, None, -1, offsets, group_id=name, log_end_offsets=log_end_offsets
                )
                group.touch(member_id, now_ms())
            else:
                validate_commit(
                    group,
                    member_id,
                    member_epoch,
                    offsets,
                    group_id=name,
                    log_end_offsets=log_end_offsets,
                )
            records = shard.offsets.commit(qualified, offsets)
            await self._persist(shard, qualified, records)

    async def apply_offsets(
        self,
        qualified: str,
        offsets: Mapping[TopicPartition, int],
        deletes: Iterable[TopicPartition] = (),
        *,
        check_empty,
    ) -> None:
        """An admin commit (resets and their undo): only while the group is inactive.
        ``check_empty(group)`` raises when it is not (NON_EMPTY_GROUP)."""
        shard = await self.shard_for(qualified)
        async with shard.lock:
            group = shard.groups.get(qualified)
            check_empty(group)
            ts = now_ms()
            records = shard.offsets.commit(
                qualified,
                {tp: OffsetAndMetadata(o, None, "reset", ts) for tp, o in offsets.items()},
            )
            records += shard.offsets.delete(qualified, list(deletes)) if deletes else []
            await self._persist(shard, qualified, records)

    async def delete(self, qualified: str) -> None:
        shard = await self.shard_for(qualified)
        async with shard.lock:
            group = shard.groups.get(qualified)
            name = unqualify(qualified)[1]
            try:
                records = delete_group(qualified, group, shard.offsets)
            except GroupIdNotFoundError:
                raise GroupIdNotFoundError(f"consumer group {name!r} does not exist") from None
            except NonEmptyGroupError:
                raise NonEmptyGroupError(
                    f"group {name!r} has members; stop its consumers before deleting it"
                ) from None
            shard.groups.pop(qualified, None)
            shard.written.pop(qualified, None)
            self.forget_members(qualified, [m for g, m in list(self.client_ids) if g == qualified])
            self.forget_members(
                qualified, [m for g, m in list(self.client_hosts) if g == qualified]
            )
            p = self._partition(self.metadata.global_image(), shard.partition)
            if p is None or not p.is_leader:
                raise CoordinatorNotAvailableError("lost leadership of the group's partition")
            await append_records(p, records)

    async def fetch_offsets(
        self, qualified: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        shard = await self.shard_for(qualified)
        return shard.offsets.fetch(qualified, partitions)

    async def group(self, qualified: str) -> tuple[ConsumerGroup | None, dict]:
        """(the group or None, its committed offsets); GROUP_ID_NOT_FOUND if neither."""
        shard = await self.shard_for(qualified)
        group = shard.groups.get(qualified)
        offsets = shard.offsets.fetch(qualified)
        if group is None and not offsets:
            raise GroupIdNotFoundError(f"consumer group {unqualify(qualified)[1]!r} does not exist")
        return group, offsets

    def local_groups(self, tenant: str | None, *, all_tenants: bool = False) -> list[str]:
        """Qualified ids of the groups coordinated here (the tenant's, or all)."""
        out = set()
        for shard in self.shards.values():
            if not shard.loaded.is_set():
                continue
            for gid in set(shard.groups) | shard.offsets.groups():
                t, _ = unqualify(gid)
                if all_tenants or t == tenant:
                    out.add(gid)
        return sorted(out)

    # --- timer -------------------------------------------------------------------------

    async def _timer(self) -> None:
        while True:
            await asyncio.sleep(TIMER_INTERVAL_S)
            await self.expire_sessions(now_ms())

    async def expire_sessions(self, now: int) -> None:
        """Fence the members whose deadlines passed by ``now`` (and end classic join or
        sync phases that timed out), persisting the groups that changed; the fenced
        members' client ids and hosts are forgotten."""
        for shard in list(self.shards.values()):
            if not shard.loaded.is_set() or shard.failed:
                continue
            for gid, group in list(shard.groups.items()):
                deadline = group.next_deadline_ms()
                if deadline is None or deadline > now:
                    continue
                try:
                    async with shard.lock:
                        if shard.groups.get(gid) is not group:
                            continue
                        fenced = group.expire(now)
                        if fenced:
                            logger.info("group %s: session expired for %s", gid, fenced)
                            self.forget_members(gid, fenced)
                        if fenced or isinstance(group, ClassicGroup):
                            # a classic group's join or sync phase may have ended too
                            await self._persist(shard, gid)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    logger.exception("expiring members of group %s failed", gid)

    def forget_members(self, qualified: str, member_ids) -> None:
        """Drop what describe remembers of members that are gone (client id, host)."""
        for member_id in member_ids:
            self.client_ids.pop((qualified, member_id), None)
            self.client_hosts.pop((qualified, member_id), None)


def session_timeout(value: int | None) -> int | None:
    if value is None:
        return None
    if not MIN_SESSION_TIMEOUT_MS <= value <= MAX_SESSION_TIMEOUT_MS:
        raise InvalidGroupRequestError(
            f"session_timeout_ms must be between {MIN_SESSION_TIMEOUT_MS} and "
            f"{MAX_SESSION_TIMEOUT_MS}, got {value}"
        )
    return value


__all__ = [
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "GroupCoordinator",
    "NotCoordinatorError",
    "qualify",
]
