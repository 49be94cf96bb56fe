"""Kafka's group messages to and from the group coordinator's objects (pure: no I/O).

The consumer protocol (KIP-848) names topics by id, the coordinator by name: ``TopicIds``
maps both ways within the caller's view, so a tenant resolves only its own topics. The rest
builds answers: a heartbeat's assignment, a ConsumerGroupDescribe group, ListGroups rows with
Kafka's state and type filters, and the authorized-operations bit field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from brokernodes.groups import TopicPartition
from brokernodes.server.protocol.kafka.codec import uuid_bytes

if TYPE_CHECKING:
    from brokernodes.groups.group import HeartbeatResponse
    from brokernodes.server.coordinator.service import GroupListing
    from brokernodes.server.metadata.cluster import ClusterMetadata

ZERO_UUID = bytes(16)
# A member waiting for partitions others still hold learns of their release only at its
# next heartbeat, so it is asked to heartbeat this many times as often meanwhile.
PENDING_SPEEDUP = 5
MIN_HEARTBEAT_INTERVAL_MS = 100
# Kafka's AclOperation codes of the operations a group has (the authorized-operations bits)
GROUP_OPERATIONS = {"READ": 3, "DELETE": 6, "DESCRIBE": 8}
AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)


class TopicIds:
    """Topic names and ids, both ways, within one metadata view."""

    def __init__(self, view: ClusterMetadata) -> None:
        self.view = view
        self._names: dict[bytes, str] | None = None

    def id_of(self, name: str) -> bytes:
        topic = self.view.topics.get(name)
        return uuid_bytes(topic.topic_id) if topic is not None else ZERO_UUID

    def name_of(self, topic_id: bytes) -> str | None:
        if self._names is None:
            self._names = {uuid_bytes(t.topic_id): name for name, t in self.view.topics.items()}
            self._names.pop(ZERO_UUID, None)
        return self._names.get(bytes(topic_id))


def owned_partitions(
    topics: Sequence[Mapping] | None, ids: TopicIds
) -> list[TopicPartition] | None:
    """A heartbeat's ``TopicPartitions`` (by topic id) as partitions by name; ``None`` stays
    ``None`` (unchanged since the last heartbeat). Ids of topics this view does not have
    (deleted since) are dropped: nobody can be assigned them any more."""
    if topics is None:
        return None
    out = []
    for entry in topics:
        name = ids.name_of(entry["topic_id"])
        if name is not None:
            out.extend(TopicPartition(name, p) for p in entry["partitions"])
    return out


def topic_partitions(
    tps: Iterable[Sequence], ids: TopicIds, *, with_names: bool = False
) -> list[dict]:
    """Partitions grouped by topic, as Kafka's ``TopicPartitions`` (topic id, and with
    ``with_names`` the name too), topics and partitions sorted."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, []).append(partition)
    out = []
    for topic in sorted(by_topic):
        entry: dict = {"topic_id": ids.id_of(topic), "partitions": sorted(by_topic[topic])}
        if with_names:
            entry["topic_name"] = topic
        out.append(entry)
    return out


def heartbeat_interval(r: HeartbeatResponse) -> int:
    """The interval to tell the member: shorter while partitions it is promised are still
    held by others, so it picks them up soon after they are released."""
    if r.pending:
        return max(MIN_HEARTBEAT_INTERVAL_MS, r.heartbeat_interval_ms // PENDING_SPEEDUP)
    return r.heartbeat_interval_ms


def heartbeat_answer(r: HeartbeatResponse, ids: TopicIds) -> dict:
    """ConsumerGroupHeartbeat's answer. The assignment is what the member may consume now:
    partitions it must revoke are left out (it revokes them and reports what it owns), and
    partitions still held by others come in a later answer. A member leaving gets none."""
    answer: dict = {
        "error_code": 0,
        "member_id": r.member_id,
        "member_epoch": r.member_epoch,
        "heartbeat_interval_ms": heartbeat_interval(r) if r.member_epoch >= 0 else 0,
    }
    if r.member_epoch >= 0:
        answer["assignment"] = {"topic_partitions": topic_partitions(r.assignment, ids)}
    return answer


def client_host(host: str | None) -> str:
    """A member's host as Kafka shows it (``InetAddress.toString``: ``/127.0.0.1``)."""
    return f"/{host}" if host else ""


def described_member(
    member: Mapping, client_id: str | None, host: str | None, ids: TopicIds
) -> dict:
    """One member of ``ConsumerGroup.describe()`` as ConsumerGroupDescribe's ``Member``."""
    return {
        "member_id": member["member_id"],
        "instance_id": member["instance_id"],
        "rack_id": None,
        "member_epoch": member["member_epoch"],
        "client_id": client_id or "",
        "client_host": client_host(host),
        "subscribed_topic_names": list(member["subscriptions"]),
        "subscribed_topic_regex": None,
        "assignment": {
            "topic_partitions": topic_partitions(member["assignment"], ids, with_names=True)
        },
        "target_assignment": {
            "topic_partitions": topic_partitions(member["target"], ids, with_names=True)
        },
    }


def described_group(
    group_id: str, desc: Mapping, members: list[dict], authorized_operations: int
) -> dict:
    """ConsumerGroupDescribe's ``DescribedGroup`` from ``ConsumerGroup.describe()``."""
    return {
        "error_code": 0,
        "error_message": None,
        "group_id": group_id,
        "group_state": str(desc["state"]).capitalize(),
        "group_epoch": desc["group_epoch"],
        "assignment_epoch": desc["assignment_epoch"],
        "assignor_name": desc["assignor"],
        "members": members,
        "authorized_operations": authorized_operations,
    }


def failed_group(group_id: str, error_code: int, message: str | None) -> dict:
    return {
        "error_code": error_code,
        "error_message": message,
        "group_id": group_id,
        "group_state": "",
        "group_epoch": -1,
        "assignment_epoch": -1,
        "assignor_name": "",
        "members": [],
    }


def authorized_operations(allowed: Iterable[str]) -> int:
    """Kafka's bit field of the operations in ``allowed`` (bit n = AclOperation code n)."""
    bits = 0
    for op in allowed:
        bits |= 1 << GROUP_OPERATIONS[op]
    return bits


def listed_groups(
    listings: Iterable[GroupListing],
    states: Sequence[str] | None = None,
    types: Sequence[str] | None = None,
) -> list[dict]:
    """ListGroups' rows, kept by the states (v4+) and types (v5+) filters; both compare
    case-insensitively, as Kafka's coordinator does, and an empty filter keeps all."""
    want_states = {s.lower() for s in states or ()}
    want_types = {t.lower() for t in types or ()}
    out = []
    for g in sorted(listings, key=lambda g: g.group_id):
        if want_states and g.state.lower() not in want_states:
            continue
        if want_types and g.group_type.lower() not in want_types:
            continue
        out.append(
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.state,
                "group_type": g.group_type,
            }
        )
    return out
