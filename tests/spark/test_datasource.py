"""``format("sluice")`` against real broker processes: every compression codec, range
splitting, offsets and timestamps, the same records the SDK consumer reads, the internal
topics, the operator credential, and errors a person can act on."""

from __future__ import annotations

import time

import pytest

from brokernodes.client import Consumer
from brokernodes.records.batch import Record, encode_batch
from brokernodes.records.compression import Compression
from brokernodes.server.usage import decode_usage
from spark.datasource.broker import BrokerClient, read_range

BATCH = "application/vnd.kafka.recordbatch.v2"
SECRET = "operators-secret-for-tests"
CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
T0 = 1_767_225_600_000
TOPICS = {"mixed": (3, {}), "empty": (2, {}), "__usage": (1, {})}


def produce(broker, topic, partition, records, codec=0):
    status, _, body = broker.request(
        "POST",
        f"/sluice/v1/topics/{topic}/partitions/{partition}/batches",
        encode_batch(records, compression=codec),
        headers={"Content-Type": BATCH},
    )
    assert status == 200, body
    return len(encode_batch(records, compression=codec))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from tests.integration.conftest import BrokerLauncher

    launcher = BrokerLauncher(tmp_path_factory.mktemp("ds-broker"))
    try:
        b = launcher(
            TOPICS, env={"SLUICE_USAGE_INTERVAL_S": "0.3", "SLUICE_CLUSTER_SECRET": SECRET}
        )
        n = 0
        for p in range(3):
            for i, codec in enumerate(CODECS * 2):
                recs = [
                    Record(
                        T0 + n + j,
                        None if j % 7 == 0 else f"k{j}".encode(),
                        None if j % 11 == 0 else f"v{p}-{i}-{j}".encode() * (1 + j % 3),
                        [("h", f"{j}".encode()), ("n", None)] if j % 2 else (),
                    )
                    for j in range(40)
                ]
                n += 40
                produce(b, "mixed", p, recs, codec)
        yield b
    finally:
        launcher.close()


def load(spark, broker, **options):
    r = spark.read.format("sluice").option("bootstrap", broker.url)
    r = r.option("apiKey", broker.api_key)
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load()


def sdk_records(broker, topic, partitions):
    out = []
    with Consumer(broker.url, broker.api_key, auto_offset_reset="earliest") as c:
        c.assign([(topic, p) for p in range(partitions)])
        c.seek_to_beginning()
        deadline = time.monotonic() + 30
        while len(out) < 1200 and time.monotonic() < deadline:
            out += c.poll(1.0)
    return out


def test_reads_exactly_what_the_sdk_consumer_reads(spark, broker):
    df = load(spark, broker, topic="mixed", maxRecordsPerPartition=150, includeHeaders="true")
    # 3 partitions x 400 offsets in ranges of 150: 3 x 3 Spark partitions
    assert df.rdd.getNumPartitions() == 9
    got = sorted(
        (
            r.partition,
            r.offset,
            int(r.timestamp.timestamp() * 1000),
            r.key,
            r.value,
            [(h.key, h.value) for h in r.headers],
            r.topic,
            r.timestampType,
            r.tenant,
        )
        for r in df.collect()
    )
    want = sorted(
        (
            r.partition,
            r.offset,
            r.timestamp,
            r.key,
            r.value,
            list(map(tuple, r.headers)),
            "mixed",
            0,
            None,
        )
        for r in sdk_records(broker, "mixed", 3)
    )
    assert len(got) == 1200
    assert got == want


def test_offset_ranges_timestamps_and_empty_partitions(spark, broker):
    df = load(
        spark,
        broker,
        topic="mixed",
        startingOffsets='{"mixed": {"0": 10, "1": -2, "2": -1}}',
        endingOffsets='{"mixed": {"0": 25, "1": 3, "2": -1}}',
    )
    assert sorted((r.partition, r.offset) for r in df.collect()) == [
        *((0, o) for o in range(10, 25)),
        (1, 0),
        (1, 1),
        (1, 2),
    ]
    # partition 1 holds timestamps T0+400 .. T0+799 (batch-granular start, as ListOffsets)
    df = load(
        spark,
        broker,
        topic="mixed",
        startingTimestamp=T0 + 440,
        endingTimestamp=T0 + 520,
        startingOffsetsByTimestampStrategy="latest",  # partition 0 ends before T0 + 440
    )
    offsets = sorted((r.partition, r.offset) for r in df.collect())
    assert offsets == [(1, o) for o in range(40, 120)]
    assert load(spark, broker, topic="empty").count() == 0


def test_read_range_splits_fetches_and_stops_at_the_end(broker):
    client = BrokerClient(broker.url, broker.api_key)
    try:
        (meta,) = [m for m in client.partitions("mixed") if m.partition == 2]
        got = [r.offset for r, _ in read_range(client, meta, 35, 285, max_bytes=200)]
        assert got == list(range(35, 285))
    finally:
        client.close()


def test_usage_metering_from_real_requests(spark, broker):
    """The broker meters what it served per principal and topic; the source reads it."""
    time.sleep(0.7)  # earlier tests' requests are flushed in windows that end before now
    started = time.time()
    sizes = [produce(broker, "empty", 0, [Record(T0, b"k", b"x" * 100)]) for _ in range(3)]
    status, _, body = broker.request("GET", "/sluice/v1/topics/empty/partitions/0/batches?offset=0")
    assert status == 200 and len(body) == sum(sizes)
    time.sleep(1.2)  # a few flush intervals
    rows = [
        r
        for r in load(spark, broker, topic="__usage").where("topic = 'empty'").collect()
        if r.window_end.timestamp() > started
    ]
    assert {r.principal for r in rows} == {"User:test"}
    assert sum(r.bytes_in for r in rows) == sum(sizes)
    assert sum(r.records_in for r in rows) == 3
    assert sum(r.bytes_out for r in rows) == sum(sizes)
    assert sum(r.requests for r in rows) == 4
    assert all(r.window_start < r.window_end for r in rows)


def test_operator_credential_reads_but_never_writes(spark, broker):
    df = (
        spark.read.format("sluice")
        .option("bootstrap", broker.url)
        .option("clusterSecret", SECRET)
        .option("topic", "mixed")
        .load()
    )
    assert df.count() == 1200
    status, _, body = broker.request(
        "POST",
        "/sluice/v1/topics/mixed/partitions/0/batches",
        encode_batch([Record(T0, b"k", b"v")]),
        headers={"Content-Type": BATCH, "Authorization": f"Cluster {SECRET}"},
    )
    assert status == 401 and b"only reads" in body
    status, _, _ = broker.request(
        "GET", "/sluice/v1/metadata", headers={"Authorization": "Cluster wrong"}
    )
    assert status == 401


def test_errors_say_what_to_do(spark, broker):
    with pytest.raises(Exception, match="not in the cluster metadata"):
        load(spark, broker, topic="nope").count()
    with pytest.raises(Exception, match="UNAUTHENTICATED"):
        (
            spark.read.format("sluice")
            .option("bootstrap", broker.url)
            .option("apiKey", "sk_test.wrong")
            .option("topic", "mixed")
            .load()
            .count()
        )
    with pytest.raises(Exception, match="needs option 'apiKey' or 'clusterSecret'"):
        spark.read.format("sluice").option("bootstrap", broker.url).option(
            "topic", "mixed"
        ).load().count()
    with pytest.raises(Exception, match="earliest"):
        load(spark, broker, topic="mixed", startingOffsets="yesterday").count()


def test_usage_codec_round_trip():
    from brokernodes.server.usage import UsageRecord, encode_usage

    r = UsageRecord("t", "User:a", "orders", 1, 2, 3, bytes_in=4, requests=5, throttle_ms=6)
    key, value = encode_usage(r)
    assert key == b"t\0User:a\0orders" and decode_usage(value) == r
    with pytest.raises(ValueError):
        decode_usage(b"\x00\x09{}")
