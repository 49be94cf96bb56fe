"""The Spark transforms on tiny DataFrames (one shared local session)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spark.transforms import lag, retention, throughput, usage

T0 = 1_767_225_600_000


def ts(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def test_log_end_moves_once_per_bucket_at_its_last_record(spark):
    records = spark.createDataFrame(
        [("", "t", 0, o, ts(T0 + o * 20_000)) for o in range(7)],
        "tenant string, topic string, partition int, offset long, timestamp timestamp",
    )
    got = [(r.ts_ms - T0, r.log_end) for r in lag.log_end_moves(records).orderBy("ts_ms").collect()]
    assert got == [(40_000, 3), (100_000, 6), (120_000, 7)]


def test_lag_samples_track_commits_and_log_end(spark):
    records = spark.createDataFrame(
        [("a", "t", 0, o, ts(T0 + o * 1000)) for o in range(10)],
        "tenant string, topic string, partition int, offset long, timestamp timestamp",
    )
    commits = spark.createDataFrame(
        [
            ("a", "g", "t", 0, 3, ts(T0 + 3500)),
            ("a", "g", "t", 0, None, ts(T0 + 4000)),
            ("b", "g", "t", 0, 1, ts(T0 + 3500)),
        ],
        "tenant string, group string, topic string, partition int, committed_offset long, "
        "commit_timestamp timestamp",
    )
    rows = lag.lag_samples(records, commits).orderBy("tenant", "ts_ms").collect()
    a = [
        (r.ts_ms - T0, r.committed_offset, r.log_end_offset, r.offset_lag, r.time_lag_ms)
        for r in rows
        if r.tenant == "a"
    ]
    # the commit at 3.5 s (4 records out, offset 3 next: stamped 3.0 s) and the minute's
    # last record at 9 s; the tombstone is no commit
    assert a == [(3500, 3, 4, 1, 500), (9000, 3, 10, 7, 6000)]
    # tenant b's commit names the same topic name but not tenant a's records
    assert [(r.log_end_offset, r.offset_lag) for r in rows if r.tenant == "b"] == [(0, 0)]


def test_skew_names_the_hot_partition(spark):
    rates = spark.createDataFrame(
        [("", "t", 0, ts(T0), 10, 100), ("", "t", 1, ts(T0), 90, 900)],
        "tenant string, topic string, partition int, ts timestamp, records long, bytes long",
    )
    parts = spark.createDataFrame([("", "t", 4)], "tenant string, topic string, partitions int")
    (row,) = throughput.skew(rates, parts).collect()
    assert row.hot_partition == 1 and row.skew == pytest.approx(0.9 * 4)
    (row,) = throughput.skew(rates, parts, hot_factor=4).collect()
    assert row.hot_partition is None


def test_payload_bytes_count_keys_values_and_headers(spark):
    df = spark.createDataFrame(
        [(b"kk", b"vvv", [("h", b"12")]), (None, None, None)],
        "key binary, value binary, headers array<struct<key: string, value: binary>>",
    )
    assert [r.bytes for r in throughput.payload_bytes(df).collect()] == [8, 0]


SEG = (
    "tenant string, topic string, partition int, base_offset long, end_offset long, "
    "size_bytes long, largest_timestamp_ms long, is_active boolean, log_start_offset long, "
    "log_end_offset long, high_watermark long, retention_ms long, retention_bytes long, "
    "cleanup_policy string"
)


def segments(spark, specs, retention_ms=-1, retention_bytes=-1, policy="delete"):
    rows, base = [], 0
    for i, (n, size, largest) in enumerate(specs):
        rows.append(
            (
                "",
                "t",
                0,
                base,
                base + n,
                size,
                largest,
                i == len(specs) - 1,
                0,
                sum(s[0] for s in specs),
                sum(s[0] for s in specs),
                retention_ms,
                retention_bytes,
                policy,
            )
        )
        base += n
    return spark.createDataFrame(rows, SEG)


def test_size_retention_deletes_now_time_retention_later(spark):
    now = T0
    segs = segments(
        spark,
        [(10, 100, now - 1000), (10, 100, now - 500), (10, 100, now)],
        retention_ms=3_600_000,
        retention_bytes=150,
    )
    got = [
        r.delete_at_ms
        for r in retention.segment_forecast(segs, now_ms=now).orderBy("base_offset").collect()
    ]
    # the log stays >= 150 bytes without the first segment only; the second goes when its
    # newest record is an hour old; the active segment never
    assert got == [now, now - 500 + 3_600_001, retention.NEVER]
    (report,) = retention.partition_report(
        retention.segment_forecast(segs, now_ms=now), now_ms=now
    ).collect()
    assert (report.delete_1h_bytes, report.delete_1h_records, report.segments) == (200, 20, 3)


def test_compacted_topics_are_not_deleted_by_time(spark):
    segs = segments(spark, [(10, 100, 0), (10, 100, 1)], retention_ms=1, policy="compact")
    assert {r.delete_at_ms for r in retention.segment_forecast(segs, now_ms=T0).collect()} == {
        retention.NEVER
    }


def test_compaction_effectiveness(spark):
    df = spark.createDataFrame(
        [
            ("", "t", 0, b"a", b"1"),
            ("", "t", 0, b"a", b"2"),
            ("", "t", 0, b"b", None),
            ("", "t", 0, None, b"x"),
        ],
        "tenant string, topic string, partition int, key binary, value binary",
    )
    (r,) = retention.compaction(df).collect()
    assert (r.records, r.distinct_keys, r.tombstones, r.keyless) == (4, 2, 1, 1)
    assert r.effectiveness == 0.5


def test_daily_usage_and_storage_points(spark):
    u = spark.createDataFrame(
        [
            (
                "t",
                "User:app",
                "x",
                ts(T0 + h * 3_600_000),
                ts(T0 + h * 3_600_000 + 60_000),
                1,
                10,
                0,
                1,
                0,
                1,
                0,
                h,
            )
            for h in range(3)
        ],
        "tenant string, principal string, topic string, window_start timestamp, "
        "window_end timestamp, broker_id int, bytes_in long, bytes_out long, records_in long, "
        "records_out long, requests long, throttle_ms long, offset long",
    )
    s = spark.createDataFrame(
        [("t", "x", ts(T0), 10**9), ("t", "x", ts(T0 + 1_800_000), 10**9)],
        "tenant string, topic string, ts timestamp, bytes long",
    )
    rows = {
        r.service_account: r for r in usage.usage_report(u, s, "day", point_ms=1_800_000).collect()
    }
    assert rows["app"].bytes_in == 30 and rows["app"].requests == 3
    assert rows[""].storage_gb_hours == pytest.approx(1.0)


def test_throughput_from_slices_equals_per_partition(spark):
    """One pass serves both jobs: minutes and days summed from the lag's per-second slices
    equal those aggregated from the records."""
    records = spark.createDataFrame(
        [
            ("", "t", o % 2, o, ts(T0 - 90_000 + o * 7_001), b"k" * (o % 3), b"v" * o)
            for o in range(40)
        ],
        "tenant string, topic string, partition int, offset long, timestamp timestamp, "
        "key binary, value binary",
    )
    commits = spark.createDataFrame(
        [("", "g", "t", 0, 6, ts(T0 + 3_500))],
        "tenant string, group string, topic string, partition int, committed_offset long, "
        "commit_timestamp timestamp",
    )
    slices = lag.record_slices(records, commits)
    for granularity in ("minute", "day"):
        want = throughput.per_partition(records, granularity).collect()
        got = throughput.from_slices(slices, granularity).collect()
        assert len(want) > 1 and sorted(got) == sorted(want)


def test_a_warm_session_compiles_no_code(spark):
    """A run's generated code is the same in the next run and is kept (``spark.session``:
    the code cache's size; lambdas written in SQL, since a Python lambda's variable name
    changes per call and lands in the code), so a scheduled run compiles nothing."""
    from spark.jobs import lag as lag_job
    from spark.jobs import throughput as throughput_job

    compiles = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()

    def run() -> int:
        records = spark.createDataFrame(
            [("", "t", 0, o, ts(T0 + o * 700), b"k", b"v" * o, [("h", b"x")]) for o in range(30)],
            "tenant string, topic string, partition int, offset long, timestamp timestamp, "
            "key binary, value binary, headers array<struct<key string, value binary>>",
        )
        commits = spark.createDataFrame(
            [("", "g", "t", 0, o, ts(T0 + o * 700 + 1)) for o in (5, 12, 20)],
            "tenant string, group string, topic string, partition int, committed_offset long, "
            "commit_timestamp timestamp",
        )
        slices = lag.record_slices(records, commits)
        rows = lag_job.results(slices, commits, now_ms=T0 + 60_000)
        partitions = spark.createDataFrame(
            [("", "t", 1)], "tenant string, topic string, partitions int"
        )
        minutes = throughput_job.results(throughput.from_slices(slices), partitions)
        assert rows["status"] and minutes["minute"]
        return compiles.getCount()

    first = run()
    assert run() == first
