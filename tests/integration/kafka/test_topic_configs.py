"""Topic configs a leader applies on append, on a real broker process: a LogAppendTime topic
(binary, JSON and Kafka produce answer the append time; Kafka consumers see LogAppendTime;
ListOffsets by timestamp uses it) and a compression.type=zstd topic (stored as zstd whatever
the producer sent; read back by confluent-kafka and the SDK)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition

from brokernodes.client.consumer import AsyncConsumer
from brokernodes.client.producer import AsyncProducer
from brokernodes.records.batch import decode_batches
from brokernodes.records.compression import Compression
from brokernodes.records.header import iter_batches
from brokernodes.server.protocol.json_records import parse_timestamp
from harness.broker import BrokerLauncher, BrokerProcess
from tests.integration.broker.util import batch, fetch_binary, produce_binary, produce_json
from tests.integration.kafka.conftest import confluent_config

TIMEOUT_S = 20.0
OLD = 1_000_000_000_000  # a producer clock in 2001
LAT = {"message.timestamp.type": "LogAppendTime", "message.timestamp.before.max.ms": "60000"}


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    launcher = BrokerLauncher(tmp_path_factory.mktemp("topic-configs"))
    try:
        yield launcher(
            kafka=True,
            topics={
                "lat-binary": (1, LAT),
                "lat-json": (1, LAT),
                "lat-kafka": (1, LAT),
                "lat-sdk": (1, LAT),
                "zstd": (1, {"compression.type": "zstd"}),
                "gzip-json": (1, {"compression.type": "gzip"}),
                "created": (1, {"message.timestamp.before.max.ms": "60000"}),
                "__consumer_offsets": (1, {}),
            },
        )
    finally:
        launcher.close()


def now_ms() -> int:
    return int(time.time() * 1000)


def stored(broker: BrokerProcess, topic: str) -> bytes:
    status, _, body = fetch_binary(broker, topic, 0, 0)
    assert status == 200, body
    return body


def segment_bytes(broker: BrokerProcess, topic: str) -> bytes:
    """The partition's first segment file, as on disk."""
    (directory,) = [d for d in broker.data_dir.iterdir() if d.name == f"{topic}-0"]
    return (directory / f"{0:020d}.log").read_bytes()


def confluent_consumer(broker: BrokerProcess) -> Consumer:
    return Consumer(
        confluent_config(broker.bootstrap, **{"group.id": "g", "enable.auto.commit": False})
    )


def consume(consumer: Consumer, n: int) -> list:
    got: list = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < n and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(m)
    return got


def test_binary_produce_answers_the_append_time_and_stores_it(kbroker):
    before = now_ms()
    status, answer = produce_binary(kbroker, "lat-binary", 0, batch([b"a", b"b"], ts=OLD))
    after = now_ms()
    assert status == 200, answer
    append_time = answer["log_append_time"]
    assert before <= append_time <= after
    (h,) = list(iter_batches(stored(kbroker, "lat-binary")))  # CRC verified
    assert h.timestamp_type == 1 and h.max_timestamp == append_time
    (b,) = decode_batches(stored(kbroker, "lat-binary"))
    assert [r.timestamp for r in b.records] == [append_time, append_time]


def test_a_create_time_topic_answers_minus_one_and_keeps_kip_937(kbroker):
    status, answer = produce_binary(kbroker, "created", 0, batch([b"a"]))
    assert status == 200 and answer["log_append_time"] == -1
    status, answer = produce_binary(kbroker, "created", 0, batch([b"old"], ts=OLD))
    assert status == 400 and answer["error_code"] == "INVALID_TIMESTAMP"


def test_json_produce_answers_the_append_time(kbroker):
    before = now_ms()
    status, answer = produce_json(
        kbroker, "lat-json", {"value": {"type": "STRING", "data": "x"}, "timestamp": OLD}
    )
    assert status == 200, answer
    (h,) = list(iter_batches(stored(kbroker, "lat-json")))
    assert h.timestamp_type == 1 and h.max_timestamp >= before
    assert parse_timestamp(answer["timestamp"], "timestamp") == h.max_timestamp


def test_kafka_produce_consume_and_list_offsets_use_the_append_time(kbroker):
    reports: list = []
    producer = Producer(confluent_config(kbroker.bootstrap, **{"linger.ms": 0}))
    before = now_ms()
    for i in range(3):
        producer.produce(
            "lat-kafka",
            value=b"k%d" % i,
            timestamp=OLD + i,
            on_delivery=lambda e, m: reports.append((e, m)),
        )
        producer.flush(TIMEOUT_S)
        time.sleep(0.01)  # distinct append times
    assert producer.flush(TIMEOUT_S) == 0
    assert [e for e, _ in reports] == [None] * 3
    stamps = [m.timestamp() for _, m in reports]
    assert all(kind == TIMESTAMP_LOG_APPEND_TIME and ts >= before for kind, ts in stamps)
    times = [ts for _, ts in stamps]
    assert times == sorted(times) and len(set(times)) == 3

    consumer = confluent_consumer(kbroker)
    try:
        consumer.assign([TopicPartition("lat-kafka", 0, 0)])
        got = consume(consumer, 3)
        assert [m.timestamp() for m in got] == stamps  # the broker's, not the producer's
        found = consumer.offsets_for_times(
            [TopicPartition("lat-kafka", 0, times[1])], timeout=TIMEOUT_S
        )
        assert found[0].offset == 1
        past = consumer.offsets_for_times(
            [TopicPartition("lat-kafka", 0, times[2] + 1)], timeout=TIMEOUT_S
        )
        assert past[0].offset == -1
    finally:
        consumer.close()


def test_the_sdk_producer_and_consumer_see_the_append_time(kbroker):
    async def main():
        async with AsyncProducer(kbroker.url, kbroker.api_key, enable_idempotence=True) as p:
            meta = await p.send_and_wait("lat-sdk", b"x", timestamp=OLD)
        async with AsyncConsumer(kbroker.url, kbroker.api_key, fetch_max_wait_ms=100) as c:
            c.assign([("lat-sdk", 0)])
            await c.seek_to_beginning()
            records: list = []
            deadline = time.monotonic() + TIMEOUT_S
            while not records and time.monotonic() < deadline:
                records.extend(await c.poll(0.5))
        return meta, records

    before = now_ms()
    meta, records = asyncio.run(asyncio.wait_for(main(), TIMEOUT_S + 5))
    assert before <= meta.timestamp <= now_ms()
    assert [(r.value, r.timestamp) for r in records] == [(b"x", meta.timestamp)]


def test_a_zstd_topic_stores_zstd_whatever_is_sent(kbroker):
    values = [b"plain-%d " % i * 30 for i in range(20)]
    status, answer = produce_binary(kbroker, "zstd", 0, batch(values[:10]))
    assert status == 200, answer
    producer = Producer(confluent_config(kbroker.bootstrap, **{"compression.type": "lz4"}))
    for v in values[10:]:
        producer.produce("zstd", value=v)
    assert producer.flush(TIMEOUT_S) == 0
    on_disk = segment_bytes(kbroker, "zstd")
    headers = list(iter_batches(on_disk))
    assert headers and all(h.compression == Compression.ZSTD for h in headers)
    assert list(iter_batches(stored(kbroker, "zstd"))) == headers  # fetch serves those bytes

    consumer = confluent_consumer(kbroker)
    try:
        consumer.assign([TopicPartition("zstd", 0, 0)])
        assert [m.value() for m in consume(consumer, 20)] == values
    finally:
        consumer.close()

    async def sdk_read() -> list[bytes]:
        async with AsyncConsumer(kbroker.url, kbroker.api_key, fetch_max_wait_ms=100) as c:
            c.assign([("zstd", 0)])
            await c.seek_to_beginning()
            got: list = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 20 and time.monotonic() < deadline:
                got.extend(await c.poll(0.5))
            return [r.value for r in got]

    assert asyncio.run(asyncio.wait_for(sdk_read(), TIMEOUT_S + 5)) == values


def test_json_produce_builds_its_batch_in_the_topics_codec(kbroker):
    for i in range(2):
        status, answer = produce_json(
            kbroker, "gzip-json", {"value": {"type": "STRING", "data": f"json-{i}"}}
        )
        assert status == 200, answer
    data = stored(kbroker, "gzip-json")
    assert [h.compression for h in iter_batches(data)] == [Compression.GZIP] * 2
    assert [r.value for b in decode_batches(data) for r in b.records] == [b"json-0", b"json-1"]
