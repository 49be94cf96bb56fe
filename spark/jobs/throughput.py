"""The throughput job: records and bytes per topic and partition per minute and hour, peaks
and skew; batches that could not be read are listed under ``unreadable``."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark.jobs.common import Source, TopicRef, Unreadable, read_topics, rows_by_kind
from spark.transforms import throughput


def run(
    spark,
    source: Source,
    topics: list[TopicRef],
    *,
    since_ms: int | None = None,
    hot_factor: float = throughput.HOT_FACTOR,
) -> dict[str, list[dict]]:
    records = read_topics(spark, source, topics, since_ms=since_ms, unreadable=True)
    if records is None:
        return {"minute": [], "hour": [], "peaks": [], "skew": [], "unreadable": []}
    unreadable = Unreadable()
    minute = throughput.per_partition(unreadable.records(records), "minute").cache()
    client = source.client()
    try:
        counts = [(t.tenant, t.shown, len(client.partitions(t.name))) for t in topics]
    finally:
        client.close()
    partitions = spark.createDataFrame(counts, "tenant string, topic string, partitions int")
    out = results(minute, partitions, hot_factor=hot_factor)
    out["unreadable"] = unreadable.rows()
    minute.unpersist()
    return out


def results(
    minute: DataFrame, partitions: DataFrame, *, hot_factor: float = throughput.HOT_FACTOR
) -> dict[str, list[dict]]:
    """Minute, hour, peak and skew rows from per-partition minutes (cached by the caller;
    ``per_partition`` of the records or ``from_slices`` of the lag's slices);
    ``partitions``: ``tenant, topic, partitions``. The four results are one query (tagged
    by ``kind``, collected once): each query costs a fixed 0.1-0.3 s here, more than these
    few thousand rows."""
    hour = throughput.rollup(minute, "hour")
    parts = {
        "minute": minute,
        "hour": hour,
        "peaks": throughput.peaks(minute),
        "skew": throughput.skew(hour, partitions, hot_factor=hot_factor),
    }
    both = None
    for kind, df in parts.items():
        df = df.withColumn("kind", F.lit(kind))
        both = df if both is None else both.unionByName(df, allowMissingColumns=True)
    keys = ("tenant", "topic", "ts")
    return rows_by_kind(
        both,
        {kind: df.columns for kind, df in parts.items()},
        {
            "minute": (*keys, "partition"),
            "hour": (*keys, "partition"),
            "peaks": keys[:2],
            "skew": keys,
        },
    )
