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

import asyncio
import json
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTP

from brokernodes.records.batch import Record, encode_batch
from brokernodes.server.broker import Broker
from brokernodes.server.config import BrokerConfig
from brokernodes.server.kafka.listener import KafkaListener
from brokernodes.server.metadata.cluster import StaticMetadataSource
from harness.broker import free_port, make_metadata
from tests.integration.kafka.conftest import confluent_config, kafka_python_config

TOPIC = "txnlog-rc"
TIMEOUT_S = 20.0


class LoopBroker:
    """A broker with its Kafka listener on an event loop in a thread of its own."""

    def __init__(self, tmp_path) -> None:
        self.kafka_port = free_port()
        meta = tmp_path / "metadata.json"
        doc = make_metadata(free_port(), {TOPIC: (1, {})}, kafka_port=self.kafka_port)
        meta.write_text(json.dumps(doc))
        config = BrokerConfig(
            str(meta), str(tmp_path / "data"), 0, fsync=False, kafka_port=self.kafka_port
        )
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def start() -> tuple[Broker, KafkaListener]:
            broker = Broker(config, StaticMetadataSource(str(meta)))
            await broker.start()
            listener = KafkaListener(broker)
            await listener.start()
            return broker, listener

        self.broker, self.listener = self.call(start())
        self.bootstrap = f"127.0.0.1:{self.kafka_port}"

    def call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(TIMEOUT_S)

    @property
    def partition(self):
        return self.broker.replicas.get_partition(TOPIC, 0)

    def append(self, values: list[str], pid: int = -1, seq: int = -1) -> int:
        buf = bytearray(
            encode_batch(
                [Record(int(time.time() * 1000), None, v.encode()) for v in values],
                producer_id=pid,
                producer_epoch=0 if pid >= 0 else -1,
                base_sequence=seq,
                is_transactional=pid >= 0,
            )
        )
        return self.call(self.partition.append_as_leader(buf, acks=-1)).base_offset

    def end_txn(self, pid: int, commit: bool) -> int:
        return self.call(self.partition.write_txn_marker(pid, 0, commit, 0))

    def close(self) -> None:
        async def stop() -> None:
            await self.listener.close(1.0)
            await self.broker.close()

        try:
            self.call(stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
            self.loop.close()


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


def write_mixed_log(node: LoopBroker) -> None:
    """0-1 producer 11 (committed), 2-4 producer 12 (aborted), 5 plain, 6 commit 11,
    7 abort 12, 8 producer 13 (left open), 9 plain."""
    node.append(["c0", "c1"], pid=11, seq=0)
    node.append(["a0", "a1", "a2"], pid=12, seq=0)
    node.append(["p0"])
    assert node.end_txn(11, commit=True) == 6
    assert node.end_txn(12, commit=False) == 7
    node.append(["o0"], pid=13, seq=0)
    node.append(["p1"])


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
