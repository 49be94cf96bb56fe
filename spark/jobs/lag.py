"""The consumer-lag job: topics' records and ``__consumer_offsets`` -> lag history (with
status per sample) and each partition's status now."""

from __future__ import annotations

from pyspark.sql import functions as F

from spark.datasource.segments import read_segments
from spark.jobs.common import Source, TopicRef, read_topic, read_topics, rows
from spark.transforms import lag
from spark.transforms.retention import segment_forecast


def run(
    spark,
    source: Source,
    topics: list[TopicRef],
    offsets_topic: TopicRef,
    *,
    now_ms: int,
    since_ms: int | None = None,
    bucket: str = "1 minute",
    window: int = lag.DEFAULT_WINDOW,
    min_stop_ms: int = lag.DEFAULT_MIN_STOP_MS,
    with_segments: bool = True,
) -> dict[str, list[dict]]:
    records = read_topics(spark, source, topics)
    if records is None:
        return {"history": [], "status": []}
    records = records.select("tenant", "topic", "partition", "offset", "timestamp")
    commits = read_topic(spark, source, offsets_topic, decode="consumer_offsets")
    commits = commits.withColumn("tenant", F.coalesce(F.col("tenant"), F.lit(""))).where(
        F.col("committed_offset").isNotNull()
    )
    wanted = spark.createDataFrame(
        [(t.tenant, t.shown) for t in topics], "tenant string, topic string"
    )
    commits = commits.join(wanted, ["tenant", "topic"])
    # the records are read once, into the slices; everything else works on those
    slices = lag.record_slices(records, commits, bucket).cache()
    samples = lag.samples_from_slices(slices, commits).cache()
    history = lag.evaluate_history(samples, window=window, min_stop_ms=min_stop_ms)
    if since_ms is not None:
        history = history.where(F.col("ts_ms") >= since_ms)
    segments = None
    if with_segments:
        client = source.client()
        try:
            facts = read_segments(spark, client, [(t.name, t.tenant, t.shown) for t in topics])
        finally:
            client.close()
        segments = segment_forecast(facts, now_ms=now_ms)
        log_starts = facts.select("tenant", "topic", "partition", "log_start_offset").distinct()
    else:
        log_starts = lag.log_starts_of(slices)
    status = lag.lag_status(
        samples,
        now_ms=now_ms,
        log_starts=log_starts,
        segments=segments,
        window=window,
        min_stop_ms=min_stop_ms,
    )
    out = {
        "history": rows(history, (*lag.GTP, "ts_ms")),
        "status": rows(status, tuple(lag.GTP)),
    }
    samples.unpersist()
    slices.unpersist()
    return out
