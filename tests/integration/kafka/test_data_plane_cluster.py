"""Kafka clients against three replicating brokers: they find each partition's leader
through Metadata, produce with acks=all (acknowledged only once the in-sync replicas have
the records) and consume from the leaders; min.insync.replicas refuses acks=all."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from brokernodes.records.batch import Record, encode_batch
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from harness.cluster import start_static_cluster
from tests.integration.broker.util import fetch_binary
from tests.integration.kafka.conftest import confluent_config
from tests.integration.kafka.data_plane_wire import KafkaWire

TIMEOUT_S = 30.0


def test_acks_all_produce_and_consume_across_leaders(kafka_cluster):
    bootstrap = kafka_cluster.kafka_bootstrap
    md = AdminClient(confluent_config(bootstrap)).list_topics(timeout=15)
    leaders = {p.id: p.leader for p in md.topics["orders"].partitions.values()}
    assert sorted(leaders.values()) == [1, 2, 3]  # one partition led by each broker
    producer = Producer(
        confluent_config(bootstrap, acks="all", **{"enable.idempotence": True, "linger.ms": 5})
    )
    reports: list = []
    for i in range(300):
        producer.produce(
            "orders",
            key=b"k%d" % i,
            value=b"v%d" % i,
            on_delivery=lambda e, m: reports.append((e, m)),
        )
    assert producer.flush(TIMEOUT_S) == 0
    assert all(e is None for e, _ in reports)
    by_partition: dict[int, int] = {}
    for _, m in reports:
        by_partition[m.partition()] = by_partition.get(m.partition(), 0) + 1
    assert len(by_partition) == 3
    # acknowledged with acks=all: every replica holds them (read over HTTP on each broker)
    for p, n in by_partition.items():
        leader = kafka_cluster.broker(leaders[p])
        status, headers, _ = fetch_binary(leader, "orders", p, 0)
        assert status == 200 and int(headers["Sluice-High-Watermark"]) == n
    consumer = Consumer(
        confluent_config(bootstrap, **{"group.id": "cluster-read", "enable.auto.commit": False})
    )
    try:
        consumer.assign([TopicPartition("orders", p, 0) for p in range(3)])
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 300 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m)
    finally:
        consumer.close()
    assert sorted(m.value() for m in got) == sorted(b"v%d" % i for i in range(300))
    sent = {m.key(): m.partition() for _, m in reports}
    assert all(sent[m.key()] == m.partition() for m in got)


def test_a_follower_answers_not_leader(kafka_cluster):
    follower = kafka_cluster.broker(2)  # orders-0 is led by broker 1
    with KafkaWire(follower.bootstrap) as wire:
        records = encode_batch([Record(1, None, b"x")])
        answer = wire.request(
            apis.PRODUCE,
            10,
            {
                "acks": -1,
                "timeout_ms": 5000,
                "topic_data": [
                    {"name": "orders", "partition_data": [{"index": 0, "records": records}]}
                ],
            },
        )
        p = answer["responses"][0]["partition_responses"][0]
        assert p["error_code"] == kerr.NOT_LEADER_OR_FOLLOWER
        # KIP-951: the answer names the leader and how to reach it
        assert p["current_leader"] == {"leader_id": 1, "leader_epoch": 0}
        leader_port = kafka_cluster.broker(1).kafka_port
        assert answer["node_endpoints"] == [
            {"node_id": 1, "host": "127.0.0.1", "port": leader_port, "rack": None}
        ]
        fetched = wire.request(
            apis.FETCH,
            16,
            {
                "max_wait_ms": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "topics": [
                    {
                        "topic_id": topic_id("orders"),
                        "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                        ],
                    }
                ],
            },
        )
        f = fetched["responses"][0]["partitions"][0]
        assert f["error_code"] == kerr.NOT_LEADER_OR_FOLLOWER
        assert f["current_leader"] == {"leader_id": 1, "leader_epoch": 0}
        assert [e["node_id"] for e in fetched["node_endpoints"]] == [1]


def topic_id(name: str) -> bytes:
    return uuid.uuid5(uuid.NAMESPACE_URL, name).bytes  # the harness's static topic ids


def test_min_insync_replicas_refuses_acks_all(kafka_launcher):
    cluster = start_static_cluster(
        kafka_launcher, {"strict": (1, {"min.insync.replicas": "3"})}, kafka=True
    )
    cluster.broker(3).kill()

    def produce(acks: int) -> int:
        with KafkaWire(cluster.broker(1).bootstrap) as wire:
            records = encode_batch([Record(1, None, b"s")])
            answer = wire.request(
                apis.PRODUCE,
                9,
                {
                    "acks": acks,
                    "timeout_ms": 3000,
                    "topic_data": [
                        {"name": "strict", "partition_data": [{"index": 0, "records": records}]}
                    ],
                },
            )
        return answer["responses"][0]["partition_responses"][0]["error_code"]

    deadline = time.monotonic() + TIMEOUT_S
    code = produce(-1)
    while code != kerr.NOT_ENOUGH_REPLICAS and time.monotonic() < deadline:
        assert code in (kerr.NONE, kerr.REQUEST_TIMED_OUT, kerr.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        time.sleep(0.5)
        code = produce(-1)
    assert code == kerr.NOT_ENOUGH_REPLICAS
    assert produce(1) == kerr.NONE
