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

from spark.transforms.burrow_sql import RESULT, evaluate, with_frames
from spark.transforms.throughput import payload_bytes

TP = ["tenant", "topic", "partition"]
GTP = ["tenant", "group", "topic", "partition"]
DEFAULT_WINDOW = 10
DEFAULT_MIN_STOP_MS = 60_000
RISK_HORIZON_MS = 3_600_000


UNITS_MS = {"second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}


def _ms(col: Column) -> Column:
    """Epoch milliseconds of a timestamp column."""
    return F.unix_millis(col)


def bucket_ms(bucket: str) -> int:
    """``"1 minute"``, ``"30 seconds"``, ``"2 hours"``... in milliseconds (whole seconds, so
    a second never straddles two buckets)."""
    count, _, unit = bucket.strip().partition(" ")
    ms = int(count) * UNITS_MS.get(unit.strip().rstrip("s"), 0)
    if ms <= 0:
        raise ValueError(f"bucket {bucket!r}: expected '<n> second|minute|hour|day[s]'")
    return ms


def _commit_seconds(commits: DataFrame) -> DataFrame:
    """``tenant, topic, partition, sec, cs``: the sorted distinct times of the commits with
    an offset, per second (the boundaries the record slices respect)."""
    c = commits.where(F.col("committed_offset").isNotNull()).select(
        *TP, _ms(F.col("commit_timestamp")).alias("c")
    )
    return c.groupBy(*TP, F.floor(F.col("c") / 1000).alias("sec")).agg(
        F.array_sort(F.collect_set("c")).alias("cs")
    )


def _slot(ts_ms: Column) -> Column:
    """How many of the second's commit times (``cs``) lie before ``ts_ms`` (0 without)."""
    return F.when(F.col("cs").isNull(), F.lit(0)).otherwise(
        F.size(F.filter("cs", lambda x: x < ts_ms))
    )


def _committed_offsets(commits: DataFrame) -> DataFrame:
    return (
        commits.where(F.col("committed_offset").isNotNull())
        .select(*TP, F.col("committed_offset").alias("offset"), F.lit(True).alias("hit"))
        .distinct()
    )


def record_slices(records: DataFrame, commits: DataFrame, bucket: str = "1 minute") -> DataFrame:
    """The one pass over the records that the lag and the throughput need, hashed into a
    small aggregate: ``tenant, topic, partition, sec, slot, at, ts_ms, end, start, records,
    bytes`` (largest timestamp, 1 + largest offset, smallest offset, record count, payload
    bytes: 0 when the records carry no ``key``/``value``) per second and slot of that second
    between its commit times (slot k: stamped after the second's k-th commit time and at or
    before the next; most seconds hold no commit and are one slot). A record at a committed
    offset is its own slice with ``at`` = its offset (``ts_ms`` is then its timestamp, for
    the time lag). Everything after this works on the slices: the records are read once,
    never sorted, and joined only with two small broadcast tables (commit seconds, committed
    offsets); ``throughput.from_slices`` sums them into minutes."""
    bucket_ms(bucket)  # fail early on a bucket the slices cannot respect
    cs = F.broadcast(_commit_seconds(commits))
    wanted = F.broadcast(_committed_offsets(commits))
    has_payload = {"key", "value"} <= set(records.columns)
    sized = payload_bytes(records) if has_payload else records.withColumn("bytes", F.lit(0))
    r = sized.select(*TP, "offset", "bytes", _ms(F.col("timestamp")).alias("ts_ms")).withColumn(
        "sec", F.floor(F.col("ts_ms") / 1000)
    )
    return (
        r.join(cs, [*TP, "sec"], "left")
        .join(wanted, [*TP, "offset"], "left")
        .groupBy(
            *TP,
            "sec",
            _slot(F.col("ts_ms")).alias("slot"),
            F.when(F.col("hit"), F.col("offset")).alias("at"),
        )
        .agg(
            F.max("ts_ms").alias("ts_ms"),
            (F.max("offset") + 1).alias("end"),
            F.min("offset").alias("start"),
            F.count(F.lit(1)).alias("records"),
            F.sum("bytes").cast("long").alias("bytes"),
        )
    )


def log_starts_of(slices: DataFrame) -> DataFrame:
    """``tenant, topic, partition, log_start_offset``: the smallest offset read."""
    return slices.groupBy(*TP).agg(F.min("start").alias("log_start_offset"))


def _log_end_at_commits(slices: DataFrame, commits: DataFrame) -> DataFrame:
    """The commits (``group``, ``c``, ``ts_ms``, ``rec_ms``: the timestamp of the record at
    the committed offset) with ``log_end``: slices and commits in one stream per partition,
    ordered by second and slot (a commit after the records stamped at or before it), the
    running largest end (0 before any record)."""
    cs = F.broadcast(_commit_seconds(commits))
    at = F.broadcast(
        slices.where(F.col("at").isNotNull()).select(
            *TP, F.col("at").alias("c"), F.col("ts_ms").alias("rec_ms")
        )
    )
    c = (
        commits.where(F.col("committed_offset").isNotNull())
        .select(
            *TP,
            "group",
            F.col("committed_offset").alias("c"),
            _ms(F.col("commit_timestamp")).alias("ts_ms"),
        )
        .withColumn("sec", F.floor(F.col("ts_ms") / 1000))
        .join(cs, [*TP, "sec"], "left")
        .join(at, [*TP, "c"], "left")
        .select(
            *TP,
            "sec",
            _slot(F.col("ts_ms")).alias("slot"),
            F.lit(1).alias("kind"),
            "ts_ms",
            F.lit(None).cast("long").alias("end"),
            "group",
            "c",
            "rec_ms",
        )
    )
    s = slices.select(
        *TP,
        "sec",
        "slot",
        F.lit(0).alias("kind"),
        "ts_ms",
        "end",
        F.lit(None).cast("string").alias("group"),
        F.lit(None).cast("long").alias("c"),
        F.lit(None).cast("long").alias("rec_ms"),
    )
    w = (
        Window.partitionBy(*TP)
        .orderBy("sec", "slot", "kind")
        .rowsBetween(Window.unboundedPreceding, 0)
    )
    return (
        s.unionByName(c)
        .withColumn("log_end", F.coalesce(F.max("end").over(w), F.lit(0)))
        .where("kind = 1")
    )


def log_end_moves(records: DataFrame, bucket: str = "1 minute") -> DataFrame:
    """``tenant, topic, partition, ts_ms, log_end``: one sample per bucket with records."""
    no_commits = records.sparkSession.createDataFrame(
        [],
        "tenant string, topic string, partition int, group string, committed_offset long, "
        "commit_timestamp timestamp",
    )
    return _moves(record_slices(records, no_commits, bucket), bucket)


def _moves(slices: DataFrame, bucket: str) -> DataFrame:
    """One sample per bucket with records: its last record's time, the log end by then."""
    size = bucket_ms(bucket)
    b = slices.groupBy(*TP, F.floor(F.col("sec") * 1000 / size).alias("bucket")).agg(
        F.max("ts_ms").alias("ts_ms"), F.max("end").alias("end")
    )
    w = Window.partitionBy(*TP).orderBy("ts_ms").rowsBetween(Window.unboundedPreceding, 0)
    return b.select(*TP, "ts_ms", F.max("end").over(w).alias("log_end"))


def lag_samples(records: DataFrame, commits: DataFrame, bucket: str = "1 minute") -> DataFrame:
    """``tenant, group, topic, partition, ts_ms, ts, committed_offset, log_end_offset,
    offset_lag, time_lag_ms, is_commit, last_commit_ms``: the lag history, one row per sample
    from the group's first commit on."""
    return samples_from_slices(record_slices(records, commits, bucket), commits, bucket)


def samples_from_slices(
    slices: DataFrame, commits: DataFrame, bucket: str = "1 minute"
) -> DataFrame:
    """``lag_samples`` from ``record_slices`` of the same commits (jobs cache the slices)."""
    groups = F.broadcast(
        commits.where(F.col("committed_offset").isNotNull()).select(*GTP).distinct()
    )
    moves = (
        _moves(slices, bucket)
        .join(groups, TP)
        .select(
            *GTP,
            "ts_ms",
            F.lit(False).alias("is_commit"),
            F.lit(None).cast("struct<c:long,rec_ms:long>").alias("cr"),
            "log_end",
        )
    )
    at_commits = _log_end_at_commits(slices, commits).select(
        *GTP,
        "ts_ms",
        F.lit(True).alias("is_commit"),
        F.struct("c", "rec_ms").alias("cr"),
        "log_end",
    )
    w = (
        Window.partitionBy(*GTP)
        .orderBy("ts_ms", "is_commit")
        .rowsBetween(Window.unboundedPreceding, 0)
    )
    # the committed offset and its record's timestamp travel together from each commit
    ev = (
        moves.unionByName(at_commits)
        .select(
            *GTP,
            "ts_ms",
            "is_commit",
            F.last("cr", ignorenulls=True).over(w).alias("cr"),
            F.max("log_end").over(w).alias("log_end_offset"),
            F.max(F.when(F.col("is_commit"), F.col("ts_ms"))).over(w).alias("last_commit_ms"),
        )
        .where(F.col("cr").isNotNull())
    )
    committed = F.col("cr.c")
    offset_lag = F.greatest(F.col("log_end_offset") - committed, F.lit(0))
    time_lag = F.when(offset_lag == 0, F.lit(0)).otherwise(
        F.greatest(F.col("ts_ms") - F.col("cr.rec_ms"), F.lit(0))
    )
    return ev.select(
        *GTP,
        "ts_ms",
        F.timestamp_millis("ts_ms").alias("ts"),
        committed.alias("committed_offset"),
        "log_end_offset",
        offset_lag.alias("offset_lag"),
        time_lag.cast("long").alias("time_lag_ms"),
        "is_commit",
        "last_commit_ms",
    )


def framed(samples: DataFrame, window: int = DEFAULT_WINDOW) -> DataFrame:
    """``samples`` plus the aggregates of each sample's window (itself and the ``window - 1``
    before it). A frame looks only backwards, so the frames of the samples up to any ``now``
    are the same with or without the later samples: the history and the status at ``now``
    both derive from one framed DataFrame (jobs cache it)."""
    return with_frames(samples, GTP, window)


def evaluate_history(
    samples: DataFrame, *, window: int = DEFAULT_WINDOW, min_stop_ms: int = DEFAULT_MIN_STOP_MS
) -> DataFrame:
    """``samples`` plus ``status`` (and rates, catch-up): each sample evaluated over itself and
    the ``window - 1`` samples before it, at its own time."""
    return history_from_frames(framed(samples, window), min_stop_ms=min_stop_ms)


def history_from_frames(frames: DataFrame, *, min_stop_ms: int = DEFAULT_MIN_STOP_MS) -> DataFrame:
    """``evaluate_history`` from ``framed`` samples."""
    return evaluate(
        frames,
        now_ms=F.col("ts_ms"),
        last_commit_ms=F.col("last_commit_ms"),
        log_start_offset=F.lit(None).cast("long"),
        min_stop_ms=min_stop_ms,
    )


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
    return status_from_frames(
        framed(samples, window),
        now_ms=now_ms,
        log_starts=log_starts,
        segments=segments,
        min_stop_ms=min_stop_ms,
        risk_horizon_ms=risk_horizon_ms,
    )


def status_from_frames(
    frames: DataFrame,
    *,
    now_ms: int,
    log_starts: DataFrame | None = None,
    segments: DataFrame | None = None,
    min_stop_ms: int = DEFAULT_MIN_STOP_MS,
    risk_horizon_ms: int = RISK_HORIZON_MS,
) -> DataFrame:
    """``lag_status`` from ``framed`` samples: each key's last sample at or before
    ``now_ms``, evaluated at ``now_ms``."""
    latest = Window.partitionBy(*GTP).orderBy(F.desc("ts_ms"), F.desc("is_commit"))
    last = (
        frames.where(F.col("ts_ms") <= now_ms)
        .withColumn("_rn", F.row_number().over(latest))
        .where("_rn = 1")
        .drop("_rn")
    )
    if log_starts is not None:
        last = last.join(F.broadcast(log_starts.select(*TP, "log_start_offset")), TP, "left")
    else:
        last = last.withColumn("log_start_offset", F.lit(None).cast("long"))
    out = evaluate(
        last,
        now_ms=F.lit(now_ms).cast("long"),
        last_commit_ms=F.col("last_commit_ms"),
        log_start_offset=F.col("log_start_offset"),
        min_stop_ms=min_stop_ms,
    ).select(
        *GTP,
        "committed_offset",
        "log_end_offset",
        "offset_lag",
        "time_lag_ms",
        F.col("ts_ms").alias("sampled_ms"),
        "last_commit_ms",
        "log_start_offset",
        *RESULT,
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
