"""The tenant-usage job: ``__usage`` (and the storage points the control plane kept) ->
hourly and daily usage per tenant, service account and topic, and quota suggestions."""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import functions as F

from spark.jobs.common import Source, TopicRef, read_topic, rows
from spark.transforms import usage

STORAGE_SCHEMA = "tenant string, topic string, ts timestamp, bytes long"


def run(
    spark,
    source: Source,
    usage_topic: TopicRef,
    *,
    storage: list[tuple[str, str, datetime, int]] | None = None,
    since_ms: int | None = None,
    point_ms: int = usage.DEFAULT_POINT_MS,
    tenant: str | None = None,
) -> dict[str, list[dict]]:
    """``tenant``: one tenant's windows only (a tenant's own run)."""
    u = read_topic(spark, source, usage_topic, decode="usage")
    if tenant is not None:
        u = u.where(F.col("tenant") == F.lit(tenant))
    if since_ms is not None:
        u = u.where(F.col("window_start") >= F.timestamp_millis(F.lit(since_ms)))
    u = u.cache()
    s = spark.createDataFrame(storage, STORAGE_SCHEMA) if storage else None
    keys = ["tenant", "service_account", "topic", "ts"]
    out = {
        "hour": rows(usage.usage_report(u, s, "hour", point_ms=point_ms).orderBy(*keys)),
        "day": rows(usage.usage_report(u, s, "day", point_ms=point_ms).orderBy(*keys)),
        "quotas": rows(usage.quota_suggestions(u).orderBy("tenant", "service_account")),
    }
    u.unpersist()
    return out
