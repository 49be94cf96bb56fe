"""The consumer-lag job: topics' records and ``__consumer_offsets`` -> lag history (with
status per sample) and each partition's status now; batches that could not be read are
listed under ``unreadable`` (their offsets count toward no log end)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark.datasource.segments import read_segments
from spark.jobs.common import (
    Source,
    TopicRef,
    Unreadable,
    read_topic,
    read_topics,
    rows_by_kind,
)
from spark.transforms import lag
from spark.transforms.burrow_sql import RESULT
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
    records = read_topics(spark, source, topics, unreadable=True)
    if records is None:
        return {"history": [], "status": [], "unreadable": []}
    unreadable = Unreadable()
    records = unreadable.records(records).select(
        "tenant", "topic", "partition", "offset", "timestamp"
    )
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
    out["unreadable"] = unreadable.rows()
    slices.unpersist()
    commits.unpersist()
    return out


HISTORY_COLUMNS = (
    *lag.GTP,
    "ts_ms",
    "committed_offset",
    "log_end_offset",
    "offset_lag",
    "time_lag_ms",
    "is_commit",
    "last_commit_ms",
    *RESULT,
)


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
    caller, who may share them with the throughput), in one query and one collect: the
    samples (one exchange of the slices and commits by partition) are framed once and both
    results derive from those frames (``lag.evaluated``; ``log_starts`` default: the
    smallest offset read). Each Spark job costs a fixed 0.1-0.3 s here, more than these
    tens of thousands of rows, so fewer queries is what makes this fast."""
    frames = lag.framed(lag.samples_with_log_starts(slices, commits), window)
    both = lag.evaluated(
        frames,
        now_ms=now_ms,
        since_ms=since_ms,
        log_starts=log_starts,
        segments=segments,
        min_stop_ms=min_stop_ms,
    )
    out = rows_by_kind(
        both,
        {lag.HISTORY: HISTORY_COLUMNS, lag.STATUS: lag.STATUS_COLUMNS},
        {lag.HISTORY: (*lag.GTP, "ts_ms"), lag.STATUS: tuple(lag.GTP)},
    )
    return {"history": out[lag.HISTORY], "status": out[lag.STATUS]}
