"""The retention job: segment facts -> per-partition report (sizes, ages, what goes within
1/6/24 h), storage per tenant and topic now, and compaction effectiveness of compacted
topics."""

from __future__ import annotations

from spark.datasource.segments import read_segments
from spark.jobs.common import Source, TopicRef, Unreadable, read_topics, rows
from spark.transforms import retention


def run(
    spark,
    source: Source,
    topics: list[TopicRef],
    *,
    now_ms: int,
    compacted: list[TopicRef] | None = None,
) -> dict[str, list[dict]]:
    if not topics:
        return {"partitions": [], "storage": [], "compaction": [], "unreadable": []}
    client = source.client()
    try:
        facts = read_segments(spark, client, [(t.name, t.tenant, t.shown) for t in topics])
    finally:
        client.close()
    forecast = retention.segment_forecast(facts, now_ms=now_ms).cache()
    out = {
        "partitions": rows(
            retention.partition_report(forecast, now_ms=now_ms).orderBy(*retention.TP)
        ),
        "storage": rows(
            retention.storage_by_tenant(facts, now_ms=now_ms).orderBy("tenant", "topic")
        ),
        "compaction": [],
        "unreadable": [],
    }
    if compacted:
        unreadable = Unreadable()
        records = unreadable.records(read_topics(spark, source, compacted, unreadable=True))
        out["compaction"] = rows(retention.compaction(records).orderBy(*retention.TP))
        out["unreadable"] = unreadable.rows()
    forecast.unpersist()
    return out
