"""The group service: what the group routes do once a request is parsed and authorized.

The HTTP handlers (``http.groups``, public and internal routes alike) and the Kafka
handlers (``kafka.handlers.groups``) parse, authorize and answer; the work behind them lives
here, over the ``GroupCoordinator``: describing a group with its lag, listing the groups
coordinated here (consumer-protocol and classic ones alike), checking admin commits against
log ends, deleting offsets, and planning or applying offset resets. Log ends of partitions
anywhere in the cluster come from the ``LogOffsetsReader`` it is given
(``http.log_offsets.log_offsets`` bound to the broker), so this module does no HTTP of its
own.

Group ids are tenant-relative here; the service qualifies them (``<tenant>/<group>``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from brokernodes.errors import SluiceError
from brokernodes.groups import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ConsumerGroup,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    NonEmptyGroupError,
    OffsetAndMetadata,
    PartitionOffsets,
    ResetSpec,
    TopicPartition,
    plan_reset,
)
from brokernodes.groups.classic import ClassicGroup
from brokernodes.groups.lag import offset_lag, time_lag_ms
from brokernodes.server.auth import current_client_host
from brokernodes.server.coordinator.group_coordinator import now_ms
from brokernodes.server.coordinator.offsets_topic import qualify, unqualify
from brokernodes.server.protocol.log_offsets import LogOffsets, Query

if TYPE_CHECKING:
    from brokernodes.groups.group import HeartbeatResponse
    from brokernodes.server.coordinator.group_coordinator import Coordinator, GroupCoordinator
    from brokernodes.server.metadata.cluster import ClusterMetadata

# (the caller's view, the questions, the caller's Authorization header) -> the answers
# found (a partition missing from them is unknown or its leader did not answer)
LogOffsetsReader = Callable[
    ["ClusterMetadata", Iterable[Query], "str | None"],
    Awaitable[dict[tuple[str, int], LogOffsets]],
]

HEALTH_WARN_MS = 10_000
HEALTH_ERR_MS = 60_000
HEALTH_STALL_MS = 300_000


def health(members: int, total_lag: int, max_time_lag: int | None, has_offsets: bool) -> str:
    """Burrow-like status: EMPTY/STOP without members, else by how old the next record is."""
    if members == 0:
        return "STOP" if total_lag > 0 else "EMPTY"
    t = max_time_lag or 0
    if total_lag > 0 and t >= HEALTH_STALL_MS:
        return "STALL"
    if t >= HEALTH_ERR_MS:
        return "ERR"
    if t >= HEALTH_WARN_MS:
        return "WARN"
    return "OK"


def bare_host(host: str | None) -> str | None:
    """A member's IP address without the leading ``/`` Kafka's describe shows
    (``InetAddress.toString``); ``None`` when unknown."""
    return (host.removeprefix("/") or None) if host else None


def require_inactive(group) -> None:
    """Offsets are reset only while the group has no members (NON_EMPTY_GROUP)."""
    if group is not None and not group.is_empty:
        raise NonEmptyGroupError(
            f"the group has {len(group.members)} member(s); offsets can be reset only while "
            "it is inactive: stop its consumers first"
        )


@dataclass(frozen=True, slots=True)
class GroupListing:
    """One group as Kafka's ListGroups names it."""

    group_id: str  # tenant-relative
    group_type: str  # "consumer" (KIP-848) or "classic"
    protocol_type: str  # "consumer"; "" for a group that only has committed offsets
    state: str  # Kafka's state name ("Stable", "Empty", "Reconciling", ...)


def listing(group_id: str, group: ConsumerGroup | ClassicGroup | None) -> GroupListing:
    """How ListGroups shows ``group`` (``None``: only committed offsets, which Kafka shows as
    an empty classic group with no protocol type)."""
    if isinstance(group, ConsumerGroup):
        return GroupListing(group_id, "consumer", "consumer", group.state.value.capitalize())
    if isinstance(group, ClassicGroup):
        return GroupListing(group_id, "classic", group.protocol_type or "", group.state_name)
    return GroupListing(group_id, "classic", "", "Empty")


def subscribed_topics(group: object | None) -> frozenset[str]:
    """The topics the group's members subscribe to (none for a group without members)."""
    topics = getattr(group, "subscribed_topics", None)
    return frozenset(topics()) if callable(topics) else frozenset()


class _SubscriptionsChanged(Exception):
    """A member subscribed to a topic between planning an offset delete and applying it."""


def _tp_json(tps) -> list[dict[str, object]]:
    return [{"topic": t, "partition": p} for t, p in tps]


class GroupService:
    def __init__(self, coordinator: GroupCoordinator, read_log_offsets: LogOffsetsReader) -> None:
        self.coordinator = coordinator
        self.read_log_offsets = read_log_offsets
        # (qualified group, member id) -> the member's host: the coordinator's, so every
        # service over it (the HTTP and Kafka fronts each make one) shares it, and members
        # whose sessions expire are forgotten with their client ids
        self.client_hosts: dict[tuple[str, str], str] = coordinator.client_hosts

    def view(self, tenant: str | None) -> ClusterMetadata:
        """The cluster as ``tenant`` sees it (all of it for the control plane's ``None``)."""
        root = self.coordinator.metadata.global_image()
        return root if tenant is None else root.for_tenant(tenant)

    # --- members ---------------------------------------------------------------------

    async def heartbeat(
        self,
        tenant: str | None,
        group_id: str,
        member_id: str | None,
        member_epoch: int,
        *,
        client_id: str | None = None,
        client_host: str | None = None,
        **options,
    ) -> HeartbeatResponse:
        """ConsumerGroupHeartbeat; remembers the member's client id and host for describe
        (and forgets them when it leaves). Without ``client_host``, the address the request
        came from (which both fronts set for the ACLs' host match)."""
        qualified = qualify(tenant, group_id)
        client_host = client_host or current_client_host.get()
        response = await self.coordinator.heartbeat(qualified, member_id, member_epoch, **options)
        key = (qualified, response.member_id)
        if response.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            self.coordinator.client_ids.pop(key, None)
            self.client_hosts.pop(key, None)
        else:
            if client_id:
                self.coordinator.client_ids[key] = client_id
            if client_host:
                self.client_hosts[key] = client_host
        return response

    async def commit(
        self,
        tenant: str | None,
        group_id: str,
        member_id: str | None,
        member_epoch: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        auth: str | None,
        *,
        instance_id: str | None = None,
    ) -> None:
        """OffsetCommit. Every partition must exist (UNKNOWN_TOPIC_OR_PARTITION). A member's
        commit is not checked against the log end (``validate_commit`` says why), so it asks
        nobody; an admin commit (no member) must not pass the high watermark, and asks the
        leaders for it only where an offset passes the last end seen (ends only grow).
        ``instance_id``: a classic static member's ``group.instance.id``."""
        coordinator = self.coordinator
        view = self.view(tenant)
        for tp in offsets:
            view.partition(tp.topic, tp.partition)  # UNKNOWN_TOPIC_OR_PARTITION
        ends: dict[TopicPartition, int] | None = None
        if not member_id:
            ends = await self._log_ends(tenant, view, offsets, auth)
        extra = {} if instance_id is None else {"instance_id": instance_id}
        await coordinator.commit(
            qualify(tenant, group_id), member_id, member_epoch, offsets, ends, **extra
        )

    async def _log_ends(
        self,
        tenant: str | None,
        view: ClusterMetadata,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        auth: str | None,
    ) -> dict[TopicPartition, int]:
        known_ends = self.coordinator.known_ends
        ends: dict[TopicPartition, int] = {}
        need = []
        for tp, om in offsets.items():
            known = known_ends.get((tenant, tp))
            if known is not None and om.offset <= known:
                ends[tp] = known
            else:
                need.append(tp)
        if need:
            found = await self.read_log_offsets(
                view, [Query(tp.topic, tp.partition) for tp in need], auth
            )
            for tp in need:
                lo = found.get((tp.topic, tp.partition))
                if lo is None:
                    raise SluiceError(f"the leader of {tp.topic}-{tp.partition} did not answer")
                ends[tp] = known_ends[(tenant, tp)] = lo.high_watermark
        return ends

    # --- reads -----------------------------------------------------------------------

    async def fetch_offsets(
        self, tenant: str | None, group_id: str
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        return await self.coordinator.fetch_offsets(qualify(tenant, group_id))

    def find_coordinator(self, tenant: str | None, group_id: str) -> Coordinator:
        return self.coordinator.coordinator(qualify(tenant, group_id))

    async def list_groups(self, tenant: str | None) -> list[GroupListing]:
        """The groups this broker coordinates for ``tenant`` (Kafka's ListGroups)."""
        out = []
        for qualified in self.coordinator.local_groups(tenant):
            try:
                group, _ = await self.coordinator.group(qualified)
            except SluiceError:
                continue  # deleted meanwhile, or no longer coordinated here
            out.append(listing(unqualify(qualified)[1], group))
        return out

    async def consumer_group(self, tenant: str | None, group_id: str) -> ConsumerGroup:
        """The consumer-protocol (KIP-848) group ``group_id``, for ConsumerGroupDescribe.
        GROUP_ID_NOT_FOUND when there is none or it is a classic group, as Kafka answers
        (clients then ask DescribeGroups)."""
        group, _ = await self.coordinator.group(qualify(tenant, group_id))
        if not isinstance(group, ConsumerGroup):
            raise GroupIdNotFoundError(f"group {group_id!r} is not a consumer-protocol group")
        return group

    def member_client(
        self, tenant: str | None, group_id: str, member_id: str
    ) -> tuple[str | None, str | None]:
        """(client id, client host) a member last heartbeated with, where known."""
        key = (qualify(tenant, group_id), member_id)
        return self.coordinator.client_ids.get(key), self.client_hosts.get(key)

    async def describe(self, tenant: str | None, group_id: str, auth: str | None) -> dict:
        """The group, its members, and per partition committed offset, log end and lag."""
        coordinator = self.coordinator
        qualified = qualify(tenant, group_id)
        group, offsets = await coordinator.group(qualified)
        view = self.view(tenant)
        tps = set(offsets)
        if group is not None:
            for topic in group.subscribed_topics():
                if topic in view.topics:
                    tps.update(
                        TopicPartition(topic, p) for p in range(len(view.topics[topic].partitions))
                    )
        queries = [
            Query(
                tp.topic, tp.partition, timestamp_at=offsets[tp].offset if tp in offsets else None
            )
            for tp in tps
        ]
        ends = await self.read_log_offsets(view, queries, auth)
        now = now_ms()
        rows = []
        for tp in sorted(tps):
            committed = offsets[tp].offset if tp in offsets else None
            lo = ends.get((tp.topic, tp.partition))
            end = lo.high_watermark if lo else None
            rows.append(
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "committed_offset": committed,
                    "log_end_offset": end,
                    "lag": None if end is None else offset_lag(committed, end),
                    "time_lag_ms": None
                    if end is None
                    else time_lag_ms(committed, end, lambda _o, lo=lo: lo.timestamp, now),
                    "metadata": offsets[tp].metadata if tp in offsets else None,
                }
            )
        members = []
        desc = group.describe() if group is not None else {}
        for m in desc.get("members", []):
            key = (qualified, m["member_id"])
            members.append(
                {
                    "member_id": m["member_id"],
                    "client_id": m.get("client_id") or coordinator.client_ids.get(key),
                    "client_host": bare_host(m.get("client_host") or self.client_hosts.get(key)),
                    "instance_id": m["instance_id"],
                    "member_epoch": m["member_epoch"],
                    "state": m["state"],
                    "subscriptions": m["subscriptions"],
                    "assignments": _tp_json(m["assignment"]),
                    "revoking": _tp_json(m["revoking"]),
                }
            )
        total = sum(r["lag"] or 0 for r in rows)
        times = [r["time_lag_ms"] for r in rows if r["time_lag_ms"] is not None]
        max_time = max(times, default=None)
        c = coordinator.coordinator(qualified)
        state = desc.get("state", "empty")
        return {
            "group_id": group_id,
            "type": "consumer" if isinstance(group, ConsumerGroup) else "classic",
            "state": str(state).upper(),
            "coordinator": c.broker_id,
            "group_epoch": desc.get("group_epoch", 0),
            "assignor": desc.get("assignor"),
            "members": members,
            "offsets": rows,
            "total_lag": total,
            "max_time_lag_ms": max_time,
            "health": health(len(members), total, max_time, bool(offsets)),
        }

    async def list_summaries(self, tenant: str | None, auth: str | None) -> list[dict]:
        """The groups this broker coordinates for ``tenant``, with state, members and lag."""
        out = []
        for qualified in self.coordinator.local_groups(tenant):
            _, gid = unqualify(qualified)
            try:
                d = await self.describe(tenant, gid, auth)
            except SluiceError:
                continue
            out.append(
                {
                    "group_id": gid,
                    "type": d["type"],
                    "state": d["state"],
                    "members": len(d["members"]),
                    "total_lag": d["total_lag"],
                    "health": d["health"],
                    "coordinator": d["coordinator"],
                }
            )
        return out

    # --- changes ---------------------------------------------------------------------

    async def delete(self, tenant: str | None, group_id: str) -> None:
        await self.coordinator.delete(qualify(tenant, group_id))

    async def delete_offsets(
        self, tenant: str | None, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, SluiceError | None]:
        """OffsetDelete: drop the group's committed offsets of ``partitions``, except those of
        topics its members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC for each of those). A
        partition with no committed offset counts as deleted. GROUP_ID_NOT_FOUND when the
        group does not exist. The subscriptions are checked again under the group's lock,
        so a member subscribing meanwhile never loses its offsets."""
        coordinator = self.coordinator
        qualified = qualify(tenant, group_id)
        wanted = sorted(set(partitions))
        for _attempt in range(5):
            group, _ = await coordinator.group(qualified)
            busy = subscribed_topics(group)
            deletes = [tp for tp in wanted if tp.topic not in busy]
            topics = {tp.topic for tp in deletes}

            def unchanged(current, topics=topics) -> None:
                if subscribed_topics(current) & topics:
                    raise _SubscriptionsChanged

            try:
                if deletes:
                    await coordinator.apply_offsets(qualified, {}, deletes, check_empty=unchanged)
            except _SubscriptionsChanged:
                continue
            return {
                tp: GroupSubscribedToTopicError(
                    f"group {group_id!r} has members subscribed to {tp.topic!r}; "
                    "its offsets can be deleted once they unsubscribe"
                )
                if tp.topic in busy
                else None
                for tp in wanted
            }
        raise GroupSubscribedToTopicError(
            f"the subscriptions of group {group_id!r} keep changing; retry the offset delete"
        )

    async def reset_offsets(
        self,
        tenant: str | None,
        group_id: str,
        topic: str,
        partitions: list[int] | None,
        spec: ResetSpec,
        *,
        dry_run: bool,
        auth: str | None,
    ) -> dict:
        """Plan (dry run) or apply a reset of ``topic``'s offsets (``partitions``, or all of
        them) over each partition's log start, high watermark and committed offset; the
        answer lists per partition the current and target offsets, so a dry run shows
        exactly what applying does."""
        coordinator = self.coordinator
        qualified = qualify(tenant, group_id)
        shard = await coordinator.shard_for(qualified)
        group = shard.groups.get(qualified)
        view = self.view(tenant)
        committed = shard.offsets.fetch(qualified)
        info = view.topic(topic)
        if partitions is None:
            numbers = list(range(len(info.partitions)))
        else:
            numbers = sorted(set(partitions))
            for p in numbers:
                view.partition(topic, p)
        now = now_ms()
        ts = None
        if spec.strategy.value == "to-datetime":
            ts = spec.value
        elif spec.strategy.value == "by-duration":
            ts = now - spec.value
        ends = await self.read_log_offsets(
            view, [Query(topic, p, offset_at=ts) for p in numbers], auth
        )
        found = {}
        for p in numbers:
            lo = ends.get((topic, p))
            if lo is None:
                raise SluiceError(f"the leader of {topic}-{p} did not answer; retry shortly")
            tp = TopicPartition(topic, p)
            found[tp] = PartitionOffsets(
                lo.log_start_offset,
                lo.high_watermark,
                committed[tp].offset if tp in committed else None,
            )

        def offset_for_timestamp(tp: TopicPartition, _ts: int) -> int | None:
            return ends[(tp.topic, tp.partition)].offset_for_time

        plan = plan_reset(group_id, group, spec, found, offset_for_timestamp, now)
        if not dry_run:
            await coordinator.apply_offsets(qualified, plan.offsets(), check_empty=require_inactive)
        return {
            "plan": [
                {
                    "topic": e.tp.topic,
                    "partition": e.tp.partition,
                    "current": e.previous,
                    "target": e.new,
                    "delta": None if e.previous is None else e.new - e.previous,
                    "log_start_offset": e.log_start_offset,
                    "log_end_offset": e.log_end_offset,
                }
                for e in plan.entries
            ],
            "applied": not dry_run,
        }

    async def set_offsets(
        self,
        tenant: str | None,
        group_id: str,
        targets: Mapping[TopicPartition, int],
        deletes: Iterable[TopicPartition],
        *,
        dry_run: bool,
    ) -> dict:
        """Explicit offsets (``None`` deletes): the undo of an earlier reset, planned or
        applied like one."""
        coordinator = self.coordinator
        qualified = qualify(tenant, group_id)
        shard = await coordinator.shard_for(qualified)
        group = shard.groups.get(qualified)
        committed = shard.offsets.fetch(qualified)
        deletes = list(deletes)
        require_inactive(group)
        plan_rows = [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "current": committed[tp].offset if tp in committed else None,
                "target": targets.get(tp),
                "delta": None
                if tp not in committed or tp not in targets
                else targets[tp] - committed[tp].offset,
            }
            for tp in sorted(set(targets) | set(deletes))
        ]
        if not dry_run:
            await coordinator.apply_offsets(
                qualified, targets, deletes, check_empty=require_inactive
            )
        return {"plan": plan_rows, "applied": not dry_run}
