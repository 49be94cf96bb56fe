"""Fetch and ListOffsets over the Kafka protocol: confluent-kafka and kafka-python consumers
reading what was produced (over Kafka or over HTTP), from offsets, the beginning, the end
and timestamps, with keys, headers and timestamps intact."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTP

from harness.broker import BrokerLauncher, BrokerProcess
from tests.integration.kafka.conftest import confluent_config, kafka_python_config

TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by this module (each test uses its own topics)."""
    launcher = BrokerLauncher(tmp_path_factory.mktemp("kafka-fetch"))
    try:
        yield launcher(
            kafka=True,
            topics={
                "c3": (3, {}),
                "tail": (1, {}),
                "big": (2, {}),
            },
        )
    finally:
        launcher.close()


def produce(broker: BrokerProcess, topic: str, messages: list[dict], **config) -> None:
    producer = Producer(confluent_config(broker.bootstrap, **config))
    errors: list = []
    for m in messages:
        producer.produce(topic, on_delivery=lambda e, _m: errors.append(e), **m)
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == [None] * len(messages)


def consume(consumer: Consumer, n: int) -> list:
    """``n`` messages (fewer if the timeout passes first); errors fail the test."""
    got: list = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < n and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        got.append(m)
    return got


def confluent_consumer(broker: BrokerProcess, **extra) -> Consumer:
    return Consumer(
        confluent_config(
            broker.bootstrap, **{"group.id": "fetch-tests", "enable.auto.commit": False, **extra}
        )
    )


def test_confluent_consumer_reads_every_partition_from_offsets(kbroker):
    msgs = [
        {
            "key": b"k%d" % i,
            "value": b"v%d" % i,
            "headers": [("n", b"%d" % i)],
            "timestamp": 1_600_000_000_000 + i,
        }
        for i in range(90)
    ]
    produce(kbroker, "c3", msgs, **{"compression.type": "lz4", "linger.ms": 5})
    consumer = confluent_consumer(kbroker)
    try:
        consumer.assign([TopicPartition("c3", p, 0) for p in range(3)])
        got = consume(consumer, 90)
        assert sorted(m.value() for m in got) == sorted(m["value"] for m in msgs)
        sent = {m["key"]: m for m in msgs}
        for m in got:
            want = sent[m.key()]
            assert m.value() == want["value"]
            assert m.headers() == want["headers"]
            assert m.timestamp()[1] == want["timestamp"]
        per = {p: [m.offset() for m in got if m.partition() == p] for p in range(3)}
        assert all(offsets == list(range(len(offsets))) for offsets in per.values())
        # from an offset in the middle of a partition
        p0 = len(per[0])
        consumer.assign([TopicPartition("c3", 0, p0 - 3)])
        assert [m.offset() for m in consume(consumer, 3)] == [p0 - 3, p0 - 2, p0 - 1]
    finally:
        consumer.close()


def test_kafka_python_long_poll_sees_new_records(kbroker):
    consumer = KafkaConsumer(**kafka_python_config(kbroker.bootstrap, fetch_max_wait_ms=3000))
    try:
        tp = KTP("tail", 0)
        consumer.assign([tp])
        consumer.seek_to_end(tp)
        end = consumer.position(tp)
        assert consumer.poll(timeout_ms=1000) == {}
        started = time.monotonic()
        produce(kbroker, "tail", [{"value": b"late"}])
        got = poll_values(consumer, 1)
        assert got == [b"late"]
        assert time.monotonic() - started < 2.5  # the long poll answered when data came
        consumer.seek(tp, end)
        assert poll_values(consumer, 1) == [b"late"]
        consumer.seek_to_beginning(tp)
        assert consumer.position(tp) == 0
    finally:
        consumer.close()


def poll_values(consumer: KafkaConsumer, n: int) -> list:
    got: list = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < n and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(r.value for r in records)
    return got


def consume_for(consumer: Consumer, seconds: float) -> list:
    got: list = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is not None:
            got.append(m)
    return got


def test_confluent_small_fetch_limits_still_make_progress(kbroker):
    # batches bigger than the fetch limits: at least one whole batch per fetch (KIP-74)
    value = b"x" * 50_000
    produce(kbroker, "big", [{"value": value, "partition": i % 2} for i in range(10)])
    consumer = confluent_consumer(
        kbroker,
        **{"fetch.max.bytes": 1000, "message.max.bytes": 1000, "max.partition.fetch.bytes": 1000},
    )
    try:
        consumer.assign([TopicPartition("big", p, 0) for p in range(2)])
        got = consume(consumer, 10)
        assert len(got) == 10 and all(m.value() == value for m in got)
    finally:
        consumer.close()
