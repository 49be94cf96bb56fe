"""Metadata (v0-12): the brokers with a Kafka listener, the controller clients send admin
requests to, and the caller's topics with their partitions' leaders, epochs and replicas.

The answer is built by pure functions over a metadata image (``brokers_of``,
``controller_of``, ``partition_entry``); the handler only authorizes. Topics are never
created by a Metadata request (``allow_auto_topic_creation`` is ignored): they are created
through the control plane or CreateTopics, so an unknown name answers
UNKNOWN_TOPIC_OR_PARTITION. Internal topics (``__consumer_offsets``, ``__usage``) are never
shown. Listing every topic shows those the principal may DESCRIBE; naming one it may not
answers TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from brokernodes.errors import SluiceError
from brokernodes.server.kafka.acl_codes import operation_bit
from brokernodes.server.kafka.context import Handler, KafkaContext
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from brokernodes.server.protocol.kafka.codec import ZERO_UUID, uuid_bytes

if TYPE_CHECKING:
    from brokernodes.server.metadata.cluster import (
        BrokerInfo,
        ClusterMetadata,
        PartitionInfo,
        TopicInfo,
    )
    from brokernodes.server.protocol.kafka.frames import RequestHeader

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__usage", "__transaction_state"})


def split_address(address: str) -> tuple[str, int] | None:
    """``"host:port"`` (``"[v6]:port"`` too) -> (host, port); None when unreadable."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def brokers_of(brokers: Mapping[int, BrokerInfo]) -> list[dict]:
    """The brokers clients can reach: those naming a Kafka listener, by id."""
    out = []
    for b in sorted(brokers.values(), key=lambda b: b.id):
        address = split_address(b.kafka) if b.kafka else None
        if address is not None:
            out.append({"node_id": b.id, "host": address[0], "port": address[1], "rack": None})
    return out


def leader_hint(image: ClusterMetadata, topic: str, partition: int) -> tuple[dict, dict | None]:
    """KIP-951: the partition's current leader and epoch for a NOT_LEADER_OR_FOLLOWER or
    FENCED_LEADER_EPOCH answer, and the leader's endpoint (None when it has none), so a
    client moves to the new leader without a Metadata round trip."""
    try:
        info = image.partition(topic, partition)
    except SluiceError:
        return {"leader_id": -1, "leader_epoch": -1}, None
    broker = image.brokers.get(info.leader)
    address = split_address(broker.kafka) if broker is not None and broker.kafka else None
    leader = {"leader_id": info.leader if address else -1, "leader_epoch": info.leader_epoch}
    if address is None or broker is None or broker.fenced:
        return leader, None
    return leader, {"node_id": broker.id, "host": address[0], "port": address[1], "rack": None}


def live_ids(brokers: Mapping[int, BrokerInfo]) -> set[int]:
    """Brokers a client can use: with a Kafka listener and not fenced."""
    return {b.id for b in brokers.values() if b.kafka and not b.fenced}


def up_ids(brokers: Mapping[int, BrokerInfo]) -> set[int]:
    """Brokers in the image and not fenced (their replicas are not offline)."""
    return {b.id for b in brokers.values() if not b.fenced}


def controller_of(brokers: Mapping[int, BrokerInfo]) -> int:
    """The "controller" clients send admin requests to: any broker answers them, so the
    lowest live one (-1 when none)."""
    live = live_ids(brokers)
    return min(live) if live else -1


def partition_entry(
    info: PartitionInfo, live: set[int], up: Iterable[int], isr: tuple[int, ...] | None = None
) -> dict:
    """One partition of a topic's answer: LEADER_NOT_AVAILABLE (leader -1) when its leader
    is unknown, fenced or unreachable over Kafka; offline replicas are those on brokers
    missing from the image or fenced (``up``: the others)."""
    up = up if isinstance(up, set) else set(up)
    leader = info.leader if info.leader in live else -1
    return {
        "error_code": kerr.NONE if leader >= 0 else kerr.LEADER_NOT_AVAILABLE,
        "partition_index": info.partition,
        "leader_id": leader,
        "leader_epoch": info.leader_epoch,
        "replica_nodes": list(info.replicas),
        "isr_nodes": list(info.isr if isr is None else isr),
        "offline_replicas": [r for r in info.replicas if r not in up],
    }


def topic_entry(
    topic: TopicInfo,
    live: set[int],
    up: Iterable[int],
    isr_of: Callable[[PartitionInfo], tuple[int, ...] | None] = lambda p: None,
) -> dict:
    up = set(up)
    return {
        "error_code": kerr.NONE,
        "name": topic.name,
        "topic_id": uuid_bytes(topic.topic_id),
        "is_internal": False,
        "partitions": [partition_entry(p, live, up, isr_of(p)) for p in topic.partitions],
    }


def error_topic(error: int, name: str | None, topic_id: bytes | None = None) -> dict:
    entry: dict = {"error_code": error, "name": name, "is_internal": False, "partitions": []}
    if topic_id is not None:
        entry["topic_id"] = topic_id
    return entry


_BY_ID: list = [None, {}]  # [the image, its topics by 16-byte id]: the last image asked


def topics_by_id(image: ClusterMetadata) -> dict[bytes, TopicInfo]:
    """The image's topics by protocol topic id (computed once per image)."""
    cached_image, by_id = _BY_ID
    if cached_image is not image:
        by_id = {uuid_bytes(t.topic_id): t for t in image.topics.values() if t.topic_id}
        _BY_ID[:] = [image, by_id]
    return by_id


def find_by_id(image: ClusterMetadata, topic_id: bytes) -> TopicInfo | None:
    return topics_by_id(image).get(topic_id)


TOPIC_OPERATIONS = (
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
)


CLUSTER_OPERATIONS = (
    "CREATE",
    "ALTER",
    "DESCRIBE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
)


def cluster_operations(ctx: KafkaContext) -> int:
    """Kafka's bit field of the operations the caller may perform on the cluster (Metadata
    v8-10 when asked, DescribeCluster)."""
    bits = 0
    for op in CLUSTER_OPERATIONS:
        try:
            ctx.authorize(op, "cluster", count=False)
        except SluiceError:
            continue
        bits |= operation_bit(op)
    return bits


def topic_operations(ctx: KafkaContext, name: str) -> int:
    """Kafka's bit field of the operations the caller may perform on a topic (asked for
    with ``include_topic_authorized_operations``, v8+)."""
    bits = 0
    for op in TOPIC_OPERATIONS:
        try:
            ctx.authorize(op, "topic", name, count=False)
        except SluiceError:
            continue
        bits |= operation_bit(op)
    return bits


def requested_names(version: int, topics: list | None) -> list[dict] | None:
    """The request's topics, or None for "every topic" (v0: an empty list; v1+: null)."""
    if topics is None or (version == 0 and not topics):
        return None
    return topics


ZERO_ID = ZERO_UUID  # a topic named by name, not by id


def named_topic(
    image: ClusterMetadata, name: str | None, topic_id: bytes, describable: Callable[[str], int]
) -> tuple[TopicInfo | None, dict]:
    """A requested topic (by name, or by id when the name is null, v10+): the topic, or
    None and its error entry (unknown, not describable, internal)."""
    topic = None
    if name is None and topic_id != ZERO_ID:
        topic = find_by_id(image, topic_id)
        if topic is None or topic.name in INTERNAL_TOPICS:
            return None, error_topic(kerr.UNKNOWN_TOPIC_ID, None, topic_id)
        name = topic.name
    if name is None:
        return None, error_topic(kerr.INVALID_TOPIC_EXCEPTION, None, topic_id)
    error = describable(name)  # before existence: a refused name learns nothing
    if error != kerr.NONE:
        return None, error_topic(error, name, topic_id)
    topic = topic or (None if name in INTERNAL_TOPICS else image.topics.get(name))
    if topic is None:
        return None, error_topic(kerr.UNKNOWN_TOPIC_OR_PARTITION, name, topic_id)
    return topic, {}


async def metadata(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    ctx.authorize("DESCRIBE", "cluster")  # authenticates and sets the tenant
    broker = ctx.broker
    image = broker.image
    live = live_ids(image.brokers)
    up = up_ids(image.brokers)
    me = image.broker_id

    def isr_of(p: PartitionInfo) -> tuple[int, ...] | None:
        # the leader's own committed ISR is newer than the image's (static metadata)
        if p.leader != me:
            return None
        hosted = broker.replicas.partitions.get((p.log_key, p.partition))
        return hosted.isr if hosted is not None and hosted.is_leader else None

    def describable(name: str) -> int:
        try:
            ctx.authorize("DESCRIBE", "topic", name, count=False)
        except SluiceError as e:
            return kerr.kafka_code(e)
        return kerr.NONE

    topics_out = []
    wanted = requested_names(header.api_version, request["topics"])
    if wanted is None:
        for name, topic in sorted(image.topics.items()):
            if name in INTERNAL_TOPICS or describable(name) != kerr.NONE:
                continue
            topics_out.append(topic_entry(topic, live, up, isr_of))
    for t in wanted or ():
        topic, error = named_topic(image, t.get("name"), t.get("topic_id") or ZERO_ID, describable)
        if topic is None:
            topics_out.append(error)
        else:
            topics_out.append(topic_entry(topic, live, up, isr_of))
    if header.api_version >= 8 and request["include_topic_authorized_operations"]:
        for entry in topics_out:
            if entry["error_code"] == kerr.NONE:
                entry["topic_authorized_operations"] = topic_operations(ctx, entry["name"])
    answer = {
        "throttle_time_ms": 0,
        "brokers": brokers_of(image.brokers),
        "cluster_id": image.cluster_id,
        "controller_id": controller_of(image.brokers),
        "topics": topics_out,
    }
    if 8 <= header.api_version <= 10 and request["include_cluster_authorized_operations"]:
        answer["cluster_authorized_operations"] = cluster_operations(ctx)
    return answer


HANDLERS: dict[int, Handler] = {apis.METADATA: metadata}
