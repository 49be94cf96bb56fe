"""Consumer lag: history of committed offsets against log end offsets, Burrow-style status,
catch-up estimate and retention risk. Pure DataFrame -> DataFrame functions.

Inputs (columns; ``tenant`` is "" where the source has none):

- ``records``: ``tenant, topic, partition, offset, timestamp`` (the topic's records, from the
  ``sluice`` source; only offsets and timestamps are used);
- ``commits``: ``tenant, group, topic, partition, committed_offset, commit_timestamp`` (from
  ``__consumer_offsets``; tombstones dropped);
- ``segments`` (optional): ``tenant, topic, partition, end_offset, delete_at`` (from
  ``retention.segment_forecast``) for the retention risk.

Samples are taken at every commit and whenever the log end moved: records are grouped into
``bucket`` windows and each bucket contributes one sample at its last record's timestamp with
the log end reached by then (``1 + max offset`` so far). The log end at a commit is that of
every record stamped at or before the commit. Offset lag = log end - committed (never below 0);
time lag = sample time - timestamp of the record at the committed offset (the next one the
group would read), 0 without lag.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark.transforms.burrow import Sample, evaluate

TP = ["tenant", "topic", "partition"]
GTP = ["tenant", "group", "topic", "partition"]
DEFAULT_WINDOW = 10
DEFAULT_MIN_STOP_MS = 60_000
RISK_HORIZON_MS = 3_600_000


def _ms(col: Column) -> Column:
    """Epoch milliseconds of a timestamp column."""
    return (F.unix_micros(col) / 1000).cast("long")


def log_end_moves(records: DataFrame, bucket: str = "1 minute") -> DataFrame:
    """``tenant, topic, partition, ts_ms, log_end``: one sample per bucket with records."""
    b = records.groupBy(*TP, F.window("timestamp", bucket).alias("w")).agg(
        F.max(_ms(F.col("timestamp"))).alias("ts_ms"), (F.max("offset") + 1).alias("end")
    )
    w = Window.partitionBy(*TP).orderBy("ts_ms").rowsBetween(Window.unboundedPreceding, 0)
    return b.select(*TP, "ts_ms", F.max("end").over(w).alias("log_end"))


def log_end_at_commits(records: DataFrame, commits: DataFrame) -> DataFrame:
    """``commits`` plus ``ts_ms`` and ``log_end``: 1 + the largest offset stamped at or before
    the commit (0 before any record)."""
    c = commits.select(*TP, _ms(F.col("commit_timestamp")).alias("ts_ms")).distinct()
    ev = records.select(
        *TP,
        _ms(F.col("timestamp")).alias("ts_ms"),
        (F.col("offset") + 1).alias("end"),
        F.lit(0).alias("kind"),
    )
    ev = ev.unionByName(
        c.select(*TP, "ts_ms", F.lit(None).cast("long").alias("end"), F.lit(1).alias("kind"))
    )
    w = Window.partitionBy(*TP).orderBy("ts_ms", "kind").rowsBetween(Window.unboundedPreceding, 0)
    at = (
        ev.withColumn("log_end", F.coalesce(F.max("end").over(w), F.lit(0)))
        .where("kind = 1")
        .select(*TP, "ts_ms", "log_end")
    )
    return commits.withColumn("ts_ms", _ms(F.col("commit_timestamp"))).join(
        at, [*TP, "ts_ms"], "left"
    )


def lag_samples(records: DataFrame, commits: DataFrame, bucket: str = "1 minute") -> DataFrame:
    """``tenant, group, topic, partition, ts_ms, ts, committed_offset, log_end_offset,
    offset_lag, time_lag_ms, is_commit, last_commit_ms``: the lag history, one row per sample
    from the group's first commit on."""
    commits = commits.where(F.col("committed_offset").isNotNull())
    at_commits = log_end_at_commits(records, commits).select(
        *GTP,
        "ts_ms",
        F.col("committed_offset").alias("c"),
        "log_end",
        F.lit(True).alias("is_commit"),
    )
    groups = commits.select(*GTP).distinct()
    moves = (
        log_end_moves(records, bucket)
        .join(groups, TP)
        .select(
            *GTP,
            "ts_ms",
            F.lit(None).cast("long").alias("c"),
            "log_end",
            F.lit(False).alias("is_commit"),
        )
    )
    ev = at_commits.unionByName(moves)
    w = (
        Window.partitionBy(*GTP)
        .orderBy("ts_ms", "is_commit")
        .rowsBetween(Window.unboundedPreceding, 0)
    )
    ev = ev.select(
        *GTP,
        "ts_ms",
        "is_commit",
        F.last("c", ignorenulls=True).over(w).alias("committed_offset"),
        F.max("log_end").over(w).alias("log_end_offset"),
        F.max(F.when(F.col("is_commit"), F.col("ts_ms"))).over(w).alias("last_commit_ms"),
    ).where(F.col("committed_offset").isNotNull())
    ev = ev.withColumn(
        "offset_lag", F.greatest(F.col("log_end_offset") - F.col("committed_offset"), F.lit(0))
    )
    at_offset = records.select(
        *TP, F.col("offset").alias("committed_offset"), _ms(F.col("timestamp")).alias("rec_ms")
    )
    out = ev.join(at_offset, [*TP, "committed_offset"], "left")
    time_lag = F.when(F.col("offset_lag") == 0, F.lit(0)).otherwise(
        F.greatest(F.col("ts_ms") - F.col("rec_ms"), F.lit(0))
    )
    return out.select(
        *GTP,
        "ts_ms",
        F.timestamp_millis("ts_ms").alias("ts"),
        "committed_offset",
        "log_end_offset",
        "offset_lag",
        time_lag.cast("long").alias("time_lag_ms"),
        "is_commit",
        "last_commit_ms",
    )


EVALUATION = T.StructType(
    [
        T.StructField("status", T.StringType()),
        T.StructField("consume_rate", T.DoubleType()),
        T.StructField("produce_rate", T.DoubleType()),
        T.StructField("catch_up_s", T.DoubleType()),
    ]
)


def _evaluate_udf(min_stop_ms: int):
    def run(window, now_ms, last_commit_ms, log_start):
        samples = [
            Sample(r.ts_ms, r.committed_offset, r.log_end_offset, r.is_commit) for r in window
        ]
        e = evaluate(
            samples,
            now_ms=now_ms,
            last_commit_ms=last_commit_ms,
            min_stop_ms=min_stop_ms,
            log_start_offset=log_start,
        )
        return (e.status, e.consume_rate, e.produce_rate, e.catch_up_s)

    return F.udf(run, EVALUATION)


def _window_struct() -> Column:
    return F.struct("ts_ms", "committed_offset", "log_end_offset", "is_commit")


def evaluate_history(
    samples: DataFrame, *, window: int = DEFAULT_WINDOW, min_stop_ms: int = DEFAULT_MIN_STOP_MS
) -> DataFrame:
    """``samples`` plus ``status`` (and rates, catch-up): each sample evaluated over itself and
    the ``window - 1`` samples before it, at its own time."""
    w = Window.partitionBy(*GTP).orderBy("ts_ms", "is_commit").rowsBetween(-(window - 1), 0)
    ev = _evaluate_udf(min_stop_ms)(
        F.collect_list(_window_struct()).over(w),
        F.col("ts_ms"),
        F.col("last_commit_ms"),
        F.lit(None).cast("long"),
    )
    return samples.withColumn("e", ev).select("*", "e.*").drop("e")


def lag_status(
    samples: DataFrame,
    *,
    now_ms: int,
    log_starts: DataFrame | None = None,
    segments: DataFrame | None = None,
    window: int = DEFAULT_WINDOW,
    min_stop_ms: int = DEFAULT_MIN_STOP_MS,
    risk_horizon_ms: int = RISK_HORIZON_MS,
) -> DataFrame:
    """One row per (tenant, group, topic, partition): the evaluation at ``now_ms`` over the
    last ``window`` samples, the current lag, catch-up estimate and ``retention_risk`` (the
    committed offset is in a segment retention deletes within ``risk_horizon_ms``).

    ``log_starts``: ``tenant, topic, partition, log_start_offset`` (for ERR)."""
    samples = samples.where(F.col("ts_ms") <= now_ms)
    rank = Window.partitionBy(*GTP).orderBy(F.desc("ts_ms"), F.desc("is_commit"))
    recent = samples.withColumn("rn", F.row_number().over(rank)).where(F.col("rn") <= window)
    agg = recent.groupBy(*GTP).agg(
        F.sort_array(
            F.collect_list(
                F.struct(
                    "ts_ms",
                    F.col("is_commit").cast("int").alias("k"),
                    "committed_offset",
                    "log_end_offset",
                    "is_commit",
                )
            )
        ).alias("win"),
        F.max("last_commit_ms").alias("last_commit_ms"),
        F.max_by(
            F.struct("offset_lag", "time_lag_ms", "committed_offset", "log_end_offset", "ts_ms"),
            F.struct("ts_ms", F.col("is_commit").cast("int")),
        ).alias("last"),
    )
    if log_starts is not None:
        agg = agg.join(log_starts.select(*TP, "log_start_offset"), TP, "left")
    else:
        agg = agg.withColumn("log_start_offset", F.lit(None).cast("long"))
    ev = _evaluate_udf(min_stop_ms)(
        F.col("win"), F.lit(now_ms), F.col("last_commit_ms"), F.col("log_start_offset")
    )
    out = agg.withColumn("e", ev).select(
        *GTP,
        F.col("last.committed_offset").alias("committed_offset"),
        F.col("last.log_end_offset").alias("log_end_offset"),
        F.col("last.offset_lag").alias("offset_lag"),
        F.col("last.time_lag_ms").alias("time_lag_ms"),
        F.col("last.ts_ms").alias("sampled_ms"),
        "last_commit_ms",
        "log_start_offset",
        "e.status",
        "e.consume_rate",
        "e.produce_rate",
        "e.catch_up_s",
    )
    if segments is None:
        return out.withColumn("retention_risk", F.lit(False))
    horizon = now_ms + risk_horizon_ms
    doomed = (
        segments.where(F.col("delete_at_ms") <= horizon)
        .groupBy(*TP)
        .agg(F.max("end_offset").alias("doomed_end"))
    )
    return (
        out.join(doomed, TP, "left")
        .withColumn(
            "retention_risk",
            F.coalesce(
                (F.col("offset_lag") > 0) & (F.col("committed_offset") < F.col("doomed_end")),
                F.lit(False),
            ),
        )
        .drop("doomed_end")
    )
