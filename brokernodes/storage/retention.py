"""Pure retention decisions for ``cleanup.policy=delete`` (and the delete half of
``compact,delete``): which of the oldest segments go. ``PartitionLog`` applies them.

Kafka's rules (``UnifiedLog.deleteOldSegments``), each deleting a prefix of the segments:

- ``retention.ms`` (>= 0): a segment goes if ``now - largest timestamp > retention.ms``;
- ``retention.bytes`` (>= 0): the oldest segments go while the log stays at least
  ``retention.bytes`` without them;
- log start offset (any policy, e.g. after DeleteRecords): a segment goes once every offset in
  it is below the log start offset.

Always: the active (last) segment never goes, and a segment goes only if all its offsets are
below the high watermark (consumers may still be reading the rest). The prefix deleted is the
longest one any rule gives, which is what Kafka's rules applied one after another amount to.
No I/O and no clock: the caller passes ``now_ms``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from brokernodes.storage.config import LogConfig


@dataclass(frozen=True, slots=True)
class SegmentStats:
    """What retention needs to know about one segment."""

    base_offset: int
    size: int
    largest_timestamp: int
    end_offset: int  # the next segment's base offset, or the log end offset for the last


@dataclass(frozen=True, slots=True)
class RetentionDecision:
    """Delete the first ``count`` segments; ``reasons[i]`` says why segment ``i`` goes."""

    count: int
    reasons: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return self.count == 0


def plan_retention(
    segments: Sequence[SegmentStats],
    *,
    config: LogConfig,
    now_ms: int,
    log_start_offset: int,
    high_watermark: int,
) -> RetentionDecision:
    """Which oldest segments to delete now (see the module docstring)."""
    # Candidates: never the active segment, only segments wholly below the high watermark.
    limit = 0
    for seg in segments[:-1]:
        if seg.end_offset > high_watermark:
            break
        limit += 1
    reasons: list[str] = []
    total = sum(s.size for s in segments)
    remaining = total
    time_ok = size_ok = start_ok = True
    for seg in segments[:limit]:
        why = None
        start_ok = start_ok and seg.end_offset <= log_start_offset
        if start_ok:
            why = f"all offsets below the log start offset {log_start_offset}"
        if config.delete_enabled:
            time_ok = (
                time_ok
                and config.retention_ms >= 0
                and now_ms - seg.largest_timestamp > config.retention_ms
            )
            if time_ok and why is None:
                why = (
                    f"largest timestamp {seg.largest_timestamp} is more than "
                    f"retention.ms={config.retention_ms} before {now_ms}"
                )
            size_ok = (
                size_ok
                and config.retention_bytes >= 0
                and remaining - seg.size >= config.retention_bytes
            )
            if size_ok and why is None:
                why = (
                    f"log size {remaining} bytes stays >= retention.bytes="
                    f"{config.retention_bytes} without it"
                )
        else:
            time_ok = size_ok = False
        if why is None:
            break
        reasons.append(why)
        remaining -= seg.size
    return RetentionDecision(len(reasons), tuple(reasons))
