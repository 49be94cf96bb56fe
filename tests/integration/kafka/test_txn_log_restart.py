"""The log's transaction state across a crash: on a real broker process, confluent-kafka
transactional producers commit one transaction, abort one and leave one open; the broker is
killed (SIGKILL) and its partition's ``.txnindex`` deleted while it is down. On restart the
partition replays its markers: the index is written again, the open transaction still holds
the last stable offset, read_committed consumers drop the aborted records, and the open
transaction commits afterwards."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from harness.broker import BrokerLauncher, BrokerProcess
from tests.integration.kafka.conftest import confluent_config

TOPIC = "txnlog-restart"
TOPICS = {
    TOPIC: (1, {}),
    "__transaction_state": (1, {"cleanup.policy": "compact"}),
}
T = 30.0


@pytest.fixture
def broker(tmp_path) -> Iterator[BrokerProcess]:
    launcher = BrokerLauncher(tmp_path)
    try:
        yield launcher(TOPICS, kafka=True)
    finally:
        launcher.close()


def read_committed(broker: BrokerProcess, want: int, settle_s: float = 2.0) -> list[bytes]:
    consumer = Consumer(
        confluent_config(
            broker.bootstrap,
            **{
                "group.id": f"txnlog-{uuid.uuid4().hex[:6]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            },
        )
    )
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + T
        while len(got) < want and time.monotonic() < deadline:
            m = consumer.poll(0.3)
            if m is not None and m.error() is None:
                got.append(m.value())
        end = time.monotonic() + settle_s
        while time.monotonic() < end:
            m = consumer.poll(0.3)
            if m is not None and m.error() is None:
                got.append(m.value())
        high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10, cached=False)
    finally:
        consumer.close()
    return [*got, b"lso=%d" % high[1]]


def transactional(broker: BrokerProcess, name: str) -> Producer:
    p = Producer(
        confluent_config(
            broker.bootstrap,
            **{"transactional.id": f"txnlog-r-{name}", "transaction.timeout.ms": 120_000},
        )
    )
    p.init_transactions(T)
    return p


def test_a_crash_and_a_lost_txnindex_keep_aborted_data_out(broker):
    committer, aborter, opener = (transactional(broker, n) for n in ("c", "a", "o"))
    committer.begin_transaction()
    for i in range(3):
        committer.produce(TOPIC, b"c%d" % i, partition=0)
    committer.commit_transaction(T)  # 0-2, marker 3
    aborter.begin_transaction()
    for i in range(3):
        aborter.produce(TOPIC, b"a%d" % i, partition=0)
    aborter.flush(T)
    aborter.abort_transaction(T)  # 4-6, marker 7
    opener.begin_transaction()
    opener.produce(TOPIC, b"o0", partition=0)
    assert opener.flush(T) == 0  # 8, left open
    plain = Producer(confluent_config(broker.bootstrap, acks="all"))
    plain.produce(TOPIC, b"p0", partition=0)
    assert plain.flush(T) == 0  # 9
    committed = [b"c0", b"c1", b"c2"]
    assert read_committed(broker, 3) == [*committed, b"lso=8"]

    index = broker.data_dir / f"{TOPIC}-0" / "00000000000000000000.txnindex"
    assert index.stat().st_size == 34  # one aborted transaction, Kafka's entry size
    broker.kill()
    index.unlink()
    broker.start()
    assert index.stat().st_size == 34  # written again from the log's markers
    assert read_committed(broker, 3) == [*committed, b"lso=8"]

    opener.commit_transaction(T)
    assert read_committed(broker, 5) == [*committed, b"o0", b"p0", b"lso=11"]
