"""The group admin APIs over Kafka's protocol with real admin clients (kafka-python,
confluent-kafka): ListGroups with state and type filters, DeleteGroups, OffsetDelete, on
groups made over REST (a KIP-848 member, an admin commit), so Kafka clients see the groups
REST sees and the reverse."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
)
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, TopicPartition
from kafka import errors as kafka_errors

from harness.broker import DEFAULT_TOPICS
from tests.integration.groups.conftest import http_json
from tests.integration.kafka.conftest import confluent_config, kafka_python_config

GROUP_TOPICS = {**DEFAULT_TOPICS, "__consumer_offsets": (4, {"cleanup.policy": "compact"})}
TIMEOUT_S = 15


@pytest.fixture
def gbroker(kafka_launcher):
    """One broker with a Kafka listener and ``__consumer_offsets``."""
    return kafka_launcher(GROUP_TOPICS, kafka=True)


def rest(b, method: str, path: str, body=None):
    return http_json(method, f"{b.url}/sluice/v1/groups{path}", body, key=b.api_key)


def rest_groups(b):
    """A group with a live member (over REST, KIP-848) that committed orders-0, and one with
    only an admin commit (no members)."""
    status, joined = rest(
        b,
        "POST",
        "/live/heartbeat",
        {"member_epoch": 0, "subscriptions": ["orders"], "session_timeout_ms": 60000},
    )
    assert status == 200 and joined["member_epoch"] == 1
    offsets = [{"topic": "orders", "partition": 0, "offset": 0}]
    status, _ = rest(
        b,
        "POST",
        "/live/offsets",
        {"member_id": joined["member_id"], "member_epoch": 1, "offsets": offsets},
    )
    assert status == 200
    status, _ = rest(b, "POST", "/idle/offsets", {"offsets": offsets})
    assert status == 200
    return joined


def kafka_python_admin(b) -> KafkaAdminClient:
    return KafkaAdminClient(**kafka_python_config(b.bootstrap, request_timeout_ms=10000))


def test_kafka_python_lists_filters_and_deletes_rest_groups(gbroker):
    b = gbroker
    rest_groups(b)
    admin = kafka_python_admin(b)
    try:
        groups = {g["group_id"]: g for g in admin.list_groups()}
        assert set(groups) == {"live", "idle"}
        assert groups["live"]["protocol_type"] == "consumer"
        assert groups["live"]["group_state"] == "Stable"
        assert groups["live"]["group_type"] == "consumer"
        # a group with only committed offsets: an empty classic group, as Kafka shows one
        assert groups["idle"]["group_state"] == "Empty"
        assert groups["idle"]["group_type"] == "classic"
        assert [g["group_id"] for g in admin.list_groups(states_filter=["stable"])] == ["live"]
        assert [g["group_id"] for g in admin.list_groups(types_filter=["classic"])] == ["idle"]

        # OffsetDelete: a topic a member subscribes to is refused; an idle group's goes
        tp = TopicPartition("orders", 0)
        refused = admin.delete_group_offsets("live", [tp], group_coordinator_id=1)
        assert refused == {tp: kafka_errors.GroupSubscribedToTopicError}
        assert admin.delete_group_offsets("idle", [tp], group_coordinator_id=1) == {
            tp: kafka_errors.NoError
        }
        status, body = rest(b, "GET", "/idle/offsets")
        assert (status, body["offsets"]) == (200, [])
        with pytest.raises(kafka_errors.GroupIdNotFoundError):
            admin.delete_group_offsets("nobody", [tp], group_coordinator_id=1)

        # DeleteGroups: not while it has members; unknown groups are named as such
        answers = dict(admin.delete_groups(["live", "idle", "nobody"], group_coordinator_id=1))
        assert answers == {
            "live": "NonEmptyGroupError",
            "idle": "GroupIdNotFoundError",  # its only offsets were deleted above
            "nobody": "GroupIdNotFoundError",
        }
        status, body = rest(b, "GET", "/live/offsets")
        assert status == 200 and body["offsets"][0]["offset"] == 0  # untouched
    finally:
        admin.close()


def test_deleting_an_inactive_group_over_kafka_removes_it_from_rest(gbroker):
    b = gbroker
    joined = rest_groups(b)
    status, _ = rest(
        b, "POST", "/live/heartbeat", {"member_id": joined["member_id"], "member_epoch": -1}
    )
    assert status == 200
    admin = kafka_python_admin(b)
    try:
        assert dict(admin.delete_groups(["live", "idle"], group_coordinator_id=1)) == {
            "live": "OK",
            "idle": "OK",
        }
        assert admin.list_groups() == []
    finally:
        admin.close()
    for group in ("live", "idle"):
        status, body = rest(b, "GET", f"/{group}")
        assert status == 404 and body["error_code"] == "GROUP_ID_NOT_FOUND"


def test_confluent_admin_lists_groups_with_state_and_type(gbroker):
    b = gbroker
    rest_groups(b)
    admin = AdminClient(confluent_config(b.bootstrap))
    result = admin.list_consumer_groups(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    assert not result.errors
    listed = {g.group_id: g for g in result.valid}
    assert set(listed) == {"live", "idle"}
    assert listed["live"].type == ConsumerGroupType.CONSUMER
    assert listed["live"].state == ConsumerGroupState.STABLE
    assert listed["idle"].type == ConsumerGroupType.CLASSIC
    assert listed["idle"].is_simple_consumer_group  # no protocol type: offsets only
    stable = admin.list_consumer_groups(
        states={ConsumerGroupState.STABLE}, request_timeout=TIMEOUT_S
    ).result(timeout=TIMEOUT_S)
    assert [g.group_id for g in stable.valid] == ["live"]
    classic = admin.list_consumer_groups(
        types={ConsumerGroupType.CLASSIC}, request_timeout=TIMEOUT_S
    ).result(timeout=TIMEOUT_S)
    assert [g.group_id for g in classic.valid] == ["idle"]


def test_offsets_committed_over_rest_are_what_kafka_clients_fetch(gbroker):
    """OffsetFetch by a librdkafka consumer (``committed``) and kafka-python's admin return
    the offsets a REST member and an admin commit wrote."""
    b = gbroker
    rest_groups(b)
    for i in range(3):
        status, _ = b.json(
            "POST",
            f"/v3/clusters/{b.cluster_id}/topics/orders/records",
            {"partition_id": 2, "value": {"type": "STRING", "data": f"v{i}"}},
        )
        assert status == 200
    status, _ = rest(
        b, "POST", "/idle/offsets", {"offsets": [{"topic": "orders", "partition": 2, "offset": 3}]}
    )
    assert status == 200
    tps = [ConfluentTopicPartition("orders", p) for p in range(3)]
    for group, expected in (("live", {0: 0}), ("idle", {0: 0, 2: 3})):
        consumer = Consumer(confluent_config(b.bootstrap, **{"group.id": group}))
        try:
            found = consumer.committed(tps, timeout=TIMEOUT_S)
        finally:
            consumer.close()
        assert {tp.partition: tp.offset for tp in found if tp.offset >= 0} == expected
    admin = kafka_python_admin(b)
    try:
        offsets = admin.list_group_offsets("idle")["idle"]
        assert {tp.partition: om.offset for tp, om in offsets.items()} == {0: 0, 2: 3}
    finally:
        admin.close()


def test_classic_groups_are_listed_described_and_deleted_like_the_others(gbroker):
    """A librdkafka consumer in a classic group: Kafka's ListGroups and describe show it as
    classic, REST lists and describes it, its subscribed topic's offsets and the group itself
    cannot be deleted while it has the member, and can once it has left."""
    b = gbroker
    consumer = Consumer(
        confluent_config(
            b.bootstrap,
            **{
                "group.id": "old",
                "group.protocol": "classic",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            },
        )
    )
    consumer.subscribe(["orders"])
    admin = AdminClient(confluent_config(b.bootstrap))
    kp_admin = kafka_python_admin(b)
    try:
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < 3:
            assert time.monotonic() < deadline, "the classic member got no assignment"
            consumer.poll(0.2)
        consumer.commit(offsets=[ConfluentTopicPartition("orders", 0, 0)], asynchronous=False)
        (listed,) = kp_admin.list_groups()
        assert (listed["group_id"], listed["group_type"]) == ("old", "classic")
        assert (listed["protocol_type"], listed["group_state"]) == ("consumer", "Stable")

        status, body = rest(b, "GET", "")
        assert status == 200
        assert [(g["group_id"], g["state"], g["members"]) for g in body["groups"]] == [
            ("old", "STABLE", 1)
        ]
        status, group = rest(b, "GET", "/old")
        assert status == 200 and group["type"] == "classic"
        (member,) = group["members"]
        assert member["client_id"] == "rdkafka" and member["subscriptions"] == ["orders"]
        assert sorted(tp["partition"] for tp in member["assignments"]) == [0, 1, 2]

        described = admin.describe_consumer_groups(["old"], request_timeout=TIMEOUT_S)
        old = described["old"].result(timeout=TIMEOUT_S)
        assert old.type == ConsumerGroupType.CLASSIC and len(old.members) == 1

        tp = TopicPartition("orders", 0)
        refused = kp_admin.delete_group_offsets("old", [tp], group_coordinator_id=1)
        assert refused == {tp: kafka_errors.GroupSubscribedToTopicError}
        with pytest.raises(KafkaException) as busy:
            admin.delete_consumer_groups(["old"], request_timeout=TIMEOUT_S)["old"].result(
                timeout=TIMEOUT_S
            )
        assert busy.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    finally:
        consumer.close()
        kp_admin.close()
    admin.delete_consumer_groups(["old"], request_timeout=TIMEOUT_S)["old"].result(
        timeout=TIMEOUT_S
    )
    status, body = rest(b, "GET", "/old")
    assert status == 404 and body["error_code"] == "GROUP_ID_NOT_FOUND"
