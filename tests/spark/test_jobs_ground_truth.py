"""Every job on a real broker, checked against ground truth computed in plain Python from
the generated workload (tests/spark/workload.py): known produce rates and commits, with a
stopped, a stalled, a rewinding and a slow consumer."""

from __future__ import annotations

import json
import urllib.request
from collections import defaultdict

import pytest

from brokernodes.groups.records import encode_offset_commit
from brokernodes.groups.types import OffsetAndMetadata, OffsetKey
from brokernodes.records.batch import Record, encode_batch
from brokernodes.records.compression import Compression
from brokernodes.server.usage import UsageRecord, encode_usage
from brokernodes.storage.config import LogConfig
from brokernodes.storage.retention import SegmentStats, plan_retention
from spark.jobs import lag as lag_job
from spark.jobs import retention as retention_job
from spark.jobs import throughput as throughput_job
from spark.jobs import usage as usage_job
from spark.jobs.common import Source, TopicRef
from tests.spark import workload as w

BATCH = "application/vnd.kafka.recordbatch.v2"
CODECS = [Compression.NONE, Compression.LZ4, Compression.ZSTD, Compression.GZIP]
TOPICS = {
    "orders": (4, {"segment.bytes": "4096", "retention.ms": str(40 * w.MINUTE)}),
    "__consumer_offsets": (1, {}),
    "__usage": (1, {}),
}


def produce(broker, topic: str, partition: int, records: list[Record], codec=0) -> None:
    batch = encode_batch(records, compression=codec)
    status, _, body = broker.request(
        "POST",
        f"/sluice/v1/topics/{topic}/partitions/{partition}/batches",
        batch,
        headers={"Content-Type": BATCH},
    )
    assert status == 200, body


def usage_truth() -> list[UsageRecord]:
    """Two service accounts over 30 minutes: ``app`` produces 1000 + 10*m bytes in minute m,
    ``reader`` fetches 3000 bytes every minute, throttled 5 ms each minute."""
    out = []
    for m in range(w.MINUTES):
        start = w.T0 + m * w.MINUTE
        out.append(
            UsageRecord(
                "acme",
                "User:app",
                "orders",
                start,
                start + w.MINUTE,
                1,
                bytes_in=1000 + 10 * m,
                records_in=10,
                requests=2,
            )
        )
        out.append(
            UsageRecord(
                "acme",
                "User:reader",
                "orders",
                start,
                start + w.MINUTE,
                1,
                bytes_out=3000,
                records_out=30,
                requests=6,
                throttle_ms=5,
            )
        )
    return out


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    from tests.integration.conftest import BrokerLauncher

    launcher = BrokerLauncher(tmp_path_factory.mktemp("gt-broker"))
    try:
        broker = launcher(
            TOPICS,
            env={"SLUICE_USAGE_INTERVAL_S": "3600"},
            extra_args=["--housekeeping-interval-ms", "3600000"],
        )
        for p in range(4):
            ts = w.timestamps(p)
            for i, start in enumerate(range(0, len(ts), 500)):
                chunk = [
                    Record(t, f"k{(start + j) % 50}".encode(), b"x" * 20)
                    for j, t in enumerate(ts[start : start + 500])
                ]
                produce(broker, "orders", p, chunk, CODECS[i % len(CODECS)])
        for group, p in w.GROUP_PARTITION.items():  # one batch per group: records keep
            commits = [  # their own timestamps (the commit times)
                Record(
                    t,
                    *encode_offset_commit(
                        OffsetKey(group, "orders", p), OffsetAndMetadata(offset, 0, "", t)
                    ),
                )
                for t, offset in w.commits(group)
            ]
            produce(broker, "__consumer_offsets", 0, commits)
        produce(
            broker, "__usage", 0, [Record(r.window_end_ms, *encode_usage(r)) for r in usage_truth()]
        )
        yield broker
    finally:
        launcher.close()


def source(broker) -> Source:
    return Source(broker.url, api_key=broker.api_key, max_records_per_partition=4000)


ORDERS = [TopicRef("orders")]


@pytest.fixture(scope="module")
def lag_result(spark, loaded):
    return lag_job.run(
        spark,
        source(loaded),
        ORDERS,
        TopicRef("__consumer_offsets"),
        now_ms=w.NOW,
        window=w.WINDOW,
        min_stop_ms=w.MIN_STOP_MS,
    )


def test_lag_history_matches_ground_truth(lag_result):
    got = defaultdict(list)
    for r in lag_result["history"]:
        got[r["group"]].append(r)
    assert set(got) == set(w.GROUP_PARTITION)
    for group, p in w.GROUP_PARTITION.items():
        truth = w.samples(group)
        rows = got[group]
        assert len(rows) == len(truth), group
        for s, r in zip(truth, rows, strict=True):
            assert r["partition"] == p
            assert (r["ts_ms"], r["is_commit"]) == (s.ts_ms, s.is_commit), group
            assert r["committed_offset"] == s.committed, (group, s)
            assert r["log_end_offset"] == s.log_end, (group, s)
            assert r["offset_lag"] == s.lag, (group, s)
            assert r["time_lag_ms"] == w.time_lag(group, s), (group, s)


def test_lag_status_now(lag_result):
    status = {r["group"]: r for r in lag_result["status"]}
    assert {g: r["status"] for g, r in status.items()} == w.EXPECTED_STATUS
    # a stopped consumer with zero lag at its last commit: Burrow's commit-only window says
    # OK; its history shows the lag it accrued since then
    stopped = status["stopped"]
    assert stopped["offset_lag"] == len(w.timestamps(1)) - w.log_end_at(w.timestamps(1), w.STOP_AT)
    stop_rows = [r for r in lag_result["history"] if r["group"] == "stopped"]
    assert [r["status"] for r in stop_rows if r["ts_ms"] == w.STOP_AT] == ["OK"]
    assert stop_rows[-1]["status"] == "STOP"
    # catch-up: the healthy consumer has none to do, the slow one never catches up
    assert status["healthy"]["catch_up_s"] == 0.0
    assert status["slow"]["catch_up_s"] is None
    assert status["slow"]["consume_rate"] == pytest.approx(5.0, rel=0.01)
    assert status["slow"]["produce_rate"] == pytest.approx(10.0, rel=0.05)


def test_lag_retention_risk(lag_result):
    """retention.ms is 40 minutes: within the next hour every segment but the active one
    goes, so every group with lag is at risk; the healthy one is at the log end."""
    status = {r["group"]: r for r in lag_result["status"]}
    assert status["stalled"]["retention_risk"] is True
    assert status["stopped"]["retention_risk"] is True
    assert status["healthy"]["retention_risk"] is False
    assert status["slow"]["retention_risk"] is True


def test_throughput_matches_ground_truth(spark, loaded):
    out = throughput_job.run(spark, source(loaded), ORDERS)
    per_min = {(r["partition"], r["ts"].timestamp() * 1000): r for r in out["minute"]}
    for p, rate in w.RATES.items():
        for m in range(w.MINUTES):
            r = per_min[(p, w.T0 + m * w.MINUTE)]
            n = rate * 60
            keys = sum(len(f"k{o % 50}") for o in range(m * n, (m + 1) * n))
            assert (r["records"], r["bytes"]) == (n, keys + 20 * n)
    assert len(out["minute"]) == 4 * w.MINUTES
    hours = [r for r in out["hour"] if r["partition"] == 3]
    assert sum(r["records"] for r in hours) == w.RATES[3] * 60 * w.MINUTES
    assert all(r["ts"].minute == 0 for r in hours)
    (peak,) = out["peaks"]
    assert peak["peak_records"] == sum(w.RATES.values()) * 60
    assert peak["peak_ts"].timestamp() * 1000 == w.T0  # every minute ties: the first
    for skew in out["skew"]:
        assert skew["hot_partition"] == 3
        assert skew["skew"] == pytest.approx(10 / 16 * 4)


def test_retention_matches_the_brokers_own_rule(spark, loaded):
    """The forecast of bytes and records deleted within 1/6/24 h equals what the broker's
    ``plan_retention`` would delete at those times, from the same segments."""
    out = retention_job.run(spark, source(loaded), ORDERS, now_ms=w.NOW)
    by_p = {r["partition"]: r for r in out["partitions"]}
    config = LogConfig.from_properties(TOPICS["orders"][1])
    for p in range(4):
        with urllib.request.urlopen(
            urllib.request.Request(
                f"{loaded.url}/sluice/v1/topics/orders/partitions/{p}/segments",
                headers=loaded.headers,
            )
        ) as resp:
            doc = json.loads(resp.read())
        stats = [
            SegmentStats(s["base_offset"], s["size_bytes"], s["largest_timestamp"], s["end_offset"])
            for s in doc["segments"]
        ]
        r = by_p[p]
        assert r["bytes"] == sum(s.size for s in stats)
        assert r["segments"] == len(stats) > 2
        for h in (1, 6, 24):
            n = plan_retention(
                stats,
                config=config,
                now_ms=w.NOW + h * 3_600_000,
                log_start_offset=doc["log_start_offset"],
                high_watermark=doc["high_watermark"],
            ).count
            assert r[f"delete_{h}h_bytes"] == sum(s.size for s in stats[:n]), (p, h)
            assert r[f"delete_{h}h_records"] == sum(s.end_offset - s.base_offset for s in stats[:n])
        assert r["delete_1h_bytes"] > 0
    (storage,) = out["storage"]
    assert storage["bytes"] == sum(r["bytes"] for r in out["partitions"])


def test_usage_matches_ground_truth(spark, loaded):
    storage = [("acme", "orders", _dt(w.T0 + m * w.MINUTE), 2_000_000_000) for m in range(30)]
    out = usage_job.run(
        spark, source(loaded), TopicRef("__usage"), storage=storage, point_ms=w.MINUTE
    )
    truth = usage_truth()
    rows: dict = {}
    for r in out["hour"]:  # the 30 minutes may straddle two hours
        assert r["ts"].minute == 0 and r["tenant"] == "acme"
        acc = rows.setdefault((r["service_account"], r["topic"]), defaultdict(float))
        for k, v in r.items():
            if isinstance(v, int | float):
                acc[k] += v
    (day,) = [r for r in out["day"] if r["service_account"] == "app"]
    assert day["bytes_in"] == sum(r.bytes_in for r in truth)
    app, reader, stored = rows[("app", "orders")], rows[("reader", "orders")], rows[("", "orders")]
    assert app["bytes_in"] == sum(r.bytes_in for r in truth)
    assert app["requests"] == 2 * w.MINUTES
    assert reader["bytes_out"] == 3000 * w.MINUTES
    assert reader["throttle_ms"] == 5 * w.MINUTES
    assert stored["storage_gb_hours"] == pytest.approx(1.0)  # 2 GB for half an hour
    quotas = {r["service_account"]: r for r in out["quotas"]}
    rates = sorted((1000 + 10 * m) / 60 for m in range(w.MINUTES))
    assert quotas["app"]["p99_produce_bytes_per_sec"] == pytest.approx(_p99(rates))
    assert quotas["app"]["produce_bytes_per_sec"] == _ceil(_p99(rates) * 1.5)
    assert quotas["reader"]["p99_fetch_bytes_per_sec"] == pytest.approx(50.0)
    assert quotas["reader"]["request_rate"] == 1  # 0.1 req/s x 1.5, rounded up


def _p99(sorted_values: list[float]) -> float:
    """Linear-interpolated percentile (what Spark's exact ``percentile`` computes)."""
    pos = 0.99 * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _ceil(x: float) -> int:
    import math

    return math.ceil(x)


def _dt(ms: int):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, tz=UTC)
