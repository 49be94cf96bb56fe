"""Tenant usage: bytes in and out, storage GB-hours, requests and throttle time per tenant,
service account and topic, per hour and day, and quota suggestions from p99 usage. Pure.

``usage``: rows of ``__usage`` (``tenant, principal, topic, window_start, window_end,
bytes_in, bytes_out, records_in, records_out, requests, throttle_ms``), one per broker window.
``storage``: ``tenant, topic, ts, bytes`` points (the retention job's snapshots).

A broker window is attributed to the period holding its start (windows are a minute, periods
an hour or a day). Storage GB-hours: each storage point (bytes / 10^9) held until the topic's
next point, at most the points' interval, summed per period, so a topic stored for a whole hour
at 1 GB is 1 GB-hour whatever the sampling. Principals are ``User:<service account>``;
``service_account`` drops the prefix.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

PERIODS = {"hour": ("1 hour", 1.0), "day": ("1 day", 24.0)}
SUMS = ("bytes_in", "bytes_out", "records_in", "records_out", "requests", "throttle_ms")
HEADROOM = 1.5
DEFAULT_POINT_MS = 15 * 60_000  # the retention job's default schedule


def _service_account(principal):
    return F.regexp_replace(principal, r"^User:", "")


def usage_by_period(usage: DataFrame, granularity: str = "hour") -> DataFrame:
    """``tenant, service_account, topic, ts`` and the sums of every counter."""
    period, _ = PERIODS[granularity]
    return (
        usage.groupBy(
            "tenant",
            _service_account(F.col("principal")).alias("service_account"),
            "topic",
            F.window("window_start", period).alias("w"),
        )
        .agg(*(F.sum(c).alias(c) for c in SUMS))
        .select("tenant", "service_account", "topic", F.col("w.start").alias("ts"), *SUMS)
    )


def storage_gb_hours(
    storage: DataFrame, granularity: str = "hour", *, point_ms: int = DEFAULT_POINT_MS
) -> DataFrame:
    """``tenant, topic, ts, storage_gb_hours``: each storage point holds until the topic's
    next point (at most ``point_ms``; the last point ``point_ms``), attributed to the period
    of the point."""
    period, _ = PERIODS[granularity]
    nxt = F.lead(_ms("ts")).over(Window.partitionBy("tenant", "topic").orderBy("ts"))
    held = F.least(F.coalesce(nxt - _ms("ts"), F.lit(point_ms)), F.lit(point_ms))
    return (
        storage.withColumn("gbh", F.col("bytes") / 1e9 * held / 3_600_000)
        .groupBy("tenant", "topic", F.window("ts", period).alias("w"))
        .agg(F.sum("gbh").alias("storage_gb_hours"))
        .select("tenant", "topic", F.col("w.start").alias("ts"), "storage_gb_hours")
    )


def _ms(name: str):
    return (F.unix_micros(F.col(name)) / 1000).cast("long")


def usage_report(
    usage: DataFrame,
    storage: DataFrame | None,
    granularity: str = "hour",
    *,
    point_ms: int = DEFAULT_POINT_MS,
) -> DataFrame:
    """The report rows: traffic per (tenant, service account, topic, period) and storage per
    (tenant, topic, period) as rows with an empty service account."""
    u = usage_by_period(usage, granularity).withColumn("storage_gb_hours", F.lit(0.0))
    if storage is None:
        return u
    s = storage_gb_hours(storage, granularity, point_ms=point_ms)
    s = s.select(
        "tenant",
        F.lit("").alias("service_account"),
        "topic",
        "ts",
        *(F.lit(0).cast("long").alias(c) for c in SUMS),
        "storage_gb_hours",
    )
    return (
        u.unionByName(s)
        .groupBy("tenant", "service_account", "topic", "ts")
        .agg(*(F.sum(c).alias(c) for c in (*SUMS, "storage_gb_hours")))
    )


def quota_suggestions(usage: DataFrame, *, headroom: float = HEADROOM) -> DataFrame:
    """Per tenant and service account: p99 over minutes of produce and fetch bytes per second
    and requests per second, and suggested quotas = ceil(p99 x ``headroom``)."""
    minute = usage.groupBy(
        "tenant",
        _service_account(F.col("principal")).alias("service_account"),
        F.window("window_start", "1 minute").alias("w"),
    ).agg(
        (F.sum("bytes_in") / 60).alias("in_rate"),
        (F.sum("bytes_out") / 60).alias("out_rate"),
        (F.sum("requests") / 60).alias("req_rate"),
    )
    p = minute.groupBy("tenant", "service_account").agg(
        F.percentile("in_rate", 0.99).alias("p99_produce_bytes_per_sec"),
        F.percentile("out_rate", 0.99).alias("p99_fetch_bytes_per_sec"),
        F.percentile("req_rate", 0.99).alias("p99_requests_per_sec"),
        F.count(F.lit(1)).alias("minutes"),
    )
    return p.select(
        "*",
        F.ceil(F.col("p99_produce_bytes_per_sec") * headroom).alias("produce_bytes_per_sec"),
        F.ceil(F.col("p99_fetch_bytes_per_sec") * headroom).alias("fetch_bytes_per_sec"),
        F.ceil(F.col("p99_requests_per_sec") * headroom).alias("request_rate"),
    )
