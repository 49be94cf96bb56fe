"""The consumer protocol across three brokers: a librdkafka member bootstrapped through one
broker finds its group's coordinator on another (FindCoordinator), heartbeats and commits
there; ListGroups asked of every broker names the group once; a group request sent to a
broker that does not coordinate the group answers NOT_COORDINATOR."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient

from brokernodes.server.coordinator.offsets_topic import partition_for
from harness.cluster import start_static_cluster
from tests.integration.groups.conftest import http_json
from tests.integration.kafka.conftest import confluent_config, kafka_python_config

TIMEOUT_S = 60
OFFSETS_PARTITIONS = 3  # led by brokers 1, 2, 3


def group_coordinated_by(broker_id: int) -> str:
    """A group id whose ``__consumer_offsets`` partition broker ``broker_id`` leads."""
    for i in range(1000):
        gid = f"far-{i}"
        if partition_for(gid, OFFSETS_PARTITIONS) == broker_id - 1:
            return gid
    raise AssertionError("no such group id")


@pytest.fixture
def cluster(kafka_launcher):
    topics = {
        "orders": (3, {}),
        "__consumer_offsets": (OFFSETS_PARTITIONS, {"cleanup.policy": "compact"}),
    }
    return start_static_cluster(kafka_launcher, topics, kafka=True)


def test_a_member_finds_its_coordinator_on_another_broker(cluster):
    group = group_coordinated_by(3)
    first = cluster.broker(1)
    producer = Producer(confluent_config(cluster.kafka_bootstrap, acks="all"))
    for i in range(9):
        producer.produce("orders", value=f"v{i}".encode(), partition=i % 3)
    assert producer.flush(TIMEOUT_S) == 0

    consumer = Consumer(
        confluent_config(
            first.bootstrap,  # only broker 1 is named; the coordinator is broker 3
            **{
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            },
        )
    )
    consumer.subscribe(["orders"])
    values = []
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < 9:
            assert time.monotonic() < deadline, f"read only {len(values)} of 9"
            m = consumer.poll(0.2)
            if m is None:
                continue
            assert not m.error() or m.error().code() != KafkaError._FATAL, m.error()
            if not m.error():
                values.append(m.value())
        assert sorted(values) == sorted(f"v{i}".encode() for i in range(9))
        consumer.commit(asynchronous=False)

        coordinator = cluster.broker(3)
        status, body = http_json(
            "GET", f"{coordinator.url}/sluice/v1/groups/{group}", key=coordinator.api_key
        )
        assert status == 200 and body["coordinator"] == 3 and len(body["members"]) == 1
        assert {o["partition"]: o["committed_offset"] for o in body["offsets"]} == {
            0: 3,
            1: 3,
            2: 3,
        }
        status, body = http_json("GET", f"{first.url}/sluice/v1/groups/{group}", key=first.api_key)
        assert status == 421 and body["error_code"] == "NOT_COORDINATOR"

        admin = AdminClient(confluent_config(first.bootstrap))
        described = admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)
        result = described[group].result(timeout=TIMEOUT_S)
        assert result.type == ConsumerGroupType.CONSUMER
        assert result.coordinator.id == 3 and len(result.members) == 1

        kp_admin = KafkaAdminClient(**kafka_python_config(first.bootstrap))
        try:
            listed = kp_admin.list_groups()  # asks every broker
            assert [g["group_id"] for g in listed] == [group]
            answers = dict(kp_admin.delete_groups([group], group_coordinator_id=1))
            assert answers == {group: "NotCoordinatorError"}
            answers = dict(kp_admin.delete_groups([group], group_coordinator_id=3))
            assert answers == {group: "NonEmptyGroupError"}
        finally:
            kp_admin.close()
        tps = [TopicPartition("orders", p) for p in range(3)]
        assert {tp.offset for tp in consumer.committed(tps, timeout=TIMEOUT_S)} == {3}
    finally:
        consumer.close()
