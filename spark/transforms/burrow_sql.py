"""The rules of ``spark.transforms.burrow`` in Spark SQL, as window aggregates over each
sample's window (itself and the ``window - 1`` samples before it), so Spark evaluates them
with generated code: no Python UDF round trip per row, no arrays of structs.

``burrow.evaluate`` stays the reference: the tests check both agree on generated windows, and
the benchmark's plain-Python side uses it. What the rules need of a window reduces to
aggregates over it: its size, its first sample, its first and last commit, the number of
commits, the smallest and largest committed offset among them, whether any sample has no lag,
and whether any commit after the window's first one went back (REWIND) or had less lag than
the commit before it (WARN). Those last two are flags each commit carries against the commit
before it in the whole history; the first commit of the window is discounted because its
predecessor lies outside the window.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark.transforms.burrow import ERR, OK, REWIND, STALL, STOP, WARN

RESULT = ("status", "consume_rate", "produce_rate", "catch_up_s")
ORDER = ("ts_ms", "is_commit")
FRAME = (
    "_n",
    "_first",
    "_c0",
    "_c1",
    "_nc",
    "_cmin",
    "_cmax",
    "_zero",
    "_backs",
    "_shrinks",
)


def _lag() -> Column:
    return F.greatest(F.col("log_end_offset") - F.col("committed_offset"), F.lit(0))


def _rate(first: Column, last: Column, t0: Column, t1: Column) -> Column:
    """``burrow._rate``: per second, null unless time moved forward."""
    return F.when(t1 > t0, (last - first).cast("double") * F.lit(1000.0) / (t1 - t0).cast("double"))


def with_frames(samples: DataFrame, keys: list[str], window: int) -> DataFrame:
    """``samples`` (``ts_ms, committed_offset, log_end_offset, is_commit`` per ``keys``) plus
    the aggregates of each sample's window (``FRAME`` columns)."""
    order = Window.partitionBy(*keys).orderBy(*ORDER)
    before = order.rowsBetween(Window.unboundedPreceding, -1)
    frame = order.rowsBetween(-(window - 1), 0)
    commit = F.col("is_commit")
    lag = _lag()
    prev = F.last(
        F.when(commit, F.struct(F.col("committed_offset").alias("c"), lag.alias("lag"))),
        ignorenulls=True,
    ).over(before)
    s = samples.withColumn("_lag", lag).withColumn("_prev", prev)
    s = s.withColumn(
        "_flags",
        F.when(
            commit,
            F.struct(
                F.coalesce(F.col("committed_offset") < F.col("_prev.c"), F.lit(False)).alias(
                    "back"
                ),
                F.coalesce(F.col("_lag") < F.col("_prev.lag"), F.lit(False)).alias("shrank"),
            ),
        ),
    )
    point = F.struct("ts_ms", "committed_offset", "log_end_offset", F.col("_lag").alias("lag"))
    cpoint = F.when(commit, F.struct(point.alias("p"), F.col("_flags").alias("f")))
    return s.select(
        *samples.columns,
        F.count(F.lit(1)).over(frame).alias("_n"),
        F.first(point).over(frame).alias("_first"),
        F.first(cpoint, ignorenulls=True).over(frame).alias("_c0"),
        F.last(cpoint, ignorenulls=True).over(frame).alias("_c1"),
        F.sum(commit.cast("int")).over(frame).alias("_nc"),
        F.min(F.when(commit, F.col("committed_offset"))).over(frame).alias("_cmin"),
        F.max(F.when(commit, F.col("committed_offset"))).over(frame).alias("_cmax"),
        F.max((F.col("_lag") == 0).cast("int")).over(frame).alias("_zero"),
        F.sum(F.col("_flags.back").cast("int")).over(frame).alias("_backs"),
        F.sum(F.col("_flags.shrank").cast("int")).over(frame).alias("_shrinks"),
    )


def evaluate(
    framed: DataFrame,
    *,
    now_ms: Column,
    last_commit_ms: Column,
    log_start_offset: Column,
    min_stop_ms: int,
) -> DataFrame:
    """``framed`` (``with_frames`` output; the current row is the window's last sample)
    without the ``FRAME`` columns, plus ``status, consume_rate, produce_rate,
    catch_up_s``."""
    keep = [c for c in framed.columns if c not in FRAME and c not in RESULT]
    first, c0, c1 = F.col("_first"), F.col("_c0.p"), F.col("_c1.p")
    nc = F.coalesce(F.col("_nc"), F.lit(0))
    consume = F.when(
        nc >= 2,
        _rate(c0["committed_offset"], c1["committed_offset"], c0["ts_ms"], c1["ts_ms"]),
    )
    produce = _rate(
        first["log_end_offset"], F.col("log_end_offset"), first["ts_ms"], F.col("ts_ms")
    )
    last_lag = _lag()
    s = framed.select(
        "*",
        consume.alias("consume_rate"),
        produce.alias("produce_rate"),
        now_ms.alias("_now"),
        last_commit_ms.alias("_last_commit"),
        log_start_offset.alias("_log_start"),
    )
    rate_c, rate_p = F.col("consume_rate"), F.col("produce_rate")
    catch_up = F.when(last_lag == 0, F.lit(0.0)).when(
        rate_c.isNotNull() & rate_p.isNotNull() & (rate_c > rate_p),
        last_lag.cast("double") / (rate_c - rate_p),
    )

    def after_first(count: str, flag: str) -> Column:
        """Commits after the window's first one with ``flag`` set."""
        own = F.coalesce(F.col(f"_c0.f.{flag}").cast("int"), F.lit(0))
        return F.coalesce(F.col(count), F.lit(0)) - own > 0

    span = F.when(nc > 0, c1["ts_ms"] - c0["ts_ms"]).otherwise(F.lit(0))
    stop = F.col("_last_commit").isNotNull() & (
        F.col("_now") - F.col("_last_commit") > F.greatest(F.lit(min_stop_ms).cast("long"), span)
    )
    stall = (nc >= 2) & (F.col("_cmin") == F.col("_cmax"))
    warn = (nc >= 3) & ~after_first("_shrinks", "shrank") & (c1["lag"] > c0["lag"])
    log_start = F.col("_log_start")
    status = (
        F.when(log_start.isNotNull() & (F.col("committed_offset") < log_start), F.lit(ERR))
        .when(last_lag == 0, OK)
        .when(after_first("_backs", "back"), REWIND)
        .when(stop, STOP)
        .when(F.col("_zero") == 1, OK)
        .when(stall, STALL)
        .when(warn, WARN)
        .otherwise(OK)
    )
    return s.select(
        *keep, status.alias("status"), "consume_rate", "produce_rate", catch_up.alias("catch_up_s")
    )
