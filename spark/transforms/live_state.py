"""Live analytics state, merged on the driver: what the micro-batches leave behind
(``spark.transforms.live``) folded into the job's small keyed state, and the minute rows it
gives. Pure Python: the state is one entry per group partition and one per open
topic-minute, a few thousand at most, so a Spark query per merge would cost more (0.1-0.3 s
of fixed cost each) than the work.

- **Commits** (``merge_commits``): the last committed offset of every group partition seen
  so far; a tombstone forgets it. ``lag_sample`` takes the log end offsets sampled now and
  gives one row per group partition (its last commit carried forward, however long ago) and
  per group and topic (the partitions' lags summed), for the minute of the sample. A
  partition whose log end could not be sampled has a null lag ("not measured"), never 0.
- **Minutes** (``merge_minutes``): each topic's records and bytes in and out per minute,
  summed over the batches that brought its broker windows. A minute stays open until it
  falls ``lateness_ms`` behind the newest minute seen (a watermark, as Spark's); a window of
  a minute already closed is dropped and counted. The rows handed on are absolute totals of
  the minutes a batch touched, so storing them is an upsert and a batch run twice (after a
  restart, from the state before it) writes the same values again: no minute counted twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

MINUTE_MS = 60_000
SUMS = ("records_in", "bytes_in", "records_out", "bytes_out")
DEFAULT_LATENESS_MS = 30 * MINUTE_MS

CommitKey = tuple[str, str, str, int]  # tenant, group, topic, partition
MinuteKey = tuple[str, str, int]  # tenant, topic, minute_ms


def minute_of(ms: int) -> int:
    return ms - ms % MINUTE_MS


@dataclass
class LiveState:
    """What a live job carries from one micro-batch to the next (and across restarts, in
    its checkpoint): the commits, the open minutes, the newest minute seen and where the
    usage stream began (minutes before it are not measured)."""

    commits: dict[CommitKey, tuple[int, int | None]] = field(default_factory=dict)
    minutes: dict[MinuteKey, tuple[int, int, int, int]] = field(default_factory=dict)
    max_minute_ms: int | None = None
    measured_from_ms: int | None = None

    def to_doc(self) -> dict:
        return {
            "commits": [[*k, *v] for k, v in sorted(self.commits.items())],
            "minutes": [[*k, *v] for k, v in sorted(self.minutes.items())],
            "max_minute_ms": self.max_minute_ms,
            "measured_from_ms": self.measured_from_ms,
        }

    @classmethod
    def from_doc(cls, doc: Mapping | None) -> LiveState:
        if not doc:
            return cls()
        return cls(
            commits={(t, g, tp, int(p)): (int(o), ms) for t, g, tp, p, o, ms in doc["commits"]},
            minutes={(t, tp, int(m)): tuple(int(x) for x in v) for t, tp, m, *v in doc["minutes"]},
            max_minute_ms=doc.get("max_minute_ms"),
            measured_from_ms=doc.get("measured_from_ms"),
        )


def merge_commits(
    commits: Mapping[CommitKey, tuple[int, int | None]], latest: Iterable[Mapping]
) -> dict[CommitKey, tuple[int, int | None]]:
    """``commits`` updated with a batch's ``latest_commits`` rows (later than anything in
    the state: the batch comes after it in the log); a tombstone removes its key."""
    out = dict(commits)
    for r in latest:
        key = (r["tenant"], r["group"], r["topic"], int(r["partition"]))
        if r["committed_offset"] is None:
            out.pop(key, None)
        else:
            out[key] = (int(r["committed_offset"]), r["commit_ms"])
    return out


def lag_sample(
    commits: Mapping[CommitKey, tuple[int, int | None]],
    log_ends: Mapping[tuple[str, str], Mapping[int, int | None]],
    now_ms: int,
) -> tuple[list[dict], list[dict]]:
    """The lag at ``now_ms``: ``(partition rows, group rows)`` for its minute.

    ``log_ends``: ``{(tenant, topic): {partition: log end offset or None}}`` as sampled now
    (None: its leader did not answer). Commits of topics not in it (deleted, or no tenant's)
    give no row. A group row sums the measured partitions' lags: ``partitions`` counts the
    group's partitions with a commit, ``measured`` those with a lag; its ``offset_lag`` is
    null when none is measured."""
    minute = minute_of(now_ms)
    parts: list[dict] = []
    groups: dict[tuple[str, str, str], dict] = {}
    for (tenant, group, topic, partition), (offset, commit_ms) in sorted(commits.items()):
        ends = log_ends.get((tenant, topic))
        if ends is None:
            continue
        end = ends.get(partition)
        lag = None if end is None else max(end - offset, 0)
        parts.append(
            {
                "tenant": tenant,
                "group": group,
                "topic": topic,
                "partition": partition,
                "minute_ms": minute,
                "sampled_ms": now_ms,
                "committed_offset": offset,
                "commit_ms": commit_ms,
                "log_end_offset": end,
                "offset_lag": lag,
            }
        )
        g = groups.setdefault(
            (tenant, group, topic),
            {
                "tenant": tenant,
                "group": group,
                "topic": topic,
                "minute_ms": minute,
                "sampled_ms": now_ms,
                "offset_lag": None,
                "partitions": 0,
                "measured": 0,
                "topic_partitions": len(ends),
            },
        )
        g["partitions"] += 1
        if lag is not None:
            g["measured"] += 1
            g["offset_lag"] = (g["offset_lag"] or 0) + lag
    return parts, list(groups.values())


@dataclass(frozen=True)
class MergedMinutes:
    minutes: dict[MinuteKey, tuple[int, int, int, int]]
    max_minute_ms: int | None
    rows: list[dict]  # absolute totals of the minutes this batch touched
    late_windows: int  # batch rows of closed minutes, dropped
    late_records: int  # their records in and out


def merge_minutes(
    minutes: Mapping[MinuteKey, tuple[int, int, int, int]],
    max_minute_ms: int | None,
    batch: Iterable[Mapping],
    *,
    lateness_ms: int = DEFAULT_LATENESS_MS,
) -> MergedMinutes:
    """A batch's ``usage_minutes`` rows added to the open minutes. The watermark is the
    newest minute seen before this batch less ``lateness_ms``: rows of earlier minutes are
    dropped (their minute was closed and stored), then minutes behind the new watermark
    close."""
    watermark = None if max_minute_ms is None else max_minute_ms - lateness_ms
    out = dict(minutes)
    touched: set[MinuteKey] = set()
    late = late_records = 0
    for r in batch:
        m = int(r["minute_ms"])
        if watermark is not None and m < watermark:
            late += 1
            late_records += int(r["records_in"] or 0) + int(r["records_out"] or 0)
            continue
        key = (r["tenant"], r["topic"], m)
        old = out.get(key, (0, 0, 0, 0))
        out[key] = tuple(a + int(r[c] or 0) for a, c in zip(old, SUMS, strict=True))
        touched.add(key)
    seen = [m for _, _, m in touched] + ([] if max_minute_ms is None else [max_minute_ms])
    newest = max(seen, default=None)
    rows = [
        {"tenant": t, "topic": tp, "minute_ms": m, **dict(zip(SUMS, out[(t, tp, m)], strict=True))}
        for t, tp, m in sorted(touched)
    ]
    if newest is not None:
        out = {k: v for k, v in out.items() if k[2] >= newest - lateness_ms}
    return MergedMinutes(out, newest, rows, late, late_records)
