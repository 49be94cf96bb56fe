"""Kafka admin requests to a broker on a static metadata file (no control plane): changes are
refused with a clear message, topic configs are described from the file."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from tests.integration.kafka.conftest import confluent_config

T = 15


def test_static_broker_refuses_changes_and_describes_configs(kafka_launcher):
    broker = kafka_launcher(
        {"orders": (3, {}), "compacted": (1, {"cleanup.policy": "compact"})}, kafka=True
    )
    admin = AdminClient(confluent_config(broker.bootstrap))
    created = admin.create_topics([NewTopic("fresh", 1, 1)], request_timeout=T)["fresh"]
    with pytest.raises(KafkaException) as raised:
        created.result(T)
    error = raised.value.args[0]
    assert error.code() == KafkaError.POLICY_VIOLATION
    assert "static metadata" in error.str() and "--control-plane" in error.str()
    grown = admin.create_partitions([NewPartitions("orders", 4)], request_timeout=T)["orders"]
    with pytest.raises(KafkaException) as raised:
        grown.result(T)
    assert raised.value.args[0].code() == KafkaError.POLICY_VIOLATION
    assert len(admin.list_topics("orders", timeout=T).topics["orders"].partitions) == 3

    resource = ConfigResource(ResourceType.TOPIC, "compacted")
    configs = admin.describe_configs([resource], request_timeout=T)[resource].result(T)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    missing = ConfigResource(ResourceType.TOPIC, "nope")
    with pytest.raises(KafkaException) as raised:
        admin.describe_configs([missing], request_timeout=T)[missing].result(T)
    assert raised.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    # the broker's own settings, read-only
    me = ConfigResource(ResourceType.BROKER, "1")
    settings = admin.describe_configs([me], request_timeout=T)[me].result(T)
    assert settings["advertised.listeners"].value == f"SASL_PLAINTEXT://{broker.bootstrap}"
    assert settings["advertised.listeners"].is_read_only
