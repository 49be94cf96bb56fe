"""Metadata over the Kafka protocol, seen by kcat, confluent-kafka and kafka-python."""

from __future__ import annotations

import subprocess

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient
from kafka import KafkaConsumer

from tests.integration.kafka.conftest import confluent_config, kafka_python_config, kcat_args


def test_kcat_lists_brokers_and_topics(kafka_broker):
    out = subprocess.run(
        [*kcat_args(kafka_broker.bootstrap), "-L"], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    assert f"broker 1 at {kafka_broker.bootstrap} (controller)" in out.stdout
    assert 'topic "orders" with 3 partitions' in out.stdout
    assert "partition 2, leader 1, replicas: 1, isrs: 1" in out.stdout
    assert "__consumer_offsets" not in out.stdout


def test_confluent_admin_sees_topics_and_an_unknown_topic(kafka_broker):
    admin = AdminClient(confluent_config(kafka_broker.bootstrap))
    md = admin.list_topics(timeout=15)
    assert md.controller_id == 1
    assert set(md.brokers) == {1}
    assert {"orders", "events", "small", "compacted"} <= set(md.topics)
    assert sorted(md.topics["orders"].partitions) == [0, 1, 2]
    p = md.topics["orders"].partitions[1]
    assert (p.leader, p.replicas, p.isrs) == (1, [1], [1])
    missing = admin.list_topics(topic="no-such-topic", timeout=15)
    err = missing.topics["no-such-topic"].error
    assert err is not None and err.name() == "UNKNOWN_TOPIC_OR_PART"


def test_kafka_python_partitions_for_topic(kafka_broker):
    consumer = KafkaConsumer(**kafka_python_config(kafka_broker.bootstrap))
    try:
        assert consumer.partitions_for_topic("orders") == {0, 1, 2}
        assert {"orders", "events"} <= consumer.topics()
    finally:
        consumer.close()


def test_cluster_metadata_names_every_broker_and_replica(kafka_cluster):
    admin = AdminClient(confluent_config(kafka_cluster.kafka_bootstrap))
    md = admin.list_topics(timeout=15)
    assert set(md.brokers) == {1, 2, 3}
    assert md.controller_id == 1
    for p in md.topics["orders"].partitions.values():
        assert sorted(p.replicas) == [1, 2, 3] and p.leader in (1, 2, 3)


def test_confluent_describe_topics_with_authorized_operations(kafka_broker):
    admin = AdminClient(confluent_config(kafka_broker.bootstrap))
    futures = admin.describe_topics(
        TopicCollection(["orders"]), include_authorized_operations=True, request_timeout=15
    )
    desc = futures["orders"].result(15)
    assert [p.id for p in desc.partitions] == [0, 1, 2]
    assert desc.topic_id is not None
    assert {
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DESCRIBE,
        AclOperation.ALTER_CONFIGS,
    } <= set(desc.authorized_operations)


def test_confluent_describe_cluster_with_authorized_operations(kafka_broker):
    """librdkafka builds describe_cluster from a Metadata request asking for the cluster's
    authorized operations (v8-10): a static key may do everything on the cluster."""
    admin = AdminClient(confluent_config(kafka_broker.bootstrap))
    cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=15).result(
        timeout=20
    )
    assert [n.id for n in cluster.nodes] == [1]
    assert cluster.controller is not None and cluster.controller.id == 1
    assert {AclOperation.DESCRIBE, AclOperation.ALTER, AclOperation.CREATE} <= set(
        cluster.authorized_operations or ()
    )
