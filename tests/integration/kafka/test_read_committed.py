"""read_committed consumers over the Kafka protocol against transactional data: real
confluent-kafka and kafka-python consumers on loopback against a broker whose log receives
transactional batches and COMMIT/ABORT markers through the partition API (the broker runs
in this process, on an event loop thread of its own, so the test can call
``Partition.write_txn_marker`` the way the transaction coordinator does).

Checked: a read_committed consumer sees committed and non-transactional records only, never
an aborted or an open transaction's, and stops at the last stable offset until the open
transaction ends; read_uncommitted sees everything; ListOffsets latest is the LSO for
read_committed and the high watermark otherwise."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTP

from tests.integration.kafka.conftest import confluent_config, kafka_python_config
from tests.integration.kafka.txn_loop_broker import TIMEOUT_S, TOPIC, LoopBroker, write_mixed_log


@pytest.fixture
def node(tmp_path) -> Iterator[LoopBroker]:
    b = LoopBroker(tmp_path)
    try:
        yield b
    finally:
        b.close()


def confluent_values(consumer: Consumer, want: int, settle_s: float = 2.0) -> list[str]:
    """Values polled until ``want`` arrived and ``settle_s`` more passed with nothing new
    (so a record that should not come has had its chance)."""
    got: list[str] = []
    deadline = time.monotonic() + TIMEOUT_S
    quiet_until = None
    while time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(m.value().decode())
            quiet_until = None
            continue
        if len(got) >= want:
            quiet_until = quiet_until or time.monotonic() + settle_s
            if time.monotonic() >= quiet_until:
                break
    return got


def test_confluent_read_committed_sees_only_committed_data(node):
    write_mixed_log(node)
    assert node.partition.last_stable_offset == 8
    committed = Consumer(
        confluent_config(
            node.bootstrap,
            **{
                "group.id": "txnlog-rc",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            },
        )
    )
    uncommitted = Consumer(
        confluent_config(
            node.bootstrap,
            **{
                "group.id": "txnlog-ru",
                "enable.auto.commit": False,
                "isolation.level": "read_uncommitted",
            },
        )
    )
    try:
        committed.assign([TopicPartition(TOPIC, 0, 0)])
        uncommitted.assign([TopicPartition(TOPIC, 0, 0)])
        assert confluent_values(committed, 3) == ["c0", "c1", "p0"]
        assert confluent_values(uncommitted, 8, settle_s=0.5) == [
            "c0", "c1", "a0", "a1", "a2", "p0", "o0", "p1",
        ]  # fmt: skip
        # ListOffsets latest: the LSO for read_committed, the HW otherwise
        tp = TopicPartition(TOPIC, 0)
        assert committed.get_watermark_offsets(tp, timeout=10, cached=False) == (0, 8)
        assert uncommitted.get_watermark_offsets(tp, timeout=10, cached=False) == (0, 10)
        # the open transaction commits: the read_committed consumer goes on past it
        assert node.end_txn(13, commit=True) == 10
        assert confluent_values(committed, 2, settle_s=0.5) == ["o0", "p1"]
    finally:
        committed.close()
        uncommitted.close()


def test_kafka_python_read_committed_drops_aborted_batches(node):
    write_mixed_log(node)
    node.end_txn(13, commit=False)  # 10: the open transaction is aborted too
    node.append(["p2"])  # 11
    consumer = KafkaConsumer(
        **kafka_python_config(
            node.bootstrap,
            isolation_level="read_committed",
            enable_auto_commit=False,
            consumer_timeout_ms=3000,
        )
    )
    try:
        consumer.assign([KTP(TOPIC, 0)])
        consumer.seek(KTP(TOPIC, 0), 0)
        got = [m.value.decode() for m in consumer]
        assert got == ["c0", "c1", "p0", "p1", "p2"]
        assert consumer.end_offsets([KTP(TOPIC, 0)])[KTP(TOPIC, 0)] == 12
    finally:
        consumer.close()
