"""Kafka's group messages from the coordinator's objects: topic ids both ways within a view,
heartbeat answers (assignment by topic id, none when leaving, a shorter interval while
partitions are pending), ConsumerGroupDescribe members, ListGroups filters, authorized
operations; and every answer encodes with the generated codecs."""

from __future__ import annotations

import uuid

from brokernodes.groups import ConsumerGroup, HeartbeatResponse, TopicPartition
from brokernodes.server.coordinator.service import GroupListing, listing
from brokernodes.server.kafka import group_messages as gm
from brokernodes.server.metadata.cluster import parse_metadata
from brokernodes.server.protocol.kafka import apis

ORDERS_ID = uuid.uuid5(uuid.NAMESPACE_URL, "orders")
EVENTS_ID = uuid.uuid5(uuid.NAMESPACE_URL, "events")
VIEW = parse_metadata(
    {
        "cluster_id": "c",
        "broker_id": 1,
        "brokers": [{"id": 1, "url": "http://a"}],
        "topics": [
            {"name": "orders", "topic_id": str(ORDERS_ID), "partitions": 3, "leaders": [1] * 3},
            {"name": "events", "topic_id": str(EVENTS_ID), "partitions": 1, "leaders": [1]},
        ],
    }
)


def test_topic_ids_map_both_ways_and_unknown_ids_are_dropped_from_owned():
    ids = gm.TopicIds(VIEW)
    assert ids.id_of("orders") == ORDERS_ID.bytes
    assert ids.id_of("nope") == gm.ZERO_UUID
    assert ids.name_of(EVENTS_ID.bytes) == "events"
    assert ids.name_of(uuid.uuid4().bytes) is None
    owned = gm.owned_partitions(
        [
            {"topic_id": ORDERS_ID.bytes, "partitions": [2, 0]},
            {"topic_id": uuid.uuid4().bytes, "partitions": [0]},  # deleted since
        ],
        ids,
    )
    assert owned == [TopicPartition("orders", 2), TopicPartition("orders", 0)]
    assert gm.owned_partitions(None, ids) is None  # unchanged since the last heartbeat
    assert gm.owned_partitions([], ids) == []


def test_heartbeat_answer_gives_the_assignment_by_topic_id():
    r = HeartbeatResponse(
        "m1",
        4,
        5000,
        assignment=frozenset({TopicPartition("orders", 2), TopicPartition("orders", 0)}),
        revoking=frozenset({TopicPartition("orders", 1)}),
    )
    answer = gm.heartbeat_answer(r, gm.TopicIds(VIEW))
    assert answer == {
        "error_code": 0,
        "member_id": "m1",
        "member_epoch": 4,
        "heartbeat_interval_ms": 5000,
        # revoking partitions are left out: the member revokes what is not assigned
        "assignment": {"topic_partitions": [{"topic_id": ORDERS_ID.bytes, "partitions": [0, 2]}]},
    }
    for version in (0, 1):
        assert apis.response_codec(apis.CONSUMER_GROUP_HEARTBEAT, version).encode_new(answer)


def test_a_member_waiting_for_partitions_heartbeats_sooner():
    pending = HeartbeatResponse("m", 2, 5000, pending=frozenset({TopicPartition("orders", 1)}))
    assert gm.heartbeat_answer(pending, gm.TopicIds(VIEW))["heartbeat_interval_ms"] == 1000
    tiny = HeartbeatResponse("m", 2, 200, pending=frozenset({TopicPartition("orders", 1)}))
    assert gm.heartbeat_interval(tiny) == gm.MIN_HEARTBEAT_INTERVAL_MS


def test_a_leaving_member_gets_no_assignment():
    answer = gm.heartbeat_answer(HeartbeatResponse("m", -1, 5000), gm.TopicIds(VIEW))
    assert answer["member_epoch"] == -1 and "assignment" not in answer


def test_describe_shows_members_with_assignment_and_target():
    group = ConsumerGroup("g", partition_counts={"orders": 3}, member_id_factory=lambda: "a")
    group.heartbeat(None, 0, 0, subscriptions=["orders"])
    desc = group.describe()
    member = gm.described_member(desc["members"][0], "rdkafka", "127.0.0.1", gm.TopicIds(VIEW))
    assert member["client_id"] == "rdkafka" and member["client_host"] == "/127.0.0.1"
    assert member["subscribed_topic_names"] == ["orders"]
    everything = [{"topic_id": ORDERS_ID.bytes, "topic_name": "orders", "partitions": [0, 1, 2]}]
    assert member["assignment"]["topic_partitions"] == everything
    assert member["target_assignment"]["topic_partitions"] == everything
    described = gm.described_group("g", desc, [member], gm.AUTHORIZED_OPERATIONS_OMITTED)
    assert described["group_state"] == "Stable" and described["assignor_name"] == "uniform"
    assert described["group_epoch"] == described["assignment_epoch"] == 1
    failed = gm.failed_group("h", 69, "no such group")
    body = {"groups": [described, failed]}
    assert apis.response_codec(apis.CONSUMER_GROUP_DESCRIBE, 0).encode_new(body)


def test_authorized_operations_are_kafka_acl_operation_bits():
    assert gm.authorized_operations([]) == 0
    assert gm.authorized_operations(["READ", "DESCRIBE"]) == (1 << 3) | (1 << 8)
    assert gm.authorized_operations(gm.GROUP_OPERATIONS) == (1 << 3) | (1 << 6) | (1 << 8)


def test_list_groups_filters_by_state_and_type_case_insensitively():
    stable = ConsumerGroup("a", partition_counts={"orders": 1})
    stable.heartbeat("m", 0, 0, subscriptions=["orders"])
    rows = [
        listing("a", stable),
        listing("b", ConsumerGroup("b")),
        listing("c", None),  # committed offsets only
        GroupListing("d", "classic", "consumer", "PreparingRebalance"),
    ]
    assert [(r.group_type, r.protocol_type, r.state) for r in rows] == [
        ("consumer", "consumer", "Stable"),
        ("consumer", "consumer", "Empty"),
        ("classic", "", "Empty"),
        ("classic", "consumer", "PreparingRebalance"),
    ]

    def ids(**filters):
        return [g["group_id"] for g in gm.listed_groups(rows, **filters)]

    assert ids() == ["a", "b", "c", "d"]
    assert ids(states=["empty"]) == ["b", "c"]
    assert ids(states=["Stable", "PREPARINGREBALANCE"]) == ["a", "d"]
    assert ids(types=["Classic"]) == ["c", "d"]
    assert ids(states=["Empty"], types=["consumer"]) == ["b"]
    assert ids(states=[], types=[]) == ids()
    body = {"error_code": 0, "groups": gm.listed_groups(rows)}
    for version in range(0, 6):
        assert apis.response_codec(apis.LIST_GROUPS, version).encode_new(body)
