"""Topic configs end to end through the control plane: Kafka's CreateTopics refuses a config
the broker does not honour (INVALID_CONFIG, "not supported yet") and accepts
message.timestamp.type and compression.type, which reach the broker in the metadata log and
change what it stores; DescribeConfigs lists exactly the accepted configs."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from backend.topics.configs import KNOWN_CONFIGS
from tests.integration.kafka.cp_kafka import Tenant, eventually, kafka_control_plane, new_tenant

T = 20  # seconds: every client call is bounded


@pytest.fixture(scope="module")
def cp(tmp_path_factory):
    with kafka_control_plane(tmp_path_factory.mktemp("topic-configs-cp"), brokers=1) as cp:
        yield cp


@pytest.fixture(scope="module")
def tenant(cp) -> Tenant:
    return new_tenant(cp, "cfg")


def test_create_topics_refuses_an_unsupported_config(cp, tenant):
    admin = AdminClient(tenant.confluent(cp.kafka_bootstrap))
    future = admin.create_topics(
        [NewTopic("delayed", 1, 1, config={"file.delete.delay.ms": "1000"})], request_timeout=T
    )["delayed"]
    with pytest.raises(KafkaException) as raised:
        future.result(T)
    error = raised.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "file.delete.delay.ms" in error.str() and "not supported yet" in error.str()


def test_log_append_time_and_zstd_configs_reach_the_broker(cp, tenant):
    admin = AdminClient(tenant.confluent(cp.kafka_bootstrap))
    configs = {"message.timestamp.type": "LogAppendTime", "compression.type": "zstd"}
    created = admin.create_topics([NewTopic("stamped", 1, 1, config=configs)], request_timeout=T)
    assert created["stamped"].result(T) is None

    resource = ConfigResource(ResourceType.TOPIC, "stamped")
    described = admin.describe_configs([resource], request_timeout=T)[resource].result(T)
    assert set(described) == KNOWN_CONFIGS
    assert described["compression.type"].value == "zstd"
    assert described["message.timestamp.type"].value == "LogAppendTime"

    reports: list = []
    producer = Producer(
        tenant.confluent(cp.kafka_bootstrap, **{"message.timeout.ms": 15000, "linger.ms": 0})
    )
    before = int(time.time() * 1000)
    producer.produce(
        "stamped",
        b"v" * 200,
        timestamp=1_000_000_000_000,
        on_delivery=lambda e, m: reports.append((e, m)),
    )
    assert producer.flush(T) == 0
    ((error, message),) = reports
    assert error is None
    kind, stamp = message.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME and stamp >= before

    consumer = Consumer(
        tenant.confluent(cp.kafka_bootstrap, **{"group.id": "g", "enable.auto.commit": False})
    )
    try:
        consumer.assign([TopicPartition("stamped", 0, 0)])

        def first():
            m = consumer.poll(0.5)
            return m if m is not None and m.error() is None else None

        got = eventually("the record", first, timeout=T)
        assert got.value() == b"v" * 200 and got.timestamp() == (kind, stamp)
    finally:
        consumer.close()
