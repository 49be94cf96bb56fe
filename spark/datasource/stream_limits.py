"""Admission control for the streaming source (pure): how far a micro-batch may go.

- ``rate_limit``: ``maxOffsetsPerTrigger`` spread over the partitions in proportion to their
  backlog, as Kafka's source does; a partition whose share is below one offset still gets one
  so that a small partition beside a busy one is never starved.
- ``TriggerDelay``: ``minOffsetsPerTrigger`` holds a micro-batch back until that many offsets
  are waiting, but never longer than ``maxTriggerDelay`` since the last batch that ran.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TopicPartition = tuple[str, int]


def backlog(start: dict[TopicPartition, int], latest: dict[TopicPartition, int]) -> int:
    """Offsets waiting: partitions new since ``start`` count from offset 0."""
    return sum(max(0, end - start.get(tp, 0)) for tp, end in latest.items())


def rate_limit(
    limit: int, start: dict[TopicPartition, int], latest: dict[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """End offsets reading at most about ``limit`` offsets in total (each partition's share
    is rounded down, or up to 1 when below 1), never past ``latest``."""
    sizes = {tp: end - start.get(tp, 0) for tp, end in latest.items()}
    waiting = {tp: n for tp, n in sizes.items() if n > 0}
    total = sum(waiting.values())
    if total <= limit:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        if tp not in waiting:
            out[tp] = end
            continue
        begin = start.get(tp, 0)
        share = limit * waiting[tp] / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, begin + step)
    return out


@dataclass
class TriggerDelay:
    """``minOffsetsPerTrigger`` with ``maxTriggerDelay``: ``hold(waiting, now)`` says whether
    to skip this trigger; the clock starts at the first trigger and at each batch that ran."""

    min_offsets: int
    max_delay_ms: int
    last_batch_ms: float | None = None

    def hold(self, waiting: int, now_ms: float) -> bool:
        if self.last_batch_ms is None:
            self.last_batch_ms = now_ms
        if waiting < self.min_offsets and now_ms - self.last_batch_ms < self.max_delay_ms:
            return True
        self.last_batch_ms = now_ms
        return False
