"""``spark.readStream.format("sluice")`` on real broker processes.

The driver's half (offsets, subscriptions, admission control, AvailableNow, data loss) is
called directly against a broker, which is quick and exact; Spark's engine then runs the
source end to end: a query stopped mid-way and restarted from its checkpoint, with more
records and a partition added in between, writes every record of the log exactly once into
a file sink; data loss reaches the user as a failed query; unsupported options fail at load.
"""

from __future__ import annotations

import json
import logging
import time

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from brokernodes.records.batch import Record, encode_batch
from spark.datasource.options import parse_source_options
from spark.datasource.plan import OffsetRange
from spark.datasource.reading import DataLossError, PartitionReader
from spark.datasource.source import schema_of
from spark.datasource.stream import SluiceStreamReader

BATCH = "application/vnd.kafka.recordbatch.v2"
T0 = 1_767_225_600_000
TOPICS = {
    "ev-a": (2, {}),
    "ev-b": (1, {}),
    "other": (1, {}),
    "short": (1, {"segment.bytes": "2048", "retention.bytes": "4096"}),
}
QUERY_TIMEOUT_S = 120


def produce(broker, topic: str, partition: int, first: int, n: int, per_batch: int = 20) -> None:
    """Records ``first .. first+n-1`` of a partition: key ``k<i>``, value ``<topic>-<p>-<i>``,
    timestamp ``T0 + i``, one header."""
    for lo in range(first, first + n, per_batch):
        recs = [
            Record(
                T0 + i, f"k{i}".encode(), f"{topic}-{partition}-{i}".encode(), [("i", b"%d" % i)]
            )
            for i in range(lo, min(lo + per_batch, first + n))
        ]
        status, _, body = broker.request(
            "POST",
            f"/sluice/v1/topics/{topic}/partitions/{partition}/batches",
            encode_batch(recs),
            headers={"Content-Type": BATCH},
        )
        assert status == 200, body


def expected(topic: str, partition: int, offsets) -> list[tuple]:
    return [
        (topic, partition, i, f"k{i}".encode(), f"{topic}-{partition}-{i}".encode(), T0 + i)
        for i in offsets
    ]


@pytest.fixture(scope="module")
def broker(spark, tmp_path_factory):  # spark: schemas parse in its JVM
    from tests.integration.conftest import BrokerLauncher

    launcher = BrokerLauncher(tmp_path_factory.mktemp("stream-broker"))
    try:
        b = launcher(TOPICS, extra_args=["--housekeeping-interval-ms", "200"])
        produce(b, "ev-a", 0, 0, 300)
        produce(b, "ev-a", 1, 0, 60)
        produce(b, "ev-b", 0, 0, 40)
        produce(b, "other", 0, 0, 10)
        yield b
    finally:
        launcher.close()


def stream_reader(broker, **options) -> SluiceStreamReader:
    opts = parse_source_options(
        {"bootstrap": broker.url, "apiKey": broker.api_key, **options}, streaming=True
    )
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(schema_of(opts))
    return SluiceStreamReader(opts, PartitionReader(opts, "raw", schema))


def rows_of(reader, start: dict, end: dict) -> list[tuple]:
    out = []
    for part in reader.partitions(start, end):
        for batch in reader.read(part):
            for r in batch.to_pylist():
                ts = int(r["timestamp"].timestamp() * 1000)
                out.append((r["topic"], r["partition"], r["offset"], r["key"], r["value"], ts))
    return sorted(out)


def test_offsets_subscriptions_and_trigger_limits(broker):
    reader = stream_reader(broker, subscribePattern="ev-.*", startingOffsets="earliest")
    start = reader.initialOffset()
    assert start == {"ev-a": {"0": 0, "1": 0}, "ev-b": {"0": 0}}  # not 'other' nor 'short'
    assert json.dumps(start) == '{"ev-a": {"0": 0, "1": 0}, "ev-b": {"0": 0}}'
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"ev-a": {"0": 300, "1": 60}, "ev-b": {"0": 40}}
    assert reader.reportLatestOffset() == end
    assert rows_of(reader, start, end) == sorted(
        expected("ev-a", 0, range(300))
        + expected("ev-a", 1, range(60))
        + expected("ev-b", 0, range(40))
    )
    assert reader.partitions(end, end) == []
    assert reader.latestOffset(end, ReadAllAvailable()) is end  # nothing new: the same start

    # maxOffsetsPerTrigger: 40 offsets spread 300:60:40 over the backlog
    limited = stream_reader(
        broker, subscribe="ev-a,ev-b", maxOffsetsPerTrigger="40", startingOffsets="earliest"
    )
    limit = limited.getDefaultReadLimit()
    assert limit == ReadMaxRows(40)
    first = limited.latestOffset(limited.initialOffset(), limit)
    assert first == {"ev-a": {"0": 30, "1": 6}, "ev-b": {"0": 4}}
    # the engine's ReadAllAvailable (Trigger.Once) overrides the options
    assert limited.latestOffset(first, ReadAllAvailable()) == end

    # assign and startingOffsets latest / JSON
    assigned = stream_reader(broker, assign='{"ev-a": [1]}')
    assert assigned.initialOffset() == {"ev-a": {"1": 60}}
    assigned = stream_reader(broker, assign='{"ev-a": [1]}', startingOffsets='{"ev-a": {"1": 55}}')
    s = assigned.initialOffset()
    assert rows_of(assigned, s, assigned.latestOffset(s, ReadAllAvailable())) == expected(
        "ev-a", 1, range(55, 60)
    )


def test_starting_by_timestamp(broker):
    # ev-a-0 holds T0 .. T0+299 in batches of 20: ListOffsets is batch-granular
    r = stream_reader(
        broker,
        subscribe="ev-a",
        startingOffsetsByTimestamp=json.dumps({"ev-a": {"0": T0 + 45, "1": T0 + 10}}),
    )
    assert r.initialOffset() == {"ev-a": {"0": 40, "1": 0}}
    r = stream_reader(broker, subscribe="ev-a", startingTimestamp=str(T0 + 100))
    with pytest.raises(Exception, match="ev-a-1 has no record stamped at or after"):
        r.initialOffset()  # ev-a-1 ends at T0+59; Kafka's default strategy is 'error'
    r = stream_reader(
        broker,
        subscribe="ev-a",
        startingTimestamp=str(T0 + 100),
        startingOffsetsByTimestampStrategy="latest",
    )
    assert r.initialOffset() == {"ev-a": {"0": 100, "1": 60}}


def test_min_offsets_wait_at_most_max_trigger_delay(broker):
    r = stream_reader(
        broker,
        subscribe="ev-b",
        startingOffsets='{"ev-b": {"0": 30}}',
        minOffsetsPerTrigger="20",
        maxTriggerDelay="1s",
    )
    start = r.initialOffset()
    limit = r.getDefaultReadLimit()
    assert r.latestOffset(start, limit) is start  # 10 waiting, fewer than 20: hold
    time.sleep(1.1)
    assert r.latestOffset(start, limit) == {"ev-b": {"0": 40}}  # waited long enough


def test_available_now_stops_at_the_target(broker):
    r = stream_reader(
        broker,
        subscribe="other",
        startingOffsets="earliest",
        maxOffsetsPerTrigger="6",
        minOffsetsPerTrigger="5",
    )
    start = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    produce(broker, "other", 0, 10, 5)  # after the target: not part of this run
    limit = r.getDefaultReadLimit()
    first = r.latestOffset(start, limit)
    assert first == {"other": {"0": 6}}
    second = r.latestOffset(first, limit)
    assert second == {"other": {"0": 10}}  # 4 left, below minOffsets: AvailableNow reads them
    assert r.latestOffset(second, limit) is second


@pytest.fixture(scope="module")
def short_log(broker) -> tuple[int, int]:
    """``short`` after retention deleted its first records: (log start, high watermark)."""
    for i in range(0, 60, 4):
        produce(broker, "short", 0, i, 4, per_batch=4)  # ~200-byte batches, 2 KiB segments
    path = "/sluice/v1/topics/short/partitions/0/offsets?timestamp="
    deadline = time.monotonic() + 15
    seen = [0]
    while time.monotonic() < deadline:  # until retention has done all it will
        seen.append(broker.json("GET", path + "earliest")[1]["offset"])
        if seen[-1] > 0 and seen[-1] == seen[-2]:
            return seen[-1], broker.json("GET", path + "latest")[1]["offset"]
        time.sleep(0.5)
    raise AssertionError(f"retention never settled the log start of 'short': {seen}")


def test_data_loss_fails_or_is_skipped_and_counted(broker, short_log, caplog):
    log_start, hw = short_log
    part = OffsetRange("short", 0, 0, hw, 1, broker.url)

    strict = stream_reader(broker, subscribe="short")
    with pytest.raises(DataLossError) as e:
        list(strict.read(part))
    assert f"short-0: {log_start} records at offsets 0..{log_start - 1} were deleted" in str(
        e.value
    )
    assert "failOnDataLoss=false" in str(e.value)

    lenient = stream_reader(broker, subscribe="short", failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="sluice.spark.source"):
        got = [r["offset"] for b in lenient.read(part) for r in b.to_pylist()]
    assert got == list(range(log_start, hw))
    assert f"{log_start} records at offsets 0..{log_start - 1}" in caplog.text


def test_data_loss_fails_the_query(spark, broker, short_log, tmp_path):
    df = (
        spark.readStream.format("sluice")
        .option("bootstrap", broker.url)
        .option("apiKey", broker.api_key)
        .option("subscribe", "short")
        .option("startingOffsets", '{"short": {"0": 0}}')
        .load()
    )
    q = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")).start()
    try:
        with pytest.raises(Exception, match="were deleted by retention"):
            q.awaitTermination(QUERY_TIMEOUT_S)
    finally:
        q.stop()


def test_unsupported_options_fail_at_load(spark, broker):
    with pytest.raises(Exception, match=r"does not support option\(s\) 'groupIdPrefix'"):
        (
            spark.readStream.format("sluice")
            .option("kafka.bootstrap.servers", broker.url)
            .option("apiKey", broker.api_key)
            .option("subscribe", "other")
            .option("groupIdPrefix", "spark")
            .load()
        )


def test_batch_reads_take_the_same_names(spark, broker):
    df = (
        spark.read.format("sluice")
        .option("kafka.bootstrap.servers", broker.url)
        .option("apiKey", broker.api_key)
        .option("subscribePattern", "ev-.*")
        .option(
            "endingOffsetsByTimestamp",
            json.dumps({"ev-a": {"0": T0 + 100, "1": T0 + 100}, "ev-b": {"0": T0 + 20}}),
        )
        .option("minPartitions", "6")
        .load()
    )
    assert "headers" not in df.columns  # includeHeaders defaults to false, as Kafka's
    assert df.rdd.getNumPartitions() >= 6
    got = sorted((r.topic, r.partition, r.offset) for r in df.collect())
    want = sorted(
        [("ev-a", 0, i) for i in range(100)]
        + [("ev-a", 1, i) for i in range(60)]  # nothing at T0+100: the end is the watermark
        + [("ev-b", 0, i) for i in range(20)]
    )
    assert got == want
    headers = (
        spark.read.format("sluice")
        .option("bootstrap", broker.url)
        .option("apiKey", broker.api_key)
        .option("assign", '{"ev-b": [0]}')
        .option("includeHeaders", "true")
        .load()
        .where("offset = 7")
        .collect()
    )
    assert [(h.key, h.value) for h in headers[0].headers] == [("i", b"7")]


def _output(spark, path) -> list[tuple]:
    return sorted(
        (
            r.topic,
            r.partition,
            r.offset,
            bytes(r.key),
            bytes(r.value),
            int(r.timestamp.timestamp() * 1000),
        )
        for r in spark.read.parquet(str(path)).collect()
    )


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout}s"
        time.sleep(0.2)


def test_restarted_query_writes_every_record_exactly_once(spark, broker_factory, tmp_path):
    b = broker_factory({"events": (2, {})})
    produce(b, "events", 0, 0, 400)
    produce(b, "events", 1, 0, 100)
    out, ck = tmp_path / "out", tmp_path / "checkpoint"

    def start_query(trigger: dict):
        df = (
            spark.readStream.format("sluice")
            .option("bootstrap", b.url)
            .option("apiKey", b.api_key)
            .option("subscribe", "events")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "100")
            .load()
            .selectExpr("topic", "partition", "offset", "key", "value", "timestamp")
        )
        return (
            df.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(ck))
            .trigger(**trigger)
            .start()
        )

    q = start_query({"processingTime": "2 seconds"})
    try:
        _wait(lambda: sum(p["numInputRows"] > 0 for p in q.recentProgress) >= 2, 90, "2 batches")
    finally:
        q.stop()
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert all(n <= 100 for n in sizes), sizes
    assert len(_output(spark, out)) < 500  # stopped mid-way

    # more records, and a partition added (the static metadata is read at start)
    produce(b, "events", 0, 400, 50)
    b.stop()
    doc = json.loads(b.metadata_path.read_text())
    (events,) = [t for t in doc["topics"] if t["name"] == "events"]
    events["partitions"], events["leaders"] = 3, events["leaders"] + [events["leaders"][0]]
    b.metadata_path.write_text(json.dumps(doc))
    b.start()
    produce(b, "events", 2, 0, 30)

    q = start_query({"availableNow": True})
    try:
        assert q.awaitTermination(QUERY_TIMEOUT_S), "the AvailableNow run did not finish"
    finally:
        q.stop()
    assert q.exception() is None
    assert _output(spark, out) == sorted(
        expected("events", 0, range(450))
        + expected("events", 1, range(100))
        + expected("events", 2, range(30))
    )
