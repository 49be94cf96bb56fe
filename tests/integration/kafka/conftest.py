"""Brokers with a Kafka listener, and client settings for the clients we did not write
(kafka-python, confluent-kafka / librdkafka, kcat). SASL/PLAIN: the API key id is the user
name, its secret the password."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.broker import KEY_ID, SECRET, BrokerLauncher, BrokerProcess
from harness.cluster import StaticCluster, start_static_cluster

KCAT = shutil.which("kcat")


def confluent_config(bootstrap: str, **extra) -> dict:
    """confluent-kafka (librdkafka) settings for a Sluice Kafka listener."""
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": KEY_ID,
        "sasl.password": SECRET,
        **extra,
    }


def kafka_python_config(bootstrap: str, **extra) -> dict:
    """kafka-python settings for a Sluice Kafka listener."""
    return {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": KEY_ID,
        "sasl_plain_password": SECRET,
        **extra,
    }


def kcat_args(bootstrap: str) -> list[str]:
    """kcat's command line up to the mode flags."""
    assert KCAT, "kcat is not installed (make kafka-tools)"
    return [
        KCAT,
        "-b",
        bootstrap,
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanism=PLAIN",
        "-X",
        f"sasl.username={KEY_ID}",
        "-X",
        f"sasl.password={SECRET}",
    ]


@pytest.fixture
def kafka_launcher(tmp_path: Path) -> Iterator[BrokerLauncher]:
    launcher = BrokerLauncher(tmp_path)
    try:
        yield launcher
    finally:
        launcher.close()


@pytest.fixture
def kafka_broker(kafka_launcher: BrokerLauncher) -> BrokerProcess:
    """One broker with the default topics and a Kafka listener (``.bootstrap``)."""
    return kafka_launcher(kafka=True)


@pytest.fixture
def kafka_cluster(kafka_launcher: BrokerLauncher) -> StaticCluster:
    """Three brokers replicating ``orders`` (3 partitions) and ``events`` (1), each with a
    Kafka listener (``.kafka_bootstrap``)."""
    return start_static_cluster(kafka_launcher, {"orders": (3, {}), "events": (1, {})}, kafka=True)
