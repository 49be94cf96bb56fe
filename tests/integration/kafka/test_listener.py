"""The Kafka listener of a real broker process (static metadata) with clients we did not
write: SASL with a wrong secret or a whole API key as the user name fails clearly in
kafka-python, confluent-kafka and kcat; requests and connections show in /metrics; SIGTERM
with open Kafka connections (idle, unauthenticated, long-polling) stops cleanly and soon."""

from __future__ import annotations

import logging
import re
import socket
import struct
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka.errors import KafkaTimeoutError

from harness.broker import KEY_ID, SECRET
from tests.integration.kafka.conftest import (
    KCAT,
    confluent_config,
    kafka_python_config,
    kcat_args,
)

TIMEOUT_S = 20.0


def _confluent_failure(bootstrap: str, **sasl) -> KafkaError:
    """The first error librdkafka reports for these SASL settings."""
    failures: list[KafkaError] = []
    producer = Producer(confluent_config(bootstrap, **sasl, error_cb=failures.append, log_level=0))
    deadline = time.monotonic() + TIMEOUT_S
    while not failures and time.monotonic() < deadline:
        producer.poll(0.2)
    assert failures, "librdkafka reported no error"
    return failures[0]


def test_wrong_secret_fails_clearly_in_confluent_kafka(kafka_broker):
    error = _confluent_failure(kafka_broker.bootstrap, **{"sasl.password": "wrong"})
    assert error.code() == KafkaError._AUTHENTICATION
    assert "unknown or revoked API key" in error.str()


def test_whole_api_key_as_user_name_is_explained(kafka_broker):
    error = _confluent_failure(
        kafka_broker.bootstrap, **{"sasl.username": f"{KEY_ID}.{SECRET}", "sasl.password": "x"}
    )
    assert error.code() == KafkaError._AUTHENTICATION
    assert "the API key id alone" in error.str()


def test_wrong_secret_fails_clearly_in_kafka_python(kafka_broker, caplog):
    caplog.set_level(logging.WARNING, logger="kafka")
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError):
        KafkaConsumer(
            **kafka_python_config(
                kafka_broker.bootstrap, sasl_plain_password="wrong", bootstrap_timeout_ms=4000
            )
        )
    assert time.monotonic() - started < TIMEOUT_S
    messages = [r.getMessage() for r in caplog.records]
    assert any(
        "SaslAuthenticationFailedError" in m and "unknown or revoked API key" in m for m in messages
    ), messages


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_wrong_secret_fails_clearly_in_kcat(kafka_broker):
    args = kcat_args(kafka_broker.bootstrap)
    args[args.index(f"sasl.password={SECRET}")] = "sasl.password=wrong"
    done = subprocess.run(
        [*args, "-L", "-m", "5"], capture_output=True, text=True, timeout=TIMEOUT_S + 10
    )
    assert done.returncode != 0
    assert "unknown or revoked API key" in done.stderr


def test_requests_and_connections_in_metrics(kafka_broker):
    producer = Producer(confluent_config(kafka_broker.bootstrap))
    try:
        producer.produce("orders", value=b"v", partition=0)
        assert producer.flush(TIMEOUT_S) == 0  # its connection to the leader stays open
        status, _, body = kafka_broker.request("GET", "/metrics", auth=False)
        assert status == 200
        text = body.decode()
        for api in ("api_versions", "sasl_handshake", "sasl_authenticate", "metadata", "produce"):
            m = re.search(rf'sluice_request_seconds_count{{endpoint="kafka_{api}"}} (\S+)', text)
            assert m and float(m.group(1)) >= 1, api
        m = re.search(r'sluice_kafka_connections{authenticated="true"} (\S+)', text)
        assert m and float(m.group(1)) >= 1
    finally:
        producer.flush(1)


def test_sigterm_with_open_kafka_connections_stops_cleanly(kafka_launcher):
    broker = kafka_launcher(kafka=True, topics={"quiet": (1, {})})
    # an authenticated client long-polling an empty partition
    consumer = Consumer(
        confluent_config(
            broker.bootstrap,
            **{"group.id": "s", "fetch.wait.max.ms": 5000, "log_level": 0},
        )
    )
    consumer.assign([TopicPartition("quiet", 0, 0)])
    polled = threading.Event()
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            consumer.poll(0.2)
            polled.set()

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    # an unauthenticated one and a half-sent request
    idle = socket.create_connection(("127.0.0.1", broker.kafka_port), timeout=10)
    partial = socket.create_connection(("127.0.0.1", broker.kafka_port), timeout=10)
    partial.sendall(struct.pack(">i", 100) + b"\x00\x12")
    try:
        assert polled.wait(TIMEOUT_S)
        time.sleep(1.0)  # the consumer's fetch is parked in the long poll now
        started = time.monotonic()
        assert broker.stop(timeout=15) == 0
        assert time.monotonic() - started < 10
        for sock in (idle, partial):
            sock.settimeout(5)
            assert sock.recv(1) == b""
        assert "stopped cleanly" in broker.output()
    finally:
        stop.set()
        poller.join(10)
        consumer.close()
        idle.close()
        partial.close()
