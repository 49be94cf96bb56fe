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

from spark.transforms.burrow_sql import ORDER, RESULT, evaluate, quoted, with_frames
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


# how many of the second's commit times (``cs``) lie before the record's ``ts_ms`` (0 without)
SLOT = "IF(cs IS NULL, 0, size(filter(cs, c -> c < ts_ms)))"


def _committed_offsets(commits: DataFrame) -> DataFrame:
    return (
        commits.where(F.col("committed_offset").isNotNull())
        .select(*TP, F.col("committed_offset").alias("offset"), F.lit(True).alias("hit"))
        .distinct()
    )


def _probe(left: DataFrame, right: DataFrame, keys: list[str], how: str = "left") -> DataFrame:
    """``left`` joined with the broadcast ``right`` on ``keys``, probed with one long hash of
    the integral keys (Spark's fastest hashed relation for a broadcast join) and every key
    compared on the candidates, so the join is exact. Joining on the key columns themselves
    (two strings among them) builds and hashes a row per probe: about 0.7 s more per 10M
    records on two cores for each of the record slices' two joins."""
    ints = ", ".join(quoted(k for k in keys if k not in ("tenant", "topic")))
    r = right.selectExpr(f"xxhash64({ints}) AS _k", *(f"`{c}` AS `_r_{c}`" for c in right.columns))
    same = " AND ".join(f"`{k}` = `_r_{k}`" for k in keys)
    # coalesce keeps the comparison out of the equi-join keys (one long key stays the key)
    on = F.expr(f"xxhash64({ints}) = _k AND coalesce({same}, false)")
    joined = left.join(F.broadcast(r), on, how)
    extra = [f"`_r_{c}` AS `{c}`" for c in right.columns if c not in keys]
    return joined.selectExpr(*quoted(left.columns), *extra)


def record_slices(records: DataFrame, commits: DataFrame, bucket: str = "1 minute") -> DataFrame:
    """The one pass over the records that the lag and the throughput need, hashed into a
    small aggregate: ``tenant, topic, partition, sec, slot, at, ts_ms, end, start, records,
    bytes`` (largest timestamp, 1 + largest offset, smallest offset, record count, payload
    bytes: 0 when the records carry no ``key``/``value``) per second and slot of that second
    between its commit times (slot k: stamped after the second's k-th commit time and at or
    before the next; most seconds hold no commit and are one slot). A record at a committed
    offset is its own slice with ``at`` = its offset (``ts_ms`` is then its timestamp, for
    the time lag). So every slice lies wholly at or before, or wholly after, every commit
    time of its partition: the log end at a commit is the largest end of the slices whose
    ``ts_ms`` is at or before it. Everything after this works on the slices: the records are
    read once, never sorted, and joined only with two small broadcast tables (commit seconds,
    committed offsets; ``_probe``); ``throughput.from_slices`` sums them into minutes."""
    bucket_ms(bucket)  # fail early on a bucket the slices cannot respect
    has_payload = {"key", "value"} <= set(records.columns)
    sized = payload_bytes(records) if has_payload else records.withColumn("bytes", F.lit(0))
    r = sized.selectExpr(
        *quoted(TP), "offset", "bytes", "unix_millis(`timestamp`) AS ts_ms"
    ).selectExpr("*", "floor(ts_ms / 1000) AS sec")
    r = _probe(r, _commit_seconds(commits), [*TP, "sec"])
    r = _probe(r, _committed_offsets(commits), [*TP, "offset"])
    return (
        r.selectExpr(
            *quoted(TP),
            "sec",
            f"{SLOT} AS slot",
            "IF(hit, offset, NULL) AS at",
            "ts_ms",
            "offset",
            "bytes",
        )
        .groupBy(*TP, "sec", "slot", "at")
        .agg(
            F.expr("max(ts_ms)").alias("ts_ms"),
            F.expr("max(offset) + 1").alias("end"),
            F.expr("min(offset)").alias("start"),
            F.expr("count(1)").alias("records"),
            F.expr("CAST(sum(bytes) AS long)").alias("bytes"),
        )
    )


def log_starts_of(slices: DataFrame) -> DataFrame:
    """``tenant, topic, partition, log_start_offset``: the smallest offset read."""
    return slices.groupBy(*TP).agg(F.min("start").alias("log_start_offset"))


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
    return samples_with_log_starts(slices, commits, bucket).drop("log_start_offset")


def samples_with_log_starts(
    slices: DataFrame, commits: DataFrame, bucket: str = "1 minute"
) -> DataFrame:
    """``samples_from_slices`` plus ``log_start_offset`` (the smallest offset read of the
    partition). The slices and the commits meet in one stream per partition (one exchange of
    small rows; every later window and aggregate keys on the partition, so nothing else is
    shuffled or broadcast), ordered by time with a commit after the slices stamped at or
    before it: the running largest end is the log end at every commit and slice (a slice
    lies wholly on one side of each commit time, ``record_slices``), the timestamp of the
    record at a committed offset comes from its own slice (same partition and offset), a
    bucket's move is its last slice's time and the log end by then, repeated for every
    group of the partition."""
    size = bucket_ms(bucket)
    tp, gtp = quoted(TP), quoted(GTP)
    by_tp = f"PARTITION BY {', '.join(tp)}"
    s = slices.selectExpr(
        *tp,
        "0 AS kind",
        "ts_ms",
        "sec",
        "slot",
        "`end`",
        "start",
        f"floor(sec * 1000 / {size}) AS bucket",
        "at AS okey",
        "IF(at IS NOT NULL, ts_ms, NULL) AS rec_ms",
        "CAST(NULL AS string) AS `group`",
    )
    c = commits.where("committed_offset IS NOT NULL").selectExpr(
        *tp,
        "1 AS kind",
        "unix_millis(commit_timestamp) AS ts_ms",
        "CAST(NULL AS long) AS sec",
        "CAST(NULL AS int) AS slot",
        "CAST(NULL AS long) AS `end`",
        "CAST(NULL AS long) AS start",
        "CAST(NULL AS long) AS bucket",
        "committed_offset AS okey",
        "CAST(NULL AS long) AS rec_ms",
        "`group`",
    )
    # a slice's identity in its partition, to pick one last slice per bucket
    ident = "named_struct('ts_ms', ts_ms, 'sec', sec, 'slot', slot, 'okey', okey)"
    by_time = f"{by_tp} ORDER BY ts_ms, kind RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"
    ev = (
        s.unionByName(c)
        .repartition(*TP)
        .selectExpr(
            *tp,
            "kind",
            "ts_ms",
            "okey",
            "`group`",
            # peers (same time) included: a commit sees every slice stamped at or before it
            f"coalesce(max(`end`) OVER ({by_time}), 0) AS log_end",
            f"max(rec_ms) OVER ({by_tp}, okey) AS rec_ms",
            f"{ident} = max({ident}) OVER ({by_tp}, bucket) AS move",
            f"collect_set(`group`) OVER ({by_tp}) AS groups",
            f"min(start) OVER ({by_tp}) AS log_start_offset",
        )
    )
    # a bucket's last slice is its move, one sample for every group of the partition; a
    # commit is a sample of its group: one stream, no union (its windows run once)
    ev = ev.where("kind = 1 OR move").selectExpr(
        *tp,
        "explode(IF(kind = 1, array(`group`), groups)) AS `group`",
        "ts_ms",
        "kind = 1 AS is_commit",
        "IF(kind = 1, named_struct('c', okey, 'rec_ms', rec_ms), NULL) AS cr",
        "log_end",
        "log_start_offset",
    )
    w = (
        f"OVER (PARTITION BY {', '.join(gtp)} ORDER BY ts_ms, is_commit"
        " ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
    )
    # the committed offset and its record's timestamp travel together from each commit
    ev = ev.selectExpr(
        *gtp,
        "ts_ms",
        "is_commit",
        f"last(cr, true) {w} AS cr",
        f"max(log_end) {w} AS log_end_offset",
        f"max(IF(is_commit, ts_ms, NULL)) {w} AS last_commit_ms",
        "log_start_offset",
    ).where("cr IS NOT NULL")
    offset_lag = "greatest(log_end_offset - cr.c, 0)"
    return ev.selectExpr(
        *gtp,
        "ts_ms",
        "timestamp_millis(ts_ms) AS ts",
        "cr.c AS committed_offset",
        "log_end_offset",
        f"{offset_lag} AS offset_lag",
        f"CAST(IF({offset_lag} = 0, 0, greatest(ts_ms - cr.rec_ms, 0)) AS long) AS time_lag_ms",
        "is_commit",
        "last_commit_ms",
        "log_start_offset",
    )


def framed(samples: DataFrame, window: int = DEFAULT_WINDOW) -> DataFrame:
    """``samples`` plus the aggregates of each sample's window (itself and the ``window - 1``
    before it). A frame looks only backwards, so the frames of the samples up to any ``now``
    are the same with or without the later samples: the history and the status at ``now``
    both derive from one framed DataFrame (jobs cache it)."""
    return with_frames(samples, GTP, window)


HISTORY, STATUS = 0, 1  # ``kind`` of an ``evaluated`` row
STATUS_COLUMNS = (
    *GTP,
    "committed_offset",
    "log_end_offset",
    "offset_lag",
    "time_lag_ms",
    "sampled_ms",
    "last_commit_ms",
    "log_start_offset",
    *RESULT,
    "retention_risk",
)


def evaluated(
    frames: DataFrame,
    *,
    now_ms: int | None,
    since_ms: int | None = None,
    history: bool = True,
    log_starts: DataFrame | None = None,
    segments: DataFrame | None = None,
    min_stop_ms: int = DEFAULT_MIN_STOP_MS,
    risk_horizon_ms: int = RISK_HORIZON_MS,
) -> DataFrame:
    """The one evaluation of ``framed`` samples: the history (``kind`` = ``HISTORY``, each
    sample at or after ``since_ms`` evaluated at its own time, unless ``history`` is false)
    and the status at ``now_ms`` (``kind`` = ``STATUS``, unless ``now_ms`` is None: each
    key's last sample at or before ``now_ms`` repeated, ``sampled_ms`` = its ``ts_ms``,
    evaluated at ``now_ms`` with the log start, ``retention_risk`` when its committed offset
    lies in a segment retention deletes within ``risk_horizon_ms``) in one DataFrame, so
    one query (one collect) gives both. ``log_starts`` default: the frames' own
    ``log_start_offset`` (``samples_with_log_starts``) or none."""
    kinds = []
    if history:
        kinds.append(
            str(HISTORY) if since_ms is None else f"IF(ts_ms >= {since_ms}, {HISTORY}, NULL)"
        )
    f = frames
    if now_ms is not None:
        after = (
            f"lead(ts_ms) OVER (PARTITION BY {', '.join(quoted(GTP))} ORDER BY {', '.join(ORDER)})"
        )
        last = f"ts_ms <= {now_ms} AND ({after} IS NULL OR {after} > {now_ms})"
        f = f.selectExpr("*", f"{last} AS _last")
        kinds.append(f"IF(_last, {STATUS}, NULL)")
    f = f.selectExpr("*", f"explode(array_compact(array({', '.join(kinds)}))) AS kind").drop(
        "_last"
    )
    if log_starts is not None:
        f = f.drop("log_start_offset").join(
            F.broadcast(log_starts.select(*TP, "log_start_offset")), TP, "left"
        )
    elif "log_start_offset" not in f.columns:
        f = f.withColumn("log_start_offset", F.lit(None).cast("long"))
    status = f"kind = {STATUS}"
    out = evaluate(
        f,
        now_ms="ts_ms" if now_ms is None else f"IF({status}, {now_ms}L, ts_ms)",
        last_commit_ms="last_commit_ms",
        log_start_offset=f"IF({status}, log_start_offset, NULL)",
        min_stop_ms=min_stop_ms,
    ).withColumn("sampled_ms", F.col("ts_ms"))
    if segments is None or now_ms is None:
        return out.withColumn("retention_risk", F.lit(False))
    doomed = (
        segments.where(F.col("delete_at_ms") <= now_ms + risk_horizon_ms)
        .groupBy(*TP)
        .agg(F.max("end_offset").alias("doomed_end"))
    )
    return (
        out.join(F.broadcast(doomed), TP, "left")
        .withColumn(
            "retention_risk",
            F.coalesce(
                (F.col("kind") == STATUS)
                & (F.col("offset_lag") > 0)
                & (F.col("committed_offset") < F.col("doomed_end")),
                F.lit(False),
            ),
        )
        .drop("doomed_end")
    )


def evaluate_history(
    samples: DataFrame, *, window: int = DEFAULT_WINDOW, min_stop_ms: int = DEFAULT_MIN_STOP_MS
) -> DataFrame:
    """``samples`` plus ``status`` (and rates, catch-up): each sample evaluated over itself and
    the ``window - 1`` samples before it, at its own time (``evaluated``'s history)."""
    out = evaluated(framed(samples, window), now_ms=None, min_stop_ms=min_stop_ms)
    return out.select(*samples.columns, *RESULT)


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
    """``STATUS_COLUMNS``, one row per (tenant, group, topic, partition): the evaluation at
    ``now_ms`` over the last ``window`` samples, the current lag, catch-up estimate and
    ``retention_risk`` (``evaluated``'s status).

    ``log_starts``: ``tenant, topic, partition, log_start_offset`` (for ERR)."""
    out = evaluated(
        framed(samples, window),
        now_ms=now_ms,
        history=False,
        log_starts=log_starts,
        segments=segments,
        min_stop_ms=min_stop_ms,
        risk_horizon_ms=risk_horizon_ms,
    )
    return out.select(*STATUS_COLUMNS)
