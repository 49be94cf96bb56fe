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
                "times": (2, {}),
                "codecs": (1, {}),
                "sub": (2, {}),
                "wait": (1, {}),
                "reset": (1, {}),
                "__consumer_offsets": (1, {}),  # the group coordinator's
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


def test_offsets_for_times_and_ends(kbroker):
    base = 1_700_000_000_000
    msgs = [
        {"value": b"t%d" % i, "partition": i % 2, "timestamp": base + i * 1000} for i in range(20)
    ]
    produce(kbroker, "times", msgs, **{"linger.ms": 50})  # several records per batch
    consumer = confluent_consumer(kbroker)
    try:
        found = consumer.offsets_for_times(
            [TopicPartition("times", 0, base + 4500), TopicPartition("times", 1, base + 4500)],
            timeout=TIMEOUT_S,
        )
        # partition 0 holds even i (offset i/2), partition 1 odd i: first ts >= base+4500
        assert [(t.partition, t.offset) for t in found] == [(0, 3), (1, 2)]
        past = consumer.offsets_for_times([TopicPartition("times", 0, base + 99_000)], timeout=10)
        assert past[0].offset == -1  # no record at or after it (OFFSET_END)
        low, high = consumer.get_watermark_offsets(TopicPartition("times", 0), timeout=10)
        assert (low, high) == (0, 10)
        consumer.assign([found[1]])
        (m,) = consume(consumer, 1)
        assert (m.value(), m.timestamp()[1]) == (b"t5", base + 5000)
    finally:
        consumer.close()
    kp = KafkaConsumer(**kafka_python_config(kbroker.bootstrap))
    try:
        tps = [KTP("times", 0), KTP("times", 1)]
        answer = kp.offsets_for_times({tp: base + 4500 for tp in tps})
        assert [(answer[tp].offset, answer[tp].timestamp) for tp in tps] == [
            (3, base + 6000),
            (2, base + 5000),
        ]
        assert kp.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}
        assert kp.end_offsets(tps) == {tps[0]: 10, tps[1]: 10}
    finally:
        kp.close()


def test_kafka_python_reads_every_codec(kbroker):
    expected = []
    for codec in ("none", "gzip", "lz4", "zstd", "snappy"):
        msgs = [
            {
                "value": b"%s-%d" % (codec.encode(), i) * 10,
                "key": b"%d" % i,
                "headers": [("c", codec.encode())],
            }
            for i in range(5)
        ]
        produce(kbroker, "codecs", msgs, **{"compression.type": codec, "linger.ms": 5})
        expected.extend(msgs)
    consumer = KafkaConsumer(**kafka_python_config(kbroker.bootstrap))
    try:
        tp = KTP("codecs", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 20 and time.monotonic() < deadline:  # snappy last: no python-snappy
            for records in consumer.poll(timeout_ms=500, max_records=20 - len(got)).values():
                got.extend(records)
    finally:
        consumer.close()
    assert [(r.key, r.value, r.headers) for r in got[:20]] == [
        (m["key"], m["value"], m["headers"]) for m in expected[:20]
    ]
    # and confluent-kafka reads all five codecs, snappy included
    c = confluent_consumer(kbroker)
    try:
        c.assign([TopicPartition("codecs", 0, 0)])
        assert [m.value() for m in consume(c, 25)] == [m["value"] for m in expected]
    finally:
        c.close()


def test_confluent_group_subscribe_and_commit(kbroker):
    produce(kbroker, "sub", [{"value": b"s%d" % i, "partition": i % 2} for i in range(10)])
    consumer = confluent_consumer(
        kbroker, **{"group.id": "sub-group", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe(["sub"])
        got = consume(consumer, 10)
        assert sorted(m.value() for m in got) == sorted(b"s%d" % i for i in range(10))
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition("sub", p) for p in range(2)], timeout=10)
        assert sorted(tp.offset for tp in committed) == [5, 5]
    finally:
        consumer.close()


def test_confluent_long_poll(kbroker):
    consumer = confluent_consumer(kbroker, **{"fetch.wait.max.ms": 5000})
    try:
        consumer.assign([TopicPartition("wait", 0, 0)])
        assert consume_for(consumer, 1.0) == []
        produce(kbroker, "wait", [{"value": b"w"}])
        started = time.monotonic()
        (m,) = consume(consumer, 1)
        assert m.value() == b"w" and time.monotonic() - started < 3
    finally:
        consumer.close()


@pytest.mark.parametrize("fetch_path", ["sendfile", "copy"])
def test_fetch_across_many_segments(kafka_launcher, fetch_path):
    # small segments: one fetch answer spans many segment files (one slice each)
    broker = kafka_launcher(
        kafka=True,
        topics={"roll": (1, {"segment.bytes": "4096"})},
        extra_args=["--fetch-path", fetch_path],
    )
    values = [b"%04d-" % i + b"r" * 200 for i in range(400)]
    producer = Producer(confluent_config(broker.bootstrap))
    for start in range(0, 400, 10):  # a batch of 10 per request: ~2 batches a segment
        for v in values[start : start + 10]:
            producer.produce("roll", v)
        assert producer.flush(TIMEOUT_S) == 0
    segments = list((broker.data_dir / "roll-0").glob("*.log"))
    assert len(segments) > 10
    consumer = confluent_consumer(broker)
    try:
        consumer.assign([TopicPartition("roll", 0, 0)])
        got = consume(consumer, 400)
    finally:
        consumer.close()
    assert [m.value() for m in got] == values
    assert [m.offset() for m in got] == list(range(400))


def test_out_of_range_offsets_reset_as_configured(kbroker):
    produce(kbroker, "reset", [{"value": b"r%d" % i} for i in range(5)])
    for reset, expected in (("earliest", [b"r0", b"r1"]), ("latest", [b"after"])):
        consumer = confluent_consumer(kbroker, **{"auto.offset.reset": reset})
        try:
            consumer.assign([TopicPartition("reset", 0, 10_000)])  # past the end
            if reset == "latest":
                assert consume_for(consumer, 1.5) == []
                produce(kbroker, "reset", [{"value": b"after"}])
            assert [m.value() for m in consume(consumer, len(expected))] == expected
        finally:
            consumer.close()
