"""One tenant's unreadable bytes never fail another tenant's report.

A real broker holds two tenants' topics. Tenant ``bad``'s log gets, straight into its
segment file (so no produce-time validation can stop them), a batch whose CRC-32C is right
but whose records are garbage and a batch stamped at the int64 limits, between good
batches. The lag, throughput and retention jobs must finish, give tenant ``good`` exactly
its figures, count ``bad``'s two batches and read ``bad``'s good records around them."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from brokernodes.records.batch import Record, encode_batch
from brokernodes.records.header import ATTRIBUTES_AT, CRC_AT, HEADER_SIZE, set_base_offset
from spark.datasource.broker import BrokerClient, PartitionMeta, read_range
from spark.datasource.validity import UnreadableBatch
from spark.jobs import lag as lag_job
from spark.jobs import retention as retention_job
from spark.jobs import throughput as throughput_job
from spark.jobs.common import Source, TopicRef

BATCH = "application/vnd.kafka.recordbatch.v2"
SECRET = "operators-secret-for-tests"
T0 = 1_767_225_600_000
MINUTE = 60_000
INT64_MAX = 2**63 - 1
TOPICS = {
    "good": (1, {}),
    "bad": (1, {"cleanup.policy": "compact,delete"}),
    "__consumer_offsets": (1, {}),
}


def records(n: int, start_ms: int) -> list[Record]:
    return [Record(start_ms + i * 1000, f"k{i}".encode(), b"v" * 10, ()) for i in range(n)]


def garbage_batch(base_offset: int) -> bytes:
    """Three records' worth of 0xFF under an intact header and a correct CRC-32C."""
    buf = bytearray(encode_batch(records(3, T0)))
    buf[HEADER_SIZE:] = b"\xff" * (len(buf) - HEADER_SIZE)
    set_base_offset(buf, 0, base_offset)
    struct.pack_into(">I", buf, CRC_AT, crc32c(bytes(buf[ATTRIBUTES_AT:])))
    return bytes(buf)


def int64_batch(base_offset: int) -> bytes:
    """A well-formed batch whose records are stamped at the int64 limit."""
    buf = bytearray(
        encode_batch([Record(INT64_MAX, b"k", b"v", ()), Record(INT64_MAX, b"k", b"w", ())])
    )
    set_base_offset(buf, 0, base_offset)
    return bytes(buf)


def produce(broker, topic: str, recs: list[Record]) -> None:
    status, _, body = broker.request(
        "POST",
        f"/sluice/v1/topics/{topic}/partitions/0/batches",
        encode_batch(recs),
        headers={"Content-Type": BATCH},
    )
    assert status == 200, body


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from tests.integration.conftest import BrokerLauncher

    launcher = BrokerLauncher(tmp_path_factory.mktemp("unreadable"))
    try:
        b = launcher(TOPICS, env={"SLUICE_CLUSTER_SECRET": SECRET})
        produce(b, "good", records(30, T0))  # offsets 0-29, minute 0
        produce(b, "bad", records(5, T0))  # offsets 0-4
        assert b.stop() == 0
        # what a hostile producer's batches look like once in the log: appended behind the
        # broker's back, and recovery (header and CRC checks only) keeps them
        log = next((b.data_dir).rglob("bad-0/*.log"))
        with open(log, "ab") as f:
            f.write(garbage_batch(5))  # offsets 5-7
            f.write(int64_batch(8))  # offsets 8-9
        for marker in b.data_dir.rglob(".clean_shutdown"):
            marker.unlink()
        b.start()
        produce(b, "bad", records(4, T0 + MINUTE))  # offsets 10-13, minute 1
        yield b
    finally:
        launcher.close()


def source(broker) -> Source:
    return Source(broker.url, cluster_secret=SECRET)


def refs() -> list[TopicRef]:
    return [TopicRef("good", "good"), TopicRef("bad", "bad")]


def test_read_range_skips_and_reports_each_unreadable_batch(broker):
    client = BrokerClient(broker.url, broker.api_key)
    try:
        meta = client.partitions("bad")[0]
        got = list(read_range(client, PartitionMeta("bad", 0, meta.leader, meta.leader_url), 0, 14))
    finally:
        client.close()
    bad = [r for r, _ in got if isinstance(r, UnreadableBatch)]
    good = [r.offset for r, _ in got if not isinstance(r, UnreadableBatch)]
    assert good == [0, 1, 2, 3, 4, 10, 11, 12, 13]
    assert [(b.base_offset, b.last_offset) for b in bad] == [(5, 7), (8, 9)]
    assert bad[0].reason.startswith("CORRUPT_MESSAGE: ")
    assert "CORRUPT_MESSAGE" not in bad[0].reason[len("CORRUPT_MESSAGE: ") :]
    assert bad[1].reason.startswith("INVALID_TIMESTAMP: ")


def test_throughput_job_counts_the_bad_tenant_and_reports_the_good_one(spark, broker):
    out = throughput_job.run(spark, source(broker), refs())
    minutes = {(r["tenant"], r["ts"].timestamp() * 1000): r["records"] for r in out["minute"]}
    assert minutes == {("good", T0): 30, ("bad", T0): 5, ("bad", T0 + MINUTE): 4}
    assert [(u["tenant"], u["topic"], u["offset"]) for u in out["unreadable"]] == [
        ("bad", "bad", 5),
        ("bad", "bad", 8),
    ]
    assert [u["reason"].split(":")[0] for u in out["unreadable"]] == [
        "CORRUPT_MESSAGE",
        "INVALID_TIMESTAMP",
    ]


def test_lag_and_retention_jobs_finish_for_every_tenant(spark, broker):
    offsets = TopicRef("__consumer_offsets")
    lag = lag_job.run(spark, source(broker), refs(), offsets, now_ms=T0 + 10 * MINUTE)
    assert {u["offset"] for u in lag["unreadable"]} == {5, 8}
    retention = retention_job.run(
        spark,
        source(broker),
        refs(),
        now_ms=T0 + 10 * MINUTE,
        compacted=[refs()[1]],
    )
    parts = {r["tenant"]: r for r in retention["partitions"]}
    assert set(parts) == {"good", "bad"}
    # the int64-stamped batch is in bad's only segment: clamped, it never ages out
    assert parts["bad"]["delete_24h_records"] == 0
    assert [c["records"] for c in retention["compaction"]] == [9]
    assert {u["offset"] for u in retention["unreadable"]} == {5, 8}
