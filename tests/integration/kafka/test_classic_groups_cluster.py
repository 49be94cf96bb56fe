"""The classic group protocol on three brokers: the group's coordinator is the leader of its
``__consumer_offsets`` partition, which FindCoordinator names by its Kafka address; clients
bootstrapped from another broker follow it, and a broker that is not the coordinator
answers NOT_COORDINATOR."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from brokernodes.server.coordinator.offsets_topic import partition_for
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from harness.cluster import start_static_cluster
from tests.integration.kafka.conftest import confluent_config
from tests.integration.kafka.data_plane_wire import KafkaWire

WIDE = 6
OFFSETS_PARTITIONS = 3
TIMEOUT_S = 60


def test_members_follow_find_coordinator_to_another_broker(kafka_launcher):
    cluster = start_static_cluster(
        kafka_launcher,
        {
            "wide": (WIDE, {}),
            "__consumer_offsets": (OFFSETS_PARTITIONS, {"cleanup.policy": "compact"}),
        },
        kafka=True,
    )
    # a group coordinated by broker 3 (leader of __consumer_offsets partition 2)
    group = next(f"far-{i}" for i in range(500) if partition_for(f"far-{i}", 3) == 2)
    first = cluster.broker(1).bootstrap
    producer = Producer(confluent_config(first, acks="all"))
    for i in range(12):
        producer.produce("wide", value=f"v{i}".encode(), partition=i % WIDE)
    assert producer.flush(TIMEOUT_S) == 0
    settings = {
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
    }
    consumers = [Consumer(confluent_config(first, **settings)) for _ in range(2)]
    try:
        for c in consumers:
            c.subscribe(["wide"])
        values = []
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline and len(values) < 12:
            for c in consumers:
                m = c.poll(0.05)
                if m is not None and m.error() is None:
                    values.append(m.value())
        assert sorted(values) == sorted(f"v{i}".encode() for i in range(12))
        owned = [{tp.partition for tp in c.assignment()} for c in consumers]
        assert owned[0] | owned[1] == set(range(WIDE)) and not owned[0] & owned[1]
        for c in consumers:
            c.commit(asynchronous=False)
        admin = AdminClient(confluent_config(first))
        desc = admin.describe_consumer_groups([group])[group].result(timeout=TIMEOUT_S)
        assert desc.coordinator.id == 3 and desc.coordinator.port == int(
            cluster.broker(3).bootstrap.rsplit(":", 1)[1]
        )
        assert len(desc.members) == 2
        committed = consumers[0].committed(
            [TopicPartition("wide", p) for p in range(WIDE)], timeout=TIMEOUT_S
        )
        assert [tp.offset for tp in committed] == [2] * WIDE
    finally:
        for c in consumers:
            c.close()
    # a broker that does not coordinate the group says so; the coordinator knows it
    for broker_id, code in ((1, kerr.NOT_COORDINATOR), (3, kerr.UNKNOWN_MEMBER_ID)):
        with KafkaWire(cluster.broker(broker_id).bootstrap) as wire:
            hb = {"group_id": group, "generation_id": 1, "member_id": "someone"}
            assert wire.request(apis.HEARTBEAT, 4, hb)["error_code"] == code
