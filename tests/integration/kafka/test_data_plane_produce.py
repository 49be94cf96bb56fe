"""Produce and InitProducerId over the Kafka protocol, with confluent-kafka and kafka-python;
what they wrote is read back over the binary HTTP fetch (the same partition logs)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException, Producer
from kafka import KafkaProducer

from brokernodes.records.batch import decode_batches
from harness.broker import BrokerLauncher, BrokerProcess
from tests.integration.broker.util import fetch_binary
from tests.integration.kafka.conftest import confluent_config, kafka_python_config

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by this module (tests use their own topics or partitions)."""
    launcher = BrokerLauncher(tmp_path_factory.mktemp("kafka-produce"))
    try:
        yield launcher(
            kafka=True,
            topics={
                "codecs": (1, {}),
                "acks": (1, {}),
                "idem": (1, {}),
                "kp": (1, {}),
                "multi": (4, {}),
                "small": (1, {"max.message.bytes": "2048"}),
                "__consumer_offsets": (1, {}),  # the coordinators' (FindCoordinator)
            },
        )
    finally:
        launcher.close()


def records(broker: BrokerProcess, topic: str, partition: int = 0) -> list:
    """Every record of a partition, read over HTTP (binary fetch)."""
    out, offset = [], 0
    for _ in range(100):
        status, _, body = fetch_binary(broker, topic, partition, offset)
        assert status == 200, body
        if not body:
            return out
        for b in decode_batches(body):
            out.extend(r for r in b.records if r.offset >= offset)
        offset = out[-1].offset + 1
    raise AssertionError("partition did not end")


def produce_all(config: dict, topic: str, messages: list[dict]) -> list:
    """Produce with confluent-kafka; every delivery report (error, message)."""
    producer = Producer(config)
    reports: list = []
    for m in messages:
        producer.produce(topic, on_delivery=lambda e, msg: reports.append((e, msg)), **m)
    assert producer.flush(20) == 0
    assert len(reports) == len(messages)
    return reports


def test_confluent_every_codec_and_acks_round_trip(kbroker):
    expected = []
    for acks in ("0", "1", "all"):
        for codec in CODECS:
            config = confluent_config(
                kbroker.bootstrap, acks=acks, **{"compression.type": codec, "linger.ms": 5}
            )
            msgs = [
                {
                    "value": f"{acks}/{codec}/{i}".encode() * 20,
                    "key": f"k{i}".encode(),
                    "headers": [("h", f"{i}".encode()), ("empty", b"")],
                    "timestamp": 1_700_000_000_000 + i,
                }
                for i in range(10)
            ]
            reports = produce_all(config, "codecs", msgs)
            assert all(e is None for e, _ in reports), reports[0]
            if acks != "0":  # acks=0: the client learns no offset
                offsets = [m.offset() for _, m in reports]
                assert offsets == list(range(offsets[0], offsets[0] + 10))
            expected.extend(msgs)
    got = records(kbroker, "codecs")
    assert [r.offset for r in got] == list(range(len(expected)))
    assert [r.value for r in got] == [m["value"] for m in expected]
    assert [r.key for r in got] == [m["key"] for m in expected]
    assert [r.timestamp for r in got] == [m["timestamp"] for m in expected]
    assert [r.headers for r in got] == [m["headers"] for m in expected]


def test_confluent_idempotent_producer(kbroker):
    config = confluent_config(kbroker.bootstrap, **{"enable.idempotence": True, "linger.ms": 2})
    reports = produce_all(config, "idem", [{"value": b"i%d" % i} for i in range(200)])
    assert all(e is None for e, _ in reports)
    got = records(kbroker, "idem")
    assert [r.value for r in got] == [b"i%d" % i for i in range(200)]
    _, _, body = fetch_binary(kbroker, "idem", 0, 0)
    headers = [b.header for b in decode_batches(body)]
    assert all(h.producer_id >= 0 and h.producer_epoch == 0 for h in headers)
    assert headers[0].base_sequence == 0


def test_confluent_errors_are_per_partition(kbroker):
    config = confluent_config(kbroker.bootstrap, **{"message.max.bytes": 100_000})
    reports = produce_all(config, "small", [{"value": b"x" * 50_000}])
    ((error, _),) = reports
    assert error is not None and error.name() == "MSG_SIZE_TOO_LARGE"
    producer = Producer(confluent_config(kbroker.bootstrap, **{"message.timeout.ms": 3000}))
    reports = []
    producer.produce("no-such-topic", b"v", on_delivery=lambda e, m: reports.append(e))
    producer.flush(10)
    assert reports and reports[0] is not None
    assert reports[0].name() in ("UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC", "_MSG_TIMED_OUT")


def test_no_transaction_coordinator_without_the_state_topic(kbroker):
    """A cluster without ``__transaction_state`` has no transaction coordinator: librdkafka
    keeps looking for one (COORDINATOR_NOT_AVAILABLE is retriable) until its timeout."""
    producer = Producer(confluent_config(kbroker.bootstrap, **{"transactional.id": "tx-1"}))
    with pytest.raises(KafkaException) as e:
        producer.init_transactions(3)
    assert e.value.args[0].retriable() or e.value.args[0].code() < 0


@pytest.mark.parametrize(
    ("codec", "acks", "idempotent"),
    [(None, 0, False), ("gzip", 1, False), ("lz4", "all", False), ("zstd", "all", True)],
)
def test_kafka_python_produce(kbroker, codec, acks, idempotent):
    producer = KafkaProducer(
        **kafka_python_config(
            kbroker.bootstrap, acks=acks, compression_type=codec, enable_idempotence=idempotent
        )
    )
    try:
        before = len(records(kbroker, "kp"))
        futures = [
            producer.send("kp", b"kp-%d" % i, key=b"key", headers=[("a", b"1")]) for i in range(20)
        ]
        metas = [f.get(timeout=15) for f in futures]
        producer.flush(timeout=10)
    finally:
        producer.close(timeout=10)
    if acks != 0:  # acks=0: the client learns no offsets
        assert [m.offset for m in metas] == list(range(before, before + 20))
    got = records(kbroker, "kp")[before:]
    assert [(r.key, r.value, r.headers) for r in got] == [
        (b"key", b"kp-%d" % i, [("a", b"1")]) for i in range(20)
    ]
    if idempotent:
        _, _, body = fetch_binary(kbroker, "kp", 0, before)
        assert all(b.header.producer_id >= 0 for b in decode_batches(body))


def test_keys_land_on_the_partition_kafka_would_choose(kbroker):
    # murmur2 of the key, as Kafka's Java client and librdkafka's murmur2 partitioner do
    config = confluent_config(kbroker.bootstrap, partitioner="murmur2_random")
    keys = [b"key-%d" % i for i in range(40)]
    reports = produce_all(config, "multi", [{"key": k, "value": k} for k in keys])
    where = {m.key(): m.partition() for _, m in reports}
    assert len(set(where.values())) > 1
    for p in range(4):
        got = records(kbroker, "multi", p)
        assert {r.key for r in got} == {k for k, q in where.items() if q == p}
