"""Consumer lag, pure: offset lag (log end offset - committed offset) and time lag (now -
timestamp of the next record the group will consume), per partition and per group."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from brokernodes.groups.types import TopicPartition

__all__ = ["PartitionLag", "group_lag", "offset_lag", "time_lag_ms", "total_lag"]


def offset_lag(committed: int | None, log_end_offset: int) -> int | None:
    """Records between the committed offset and the log end; None with no committed offset
    (``kafka-consumer-groups`` prints ``-``). Never negative (a log truncated below the
    committed offset counts as caught up)."""
    if committed is None:
        return None
    return max(0, log_end_offset - committed)


def time_lag_ms(
    committed: int | None,
    log_end_offset: int,
    timestamp_at: Callable[[int], int | None],
    now_ms: int,
) -> int | None:
    """How old the next record to consume is: ``now - timestamp(committed)``; 0 when caught
    up, None with no committed offset or when the lookup cannot tell (record gone).
    ``timestamp_at(offset)`` gives the timestamp of the record at (or first after) offset."""
    if committed is None:
        return None
    if committed >= log_end_offset:
        return 0
    ts = timestamp_at(committed)
    return None if ts is None else max(0, now_ms - ts)


@dataclass(frozen=True)
class PartitionLag:
    tp: TopicPartition
    committed: int | None
    log_end_offset: int
    offset_lag: int | None
    time_lag_ms: int | None


def group_lag(
    committed: Mapping[TopicPartition, int | None],
    log_end_offsets: Mapping[TopicPartition, int],
    timestamp_at: Callable[[TopicPartition, int], int | None],
    now_ms: int,
) -> dict[TopicPartition, PartitionLag]:
    """Lag for every partition in ``log_end_offsets`` (the group's subscribed partitions)."""
    out = {}
    for tp, end in sorted(log_end_offsets.items()):
        tp = TopicPartition(*tp)
        c = committed.get(tp)
        out[tp] = PartitionLag(
            tp,
            c,
            end,
            offset_lag(c, end),
            time_lag_ms(c, end, lambda o, tp=tp: timestamp_at(tp, o), now_ms),
        )
    return out


def total_lag(lags: Mapping[TopicPartition, PartitionLag]) -> tuple[int, int | None]:
    """The group's total offset lag and its maximum time lag (the metrics' two numbers)."""
    total = sum(pl.offset_lag or 0 for pl in lags.values())
    times = [pl.time_lag_ms for pl in lags.values() if pl.time_lag_ms is not None]
    return total, max(times, default=None)
