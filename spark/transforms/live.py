"""Live analytics, the part that scales with the records: one micro-batch of an internal
topic reduced to a few rows per key. Pure DataFrame -> DataFrame.

- ``latest_commits``: a micro-batch of ``__consumer_offsets`` (decoded; ``offset`` is the
  commit record's own offset) -> ``tenant, group, topic, partition, committed_offset,
  commit_ms``: the last commit of each group partition in the batch (a tombstone's
  ``committed_offset`` is null: the group's offset was deleted).
- ``usage_minutes``: a micro-batch of ``__usage`` (decoded broker windows) -> ``tenant,
  topic, minute_ms, records_in, bytes_in, records_out, bytes_out``: the batch's share of each
  topic's minute (a window belongs to the minute of its start, as in the usage report).

What is left is small and keyed (one entry per group partition, one per open topic-minute):
``spark.transforms.live_state`` merges it into the job's state on the driver.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

GTP = ("tenant", "group", "topic", "partition")
USAGE_SUMS = ("records_in", "bytes_in", "records_out", "bytes_out")
MINUTE_MS = 60_000


def latest_commits(commits: DataFrame) -> DataFrame:
    """The last commit (or tombstone) per group partition in log order: a group's records
    all go to one ``__consumer_offsets`` partition, so its offsets are the coordinator's
    order (commit times can tie, and a tombstone has none)."""
    keyed = commits.where("`group` IS NOT NULL AND topic IS NOT NULL").selectExpr(
        "coalesce(tenant, '') AS tenant",
        "`group`",
        "topic",
        "`partition`",
        "named_struct('o', offset, 'c', committed_offset,"
        " 'cms', unix_millis(commit_timestamp)) AS s",
    )
    return (
        keyed.groupBy(*GTP)
        .agg(F.expr("max_by(s, s.o)").alias("s"))
        .selectExpr(
            "tenant",
            "`group`",
            "topic",
            "`partition`",
            "s.c AS committed_offset",
            "s.cms AS commit_ms",
        )
    )


def usage_minutes(usage: DataFrame) -> DataFrame:
    """The batch's records and bytes in and out per tenant, topic and minute (windows with no
    topic, such as metadata requests, and windows with no readable start are left out)."""
    start = "unix_millis(window_start)"
    u = usage.where("topic IS NOT NULL AND topic != '' AND window_start IS NOT NULL").selectExpr(
        "coalesce(tenant, '') AS tenant",
        "topic",
        f"{start} - pmod({start}, {MINUTE_MS}) AS minute_ms",
        *(f"coalesce({c}, 0) AS {c}" for c in USAGE_SUMS),
    )
    return u.groupBy("tenant", "topic", "minute_ms").agg(
        *(F.expr(f"CAST(sum({c}) AS long)").alias(c) for c in USAGE_SUMS)
    )
