"""Transactions end to end with clients we did not write: librdkafka's transactional producer
(confluent-kafka: init_transactions, begin, produce, send_offsets_to_transaction, commit,
abort) and read_committed consumers, on a real broker with ``__transaction_state`` and
``__consumer_offsets``. Committed records are read once, aborted ones never; offsets sent
with a transaction become the group's only if it commits; a second producer with the same
transactional.id fences the first; a transaction older than its timeout is aborted; the
operator APIs (DescribeTransactions, ListTransactions) over the wire; a consume-transform-
produce worker killed mid-transaction leaves every input exactly once in the output; idle
ids expire; kafka-python's transactional producer works too."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from harness.broker import BrokerLauncher, BrokerProcess
from tests.integration.kafka.conftest import confluent_config
from tests.integration.kafka.data_plane_wire import KafkaWire

TOPICS = {
    "txn-out": (2, {}),
    "txn-in": (2, {}),
    "ctp-in": (2, {}),
    "ctp-out": (2, {}),
    "__consumer_offsets": (4, {"cleanup.policy": "compact"}),
    "__transaction_state": (4, {"cleanup.policy": "compact"}),
}
TIMEOUT_S = 30


@pytest.fixture(scope="module")
def tbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    launcher = BrokerLauncher(tmp_path_factory.mktemp("kafka-txn"))
    try:
        yield launcher(TOPICS, kafka=True)
    finally:
        launcher.close()


def txn_producer(b: BrokerProcess, tid: str, **extra) -> Producer:
    p = Producer(confluent_config(b.bootstrap, **{"transactional.id": tid, **extra}))
    p.init_transactions(TIMEOUT_S)
    return p


def read_all(b: BrokerProcess, topic: str, isolation: str, expect: int | None = None) -> list:
    """Every value of ``topic`` from the start (polling until ``expect`` values, or until
    the topic is quiet for 2 s)."""
    c = Consumer(
        confluent_config(
            b.bootstrap,
            **{
                "group.id": f"txn-reader-{uuid.uuid4().hex[:8]}",
                "isolation.level": isolation,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            },
        )
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(TOPICS[topic][0])])
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    quiet_since = time.monotonic()
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None or m.error() is not None:
                if expect is None and time.monotonic() - quiet_since > 2:
                    break
                continue
            values.append(m.value())
            quiet_since = time.monotonic()
            if expect is not None and len(values) >= expect:
                time.sleep(0.5)  # anything beyond would show now
                while (m := c.poll(0.2)) is not None:
                    if m.error() is None:
                        values.append(m.value())
                break
    finally:
        c.close()
    return values


def test_committed_records_are_read_once_and_aborted_ones_never(tbroker):
    tag = uuid.uuid4().hex[:6].encode()
    p = txn_producer(tbroker, f"txn-basic-{tag.decode()}")
    p.begin_transaction()
    for i in range(6):
        p.produce("txn-out", tag + b"-c1-%d" % i, partition=i % 2)
    p.commit_transaction(TIMEOUT_S)
    p.begin_transaction()
    for i in range(4):
        p.produce("txn-out", tag + b"-a-%d" % i, partition=i % 2)
    p.flush(TIMEOUT_S)  # the aborted records are in the log
    p.abort_transaction(TIMEOUT_S)
    p.begin_transaction()
    for i in range(3):
        p.produce("txn-out", tag + b"-c2-%d" % i, partition=i % 2)
    p.commit_transaction(TIMEOUT_S)

    committed = [v for v in read_all(tbroker, "txn-out", "read_committed", 9) if v.startswith(tag)]
    assert sorted(committed) == sorted(
        [tag + b"-c1-%d" % i for i in range(6)] + [tag + b"-c2-%d" % i for i in range(3)]
    )
    everything = [
        v for v in read_all(tbroker, "txn-out", "read_uncommitted", 13) if v.startswith(tag)
    ]
    assert len(everything) == 13  # read_uncommitted sees the aborted records too


def test_offsets_commit_with_the_transaction_only(tbroker):
    """Consume-transform-produce: the group's offsets move with a committed transaction,
    and stay where they were when the transaction aborts."""
    tag = uuid.uuid4().hex[:6]
    group = f"txn-ctp-{tag}"
    plain = Producer(confluent_config(tbroker.bootstrap, acks="all"))
    for i in range(10):
        plain.produce("txn-in", f"{tag}-in-{i}".encode(), partition=i % 2)
    assert plain.flush(TIMEOUT_S) == 0
    consumer = Consumer(
        confluent_config(
            tbroker.bootstrap,
            **{
                "group.id": group,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            },
        )
    )
    tps = [TopicPartition("txn-in", p) for p in range(2)]
    consumer.assign(tps)
    p = txn_producer(tbroker, f"txn-ctp-{tag}")
    seen: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len([v for v in seen if v.startswith(tag.encode())]) < 10:
        assert time.monotonic() < deadline, seen
        m = consumer.poll(0.2)
        if m is None or m.error() is not None:
            continue
        seen.append(m.value())
        p.begin_transaction()
        p.produce("txn-out", m.value().replace(b"-in-", b"-out-"), partition=m.partition())
        position = [TopicPartition(m.topic(), m.partition(), m.offset() + 1)]
        p.send_offsets_to_transaction(position, consumer.consumer_group_metadata(), TIMEOUT_S)
        p.commit_transaction(TIMEOUT_S)
    committed = {tp.partition: tp.offset for tp in consumer.committed(tps, TIMEOUT_S)}
    ends = {tp: consumer.get_watermark_offsets(TopicPartition("txn-in", tp))[1] for tp in (0, 1)}
    assert committed == ends

    # an aborted transaction's offsets never become the group's
    p.begin_transaction()
    p.produce("txn-out", f"{tag}-never".encode(), partition=0)
    far = [TopicPartition("txn-in", 0, ends[0] + 100)]
    p.send_offsets_to_transaction(far, consumer.consumer_group_metadata(), TIMEOUT_S)
    p.abort_transaction(TIMEOUT_S)
    assert {tp.partition: tp.offset for tp in consumer.committed(tps, TIMEOUT_S)} == ends
    consumer.close()

    outputs = [
        v for v in read_all(tbroker, "txn-out", "read_committed") if v.startswith(tag.encode())
    ]
    assert sorted(outputs) == sorted(f"{tag}-out-{i}".encode() for i in range(10))


def test_a_second_producer_fences_the_first(tbroker):
    tag = uuid.uuid4().hex[:6]
    tid = f"txn-fence-{tag}"
    zombie = txn_producer(tbroker, tid)
    zombie.begin_transaction()
    zombie.produce("txn-out", f"{tag}-zombie".encode(), partition=0)
    zombie.flush(TIMEOUT_S)
    successor = txn_producer(tbroker, tid)  # aborts the zombie's transaction, bumps the epoch
    with pytest.raises(KafkaException) as e:
        zombie.produce("txn-out", f"{tag}-zombie-2".encode(), partition=1)
        zombie.commit_transaction(TIMEOUT_S)
    error = e.value.args[0]
    assert error.fatal() or "fenced" in error.str().lower(), error
    successor.begin_transaction()
    successor.produce("txn-out", f"{tag}-successor".encode(), partition=1)
    successor.commit_transaction(TIMEOUT_S)
    values = [
        v for v in read_all(tbroker, "txn-out", "read_committed", 1) if v.startswith(tag.encode())
    ]
    assert values == [f"{tag}-successor".encode()]


def test_a_transaction_older_than_its_timeout_is_aborted(tbroker):
    tag = uuid.uuid4().hex[:6]
    tid = f"txn-timeout-{tag}"
    p = txn_producer(tbroker, tid, **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    p.produce("txn-out", f"{tag}-stuck".encode(), partition=0)
    p.flush(TIMEOUT_S)
    with KafkaWire(tbroker.bootstrap) as wire:
        listed = wire.request(apis.LIST_TRANSACTIONS, 1, {"state_filters": ["Ongoing"]})
        assert tid in [t["transactional_id"] for t in listed["transaction_states"]]
        described = wire.request(apis.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]})
        (state,) = described["transaction_states"]
        assert state["error_code"] == kerr.NONE and state["transaction_state"] == "Ongoing"
        assert state["topics"] == [{"topic": "txn-out", "partitions": [0]}]
        assert state["transaction_timeout_ms"] == 2000
        deadline = time.monotonic() + TIMEOUT_S
        while True:  # the coordinator aborts it once the timeout passes
            (state,) = wire.request(apis.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]})[
                "transaction_states"
            ]
            if state["transaction_state"] == "CompleteAbort":
                break
            assert time.monotonic() < deadline, state
            time.sleep(0.2)
        missing = wire.request(apis.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["nope"]})
        assert missing["transaction_states"][0]["error_code"] == kerr.TRANSACTIONAL_ID_NOT_FOUND
    with pytest.raises(KafkaException):
        p.commit_transaction(TIMEOUT_S)
    assert [
        v for v in read_all(tbroker, "txn-out", "read_committed") if v.startswith(tag.encode())
    ] == []


def test_transactional_batches_outside_a_transaction_are_refused(tbroker):
    from brokernodes.records.batch import encode_batch

    with KafkaWire(tbroker.bootstrap) as wire:
        init = wire.request(
            apis.INIT_PRODUCER_ID,
            4,
            {"transactional_id": "txn-wire", "transaction_timeout_ms": 60000},
        )
        assert init["error_code"] == kerr.NONE
        batch = encode_batch(
            [(0, None, b"x")],
            producer_id=init["producer_id"],
            producer_epoch=init["producer_epoch"],
            base_sequence=0,
            is_transactional=True,
        )

        def produce(transactional_id):
            body = {
                "transactional_id": transactional_id,
                "acks": -1,
                "timeout_ms": 5000,
                "topic_data": [
                    {"name": "txn-out", "partition_data": [{"index": 0, "records": batch}]}
                ],
            }
            answer = wire.request(apis.PRODUCE, 9, body)
            return answer["responses"][0]["partition_responses"][0]

        assert produce(None)["error_code"] == kerr.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        refused = produce("txn-wire")  # not added with AddPartitionsToTxn
        assert refused["error_code"] == kerr.INVALID_TXN_STATE
        assert "AddPartitionsToTxn" in refused["error_message"]
        bad = wire.request(
            apis.INIT_PRODUCER_ID, 4, {"transactional_id": "txn-wire", "transaction_timeout_ms": 0}
        )
        assert bad["error_code"] == kerr.INVALID_TRANSACTION_TIMEOUT


def test_an_idle_transactional_id_is_forgotten(kafka_launcher):
    """After ``transactional.id.expiration.ms`` without a request the id is tombstoned: it is
    unknown, also after a restart, and its next producer starts afresh."""
    b = kafka_launcher(TOPICS, kafka=True, env={"SLUICE_TRANSACTIONAL_ID_EXPIRATION_MS": "1500"})
    p = txn_producer(b, "txn-idle")
    p.begin_transaction()
    p.produce("txn-out", b"idle-1", partition=0)
    p.commit_transaction(TIMEOUT_S)

    def state() -> int:
        with KafkaWire(b.bootstrap) as wire:
            a = wire.request(apis.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["txn-idle"]})
        return a["transaction_states"][0]["error_code"]

    assert state() == kerr.NONE
    deadline = time.monotonic() + TIMEOUT_S
    while state() != kerr.TRANSACTIONAL_ID_NOT_FOUND:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    b.restart()
    assert state() == kerr.TRANSACTIONAL_ID_NOT_FOUND  # the tombstone is in the log
    again = txn_producer(b, "txn-idle")
    again.begin_transaction()
    again.produce("txn-out", b"idle-2", partition=0)
    again.commit_transaction(TIMEOUT_S)
    assert state() == kerr.NONE


def test_consume_transform_produce_is_exactly_once_across_a_killed_worker(tbroker):
    """A worker process killed with SIGKILL mid-transaction, then a new instance with the same
    transactional.id and group: the zombie's open transaction is aborted, the new one resumes
    at the committed offsets, and every input appears exactly once in the output."""
    plain = Producer(confluent_config(tbroker.bootstrap, acks="all"))
    for i in range(120):
        plain.produce("ctp-in", b"in-%03d" % i, partition=i % 2)
    assert plain.flush(TIMEOUT_S) == 0
    worker = [sys.executable, str(Path(__file__).with_name("txn_worker.py")), tbroker.bootstrap]
    args = ["ctp-tx", "ctp-group"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    first = subprocess.Popen(
        [*worker, *args, "0.3", "5"], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        lines = [first.stdout.readline().strip() for _ in range(9)]
        # four transactions committed, and the fifth's records written: die inside it
        assert lines == ["open", "committed"] * 4 + ["open"], lines
    finally:
        first.kill()
        first.wait(10)
    second = subprocess.run(
        [*worker, *args, "0", "3"], capture_output=True, env=env, text=True, timeout=120
    )
    assert second.returncode == 0, second.stderr[-2000:]
    outputs = read_all(tbroker, "ctp-out", "read_committed", 120)
    assert sorted(outputs) == [b"out-%03d" % i for i in range(120)]
    # the zombie's records are in the log, aborted: read_uncommitted sees them twice
    assert len(read_all(tbroker, "ctp-out", "read_uncommitted")) > 120


def test_kafka_python_transactions(tbroker):
    """kafka-python's transactional producer (another client's request versions and retry
    logic): a commit is read once by read_committed, an abort never."""
    from kafka import KafkaProducer

    from tests.integration.kafka.conftest import kafka_python_config

    tag = uuid.uuid4().hex[:6]
    p = KafkaProducer(**kafka_python_config(tbroker.bootstrap, transactional_id=f"kp-{tag}"))
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(4):
            p.send("txn-out", f"{tag}-kc-{i}".encode(), partition=i % 2)
        p.commit_transaction()
        p.begin_transaction()
        p.send("txn-out", f"{tag}-ka".encode(), partition=0)
        p.flush()
        p.abort_transaction()
    finally:
        p.close(timeout=5)
    values = [
        v for v in read_all(tbroker, "txn-out", "read_committed") if v.startswith(tag.encode())
    ]
    assert sorted(values) == [f"{tag}-kc-{i}".encode() for i in range(4)]
