"""Kafka protocol and HTTP share the partition logs: records produced over one front are
read back over the other with keys, values, headers and timestamps intact; kcat round trips."""

from __future__ import annotations

import base64
import subprocess
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTP

from harness.broker import BrokerLauncher, BrokerProcess
from tests.integration.broker.util import batch, fetch_json, produce_binary, produce_json
from tests.integration.kafka.conftest import (
    KCAT,
    confluent_config,
    kafka_python_config,
    kcat_args,
)

TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    launcher = BrokerLauncher(tmp_path_factory.mktemp("kafka-interop"))
    try:
        yield launcher(
            kafka=True,
            topics={"to-http": (1, {}), "from-http": (1, {}), "bin": (1, {}), "kcat": (1, {})},
        )
    finally:
        launcher.close()


def test_kafka_produced_records_read_over_rest(kbroker):
    producer = Producer(confluent_config(kbroker.bootstrap, **{"compression.type": "zstd"}))
    for i in range(5):
        producer.produce(
            "to-http",
            value=b'{"n": %d}' % i,
            key=b"key-%d" % i,
            headers=[("trace", b"t%d" % i)],
            timestamp=1_700_000_000_000 + i,
        )
    assert producer.flush(TIMEOUT_S) == 0
    status, got = fetch_json(kbroker, "to-http", 0, 0, max_records=10)
    assert status == 200, got
    assert [r["offset"] for r in got["records"]] == [0, 1, 2, 3, 4]
    for i, r in enumerate(got["records"]):
        assert r["key"] == f"key-{i}"
        assert r["value"] == {"n": i}
        assert r["timestamp"] == 1_700_000_000_000 + i
        assert r["headers"] == [{"name": "trace", "value": base64.b64encode(b"t%d" % i).decode()}]


def test_rest_produced_records_read_over_kafka(kbroker):
    for i in range(3):
        status, body = produce_json(
            kbroker,
            "from-http",
            {
                "key": {"type": "STRING", "data": f"k{i}"},
                "value": {"type": "JSON", "data": {"i": i}},
                "headers": [{"name": "h", "value": base64.b64encode(b"v").decode()}],
                "timestamp": 1_700_000_000_000 + i,
            },
        )
        assert status == 200, body
    consumer = KafkaConsumer(**kafka_python_config(kbroker.bootstrap, consumer_timeout_ms=10_000))
    try:
        consumer.assign([KTP("from-http", 0)])
        consumer.seek_to_beginning()
        got = []
        for m in consumer:
            got.append(m)
            if len(got) == 3:
                break
    finally:
        consumer.close()
    assert [(m.offset, m.key, m.value) for m in got] == [
        (i, b"k%d" % i, b'{"i":%d}' % i) for i in range(3)
    ]
    assert [m.timestamp for m in got] == [1_700_000_000_000 + i for i in range(3)]
    assert all(m.headers == [("h", b"v")] for m in got)


def test_binary_http_batches_read_by_confluent(kbroker):
    body = batch([b"b%d" % i for i in range(4)], key=b"bk", ts=1_650_000_000_000)
    status, ans = produce_binary(kbroker, "bin", 0, body)
    assert status == 200, ans
    consumer = Consumer(
        confluent_config(kbroker.bootstrap, **{"group.id": "interop", "enable.auto.commit": False})
    )
    try:
        consumer.assign([TopicPartition("bin", 0, 0)])
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 4 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m)
    finally:
        consumer.close()
    assert [(m.offset(), m.key(), m.value()) for m in got] == [
        (i, b"bk", b"b%d" % i) for i in range(4)
    ]
    assert got[0].timestamp()[1] == 1_650_000_000_000


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_kcat_produce_and_consume_round_trip(kbroker):
    lines = "\n".join(f"k{i}:value {i}" for i in range(20)) + "\n"
    produced = subprocess.run(
        [*kcat_args(kbroker.bootstrap), "-P", "-t", "kcat", "-K", ":", "-H", "src=kcat"],
        input=lines,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        [
            *kcat_args(kbroker.bootstrap),
            "-C",
            "-t",
            "kcat",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%o|%k|%s|%h\\n",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert consumed.returncode == 0, consumed.stderr
    rows = consumed.stdout.splitlines()
    assert rows == [f"{i}|k{i}|value {i}|src=kcat" for i in range(20)]
    # from an offset to the end, and the last message only
    tail = subprocess.run(
        [*kcat_args(kbroker.bootstrap), "-C", "-t", "kcat", "-o", "-2", "-e", "-f", "%s\\n"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert tail.stdout.splitlines() == ["value 18", "value 19"]
    status, got = fetch_json(kbroker, "kcat", 0, 19, max_records=1)
    assert status == 200 and got["records"][0]["key"] == "k19"
