"""Throughput: records and bytes per topic and partition per minute or hour (by record
timestamp), peaks, and skew across partitions (hot partitions). Pure transforms.

``records``: ``tenant, topic, partition, offset, timestamp, key, value`` (+ ``headers``).
Bytes are payload bytes: key + value + header names and values, what a producer sent, not the
batch framing (the source decodes records; batch sizes are in the retention report).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

GRANULARITIES = {"minute": "1 minute", "hour": "1 hour", "day": "1 day"}
HOT_FACTOR = 2.0


def payload_bytes(records: DataFrame) -> DataFrame:
    """``records`` plus ``bytes`` (key + value + headers)."""
    size = F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
    if "headers" in records.columns:
        # in SQL: a Python lambda's variables get fresh names per call, which end up in the
        # generated code and miss Spark's code cache on every run (``spark.session``)
        hdr = F.expr(
            "aggregate(coalesce(headers, array()), 0, (acc, h) -> acc"
            " + coalesce(length(cast(h.key as binary)), 0) + coalesce(length(h.value), 0))"
        )
        size = size + hdr
    return records.withColumn("bytes", size.cast("long"))


def per_partition(records: DataFrame, granularity: str = "minute") -> DataFrame:
    """``tenant, topic, partition, ts, records, bytes``: one row per period with records."""
    period = GRANULARITIES[granularity]
    return (
        payload_bytes(records)
        .groupBy("tenant", "topic", "partition", F.window("timestamp", period).alias("w"))
        .agg(F.count(F.lit(1)).alias("records"), F.sum("bytes").alias("bytes"))
        .select("tenant", "topic", "partition", F.col("w.start").alias("ts"), "records", "bytes")
    )


def from_slices(slices: DataFrame, granularity: str = "minute") -> DataFrame:
    """``per_partition`` from ``lag.record_slices`` (per-second ``records`` and ``bytes``; a
    second lies in one minute, hour and day), so one pass over the records serves the lag and
    the throughput."""
    size = {"minute": 60, "hour": 3600, "day": 86_400}[granularity]
    start = F.col("sec") - F.pmod(F.col("sec"), F.lit(size))
    return (
        slices.groupBy("tenant", "topic", "partition", F.timestamp_seconds(start).alias("ts"))
        .agg(F.sum("records").alias("records"), F.sum("bytes").alias("bytes"))
        .select("tenant", "topic", "partition", "ts", "records", "bytes")
    )


def rollup(partition_rates: DataFrame, granularity: str = "hour") -> DataFrame:
    """Finer ``per_partition`` rates summed into ``granularity`` periods (a minute belongs to
    one hour and one day), so the records are aggregated once for every granularity."""
    period = GRANULARITIES[granularity]
    return (
        partition_rates.groupBy(
            "tenant", "topic", "partition", F.window("ts", period).start.alias("period")
        )
        .agg(F.sum("records").alias("records"), F.sum("bytes").alias("bytes"))
        .select("tenant", "topic", "partition", F.col("period").alias("ts"), "records", "bytes")
    )


def per_topic(partition_rates: DataFrame) -> DataFrame:
    """``tenant, topic, ts, records, bytes, partitions``: summed over partitions."""
    return partition_rates.groupBy("tenant", "topic", "ts").agg(
        F.sum("records").alias("records"),
        F.sum("bytes").alias("bytes"),
        F.count(F.lit(1)).alias("partitions"),
    )


def peaks(partition_rates: DataFrame) -> DataFrame:
    """``tenant, topic, peak_ts, peak_records, peak_bytes, mean_records``: the busiest period
    of each topic (by records; earliest on ties) and its mean over periods with traffic."""
    t = per_topic(partition_rates)
    return t.groupBy("tenant", "topic").agg(
        F.min_by("ts", F.struct(-F.col("records"), F.col("ts"))).alias("peak_ts"),
        F.max("records").alias("peak_records"),
        F.max("bytes").alias("peak_bytes"),
        F.avg("records").alias("mean_records"),
    )


def skew(
    partition_rates: DataFrame, partitions: DataFrame, *, hot_factor: float = HOT_FACTOR
) -> DataFrame:
    """Per topic and period: ``max_share`` (the busiest partition's share of the records),
    ``skew`` (busiest / fair share = max_share x partition count; 1 is perfectly even) and
    ``hot_partition`` (the busiest one when its skew reaches ``hot_factor``, else null).

    ``partitions``: ``tenant, topic, partitions`` (the partition count, so idle partitions
    count toward the fair share)."""
    top = partition_rates.groupBy("tenant", "topic", "ts").agg(
        # the busiest partition, the lowest-numbered one on ties
        F.max_by("partition", F.struct("records", -F.col("partition"))).alias("busiest"),
        F.max("records").alias("top"),
        F.sum("records").alias("total"),
    )
    n = F.broadcast(partitions.select("tenant", "topic", F.col("partitions").alias("n")))
    share = F.col("top") / F.col("total")
    return top.join(n, ["tenant", "topic"]).select(
        "tenant",
        "topic",
        "ts",
        F.col("busiest").alias("busiest_partition"),
        share.alias("max_share"),
        (share * F.col("n")).alias("skew"),
        F.when(share * F.col("n") >= hot_factor, F.col("busiest")).alias("hot_partition"),
    )
