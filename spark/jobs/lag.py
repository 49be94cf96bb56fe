"""The consumer-lag job: topics' records and ``__consumer_offsets`` -> lag history (with
status per sample) and each partition's status now."""

from __future__ import annotations

from pyspark.sql import DataFrame
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
    # the commits are small and used five times (commit seconds twice, committed offsets,
    # groups, the commits themselves): one read of __consumer_offsets, kept
    commits = commits.join(wanted, ["tenant", "topic"]).cache()
    # the records are read once, into the slices; everything else works on those
    slices = lag.record_slices(records, commits, bucket).cache()
    segments = log_starts = None
    if with_segments:
        client = source.client()
        try:
            facts = read_segments(spark, client, [(t.name, t.tenant, t.shown) for t in topics])
        finally:
            client.close()
        segments = segment_forecast(facts, now_ms=now_ms)
        log_starts = facts.select("tenant", "topic", "partition", "log_start_offset").distinct()
    out = results(
        slices,
        commits,
        now_ms=now_ms,
        since_ms=since_ms,
        log_starts=log_starts,
        segments=segments,
        window=window,
        min_stop_ms=min_stop_ms,
    )
    slices.unpersist()
    commits.unpersist()
    return out


def results(
    slices: DataFrame,
    commits: DataFrame,
    *,
    now_ms: int,
    since_ms: int | None = None,
    log_starts: DataFrame | None = None,
    segments: DataFrame | None = None,
    window: int = lag.DEFAULT_WINDOW,
    min_stop_ms: int = lag.DEFAULT_MIN_STOP_MS,
) -> dict[str, list[dict]]:
    """The history and status rows from ``record_slices`` of the same commits (cached by the
    caller, who may share them with the throughput): the samples are framed once and both
    results derive from those frames (``log_starts`` default: the smallest offset read)."""
    frames = lag.framed(lag.samples_from_slices(slices, commits), window).cache()
    history = lag.history_from_frames(frames, min_stop_ms=min_stop_ms)
    if since_ms is not None:
        history = history.where(F.col("ts_ms") >= since_ms)
    status = lag.status_from_frames(
        frames,
        now_ms=now_ms,
        log_starts=log_starts if log_starts is not None else lag.log_starts_of(slices),
        segments=segments,
        min_stop_ms=min_stop_ms,
    )
    out = {
        "history": rows(history, (*lag.GTP, "ts_ms")),
        "status": rows(status, tuple(lag.GTP)),
    }
    frames.unpersist()
    return out
