"""Retention: segment sizes and ages, what retention will delete within 1, 6 and 24 hours,
compaction effectiveness and storage per tenant. Pure transforms.

``segments`` (one row per segment, from the brokers' segments endpoint, see
``spark.datasource.segments``): ``tenant, topic, partition, base_offset, end_offset,
size_bytes, largest_timestamp_ms, is_active, log_start_offset, high_watermark, retention_ms,
retention_bytes, cleanup_policy``.

The forecast follows the broker's own rule (``brokernodes.storage.retention``): only a prefix
of segments goes, never the active one nor one reaching past the high watermark; segment k may
go once it is below the log start offset, or the log stays at or above ``retention.bytes``
without it and every segment before it, or every segment up to it has its largest timestamp
more than ``retention.ms`` old. So segment i goes at ``D_i = max(now, max over k <= i of
e_k)`` where ``e_k`` is ``now`` for the first two reasons and the time the third one becomes
true otherwise. The forecast assumes no new data (new data only adds size-based deletions).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

TP = ["tenant", "topic", "partition"]
HORIZONS_H = (1, 6, 24)
NEVER = 2**62


def segment_forecast(segments: DataFrame, *, now_ms: int) -> DataFrame:
    """``segments`` plus ``records`` (offsets spanned), ``age_ms`` and ``delete_at_ms`` (when
    retention deletes it; ``NEVER`` when it does not)."""
    order = Window.partitionBy(*TP).orderBy("base_offset")
    upto = order.rowsBetween(Window.unboundedPreceding, 0)
    s = segments.withColumn("cum_bytes", F.sum("size_bytes").over(upto)).withColumn(
        "total_bytes", F.sum("size_bytes").over(Window.partitionBy(*TP))
    )
    deletes = F.col("cleanup_policy").contains("delete")
    candidate = (~F.col("is_active")) & (F.col("end_offset") <= F.col("high_watermark"))
    start_ok = F.col("end_offset") <= F.col("log_start_offset")
    size_ok = (
        deletes
        & (F.col("retention_bytes") >= 0)
        & (F.col("total_bytes") - F.col("cum_bytes") >= F.col("retention_bytes"))
    )
    # a retention.ms near the int64 limit ("forever") must not overflow the sum
    time_at = F.when(
        deletes
        & (F.col("retention_ms") >= 0)
        & (F.col("retention_ms") < F.lit(NEVER) - F.col("largest_timestamp_ms")),
        F.col("largest_timestamp_ms") + F.col("retention_ms") + 1,
    ).otherwise(F.lit(NEVER))
    s = s.withColumn("t_k", F.max(time_at).over(upto))
    e_k = F.when(start_ok | size_ok, F.lit(now_ms)).otherwise(F.col("t_k"))
    e_k = F.when(candidate, e_k).otherwise(F.lit(NEVER))
    s = s.withColumn("e_k", e_k).withColumn(
        "delete_at_ms", F.greatest(F.lit(now_ms), F.max("e_k").over(upto))
    )
    return s.select(
        *segments.columns,
        (F.col("end_offset") - F.col("base_offset")).alias("records"),
        (F.lit(now_ms) - F.col("largest_timestamp_ms")).alias("age_ms"),
        "delete_at_ms",
    )


def partition_report(forecast: DataFrame, *, now_ms: int) -> DataFrame:
    """Per partition: ``bytes, segments, oldest_ts`` (the oldest segment's newest record),
    ``delete_{1,6,24}h_bytes`` and ``..._records``."""
    aggs = [
        F.sum("size_bytes").alias("bytes"),
        F.count(F.lit(1)).alias("segments"),
        F.timestamp_millis(F.min_by("largest_timestamp_ms", "base_offset")).alias("oldest_ts"),
        F.max("age_ms").alias("oldest_age_ms"),
    ]
    for h in HORIZONS_H:
        due = F.col("delete_at_ms") <= now_ms + h * 3_600_000
        aggs.append(
            F.sum(F.when(due, F.col("size_bytes")).otherwise(0)).alias(f"delete_{h}h_bytes")
        )
        aggs.append(F.sum(F.when(due, F.col("records")).otherwise(0)).alias(f"delete_{h}h_records"))
    return forecast.groupBy(*TP).agg(*aggs)


def storage_by_tenant(segments: DataFrame, *, now_ms: int) -> DataFrame:
    """``tenant, topic, ts, bytes``: what each topic stores now (a point of the time series
    the control plane keeps across runs)."""
    return (
        segments.groupBy("tenant", "topic")
        .agg(F.sum("size_bytes").alias("bytes"))
        .select("tenant", "topic", F.timestamp_millis(F.lit(now_ms)).alias("ts"), "bytes")
    )


def compaction(records: DataFrame) -> DataFrame:
    """Per topic and partition: ``records, distinct_keys, tombstones, keyless`` and
    ``effectiveness`` = distinct keys / records (1.0: nothing left to compact)."""
    return (
        records.groupBy(*TP)
        .agg(
            F.count(F.lit(1)).alias("records"),
            F.countDistinct("key").alias("distinct_keys"),
            F.sum(F.when(F.col("value").isNull(), 1).otherwise(0)).alias("tombstones"),
            F.sum(F.when(F.col("key").isNull(), 1).otherwise(0)).alias("keyless"),
        )
        .withColumn("effectiveness", F.col("distinct_keys") / F.col("records"))
    )
