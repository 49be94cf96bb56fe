"""The log cleaner: compaction for cleanup.policy=compact and compact,delete.

Kafka's ``LogCleaner`` in one pass per call, no threads of its own (the broker's cleaner
thread calls ``LogCleaner.clean(log)``). A clean:

1. decides what is cleanable (``cleanable_range``): from the first dirty offset (the
   ``cleaner-offset-checkpoint`` in the partition directory, else the log start offset) up to
   the first uncleanable offset, the smallest of: the active segment's base offset (the active
   segment is never cleaned), the high watermark / last stable offset, the first segment whose
   largest timestamp is within ``min.compaction.lag.ms`` of now, and the first offset of a
   transaction still open in the range, each rounded down to a segment boundary. It runs when
   the dirty ratio (dirty bytes / (clean + dirty bytes)) reaches
   ``min.cleanable.dirty.ratio`` (default 0.5);
2. builds an offset map (key -> latest offset) over the dirty section, decoding records;
3. rewrites every closed segment below the first uncleanable offset (clean section too, so
   keys overwritten in the dirty section leave it), grouped as Kafka groups them (consecutive
   segments whose sizes sum to at most ``segment.bytes`` and whose offsets fit a 32-bit
   relative offset), keeping per key only its latest record; the record rules (tombstones and
   their KIP-534 delete horizon, keyless records, transactions, offsets kept) are in
   ``cleaner_filter``;
4. swaps each cleaned group in with the ``.cleaned`` / ``.swap`` / ``.deleted`` protocol of
   ``cleaner_swap`` (crash-safe; ``complete_interrupted_swaps`` on log open finishes it) and
   has the partition log replace the segment objects under its own lock;
5. moves the cleaner checkpoint to the first uncleanable offset.

Offsets, the log start offset and the log end offset never change; a consumer reading the
cleaned log sees the latest value of every key at its original offset. With compact,delete,
retention (``retention.py``) deletes whole old segments as for delete; the two compose because
both only remove closed segments through the partition log.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from brokernodes.storage.checkpoint import CheckpointFile
from brokernodes.storage.cleaner_filter import FilterStats
from brokernodes.storage.cleaner_swap import complete_interrupted_swaps

__all__ = [
    "CLEANER_CHECKPOINT_FILENAME",
    "DEFAULT_MIN_CLEANABLE_DIRTY_RATIO",
    "CleanableRange",
    "CleanerStats",
    "SegmentInfo",
    "cleanable_range",
    "complete_interrupted_swaps",
    "group_segments",
]

CLEANER_CHECKPOINT_FILENAME = "cleaner-offset-checkpoint"
DEFAULT_MIN_CLEANABLE_DIRTY_RATIO = 0.5
MAX_RELATIVE_OFFSET = 2**31 - 1


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What the cleaning decision needs to know of one segment."""

    base_offset: int
    size_bytes: int
    largest_timestamp: int = -1
    next_offset: int | None = None
    """Offset after the segment's last batch, None if unknown or empty."""


@dataclass(frozen=True, slots=True)
class CleanableRange:
    """The dirty section ``[first_dirty_offset, first_uncleanable_offset)`` and its bytes."""

    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    def should_clean(self, min_cleanable_dirty_ratio: float) -> bool:
        return self.dirty_bytes > 0 and self.dirty_ratio >= min_cleanable_dirty_ratio


def _floor_base(segments: Sequence[SegmentInfo], offset: int) -> int:
    """Base offset of the segment holding ``offset`` (the first segment's if before it)."""
    base = segments[0].base_offset
    for s in segments:
        if s.base_offset <= offset:
            base = s.base_offset
        else:
            break
    return base


def cleanable_range(
    segments: Sequence[SegmentInfo],
    *,
    log_start_offset: int,
    log_end_offset: int,
    checkpoint_offset: int | None,
    now_ms: int,
    min_compaction_lag_ms: int = 0,
    max_cleanable_offset: int | None = None,
) -> CleanableRange:
    """Kafka's ``cleanableOffsets`` plus the byte counts for the dirty ratio.

    ``segments`` are the log's segments in offset order, the last one active.
    ``max_cleanable_offset`` is the high watermark or last stable offset (exclusive). A
    checkpoint outside ``[log_start_offset, log_end_offset]`` (the log was truncated or its
    start moved) restarts from the log start offset, as Kafka does.
    """
    if not segments:
        return CleanableRange(log_start_offset, log_start_offset, 0, 0)
    first_dirty = checkpoint_offset if checkpoint_offset is not None else log_start_offset
    if first_dirty < log_start_offset or first_dirty > log_end_offset:
        first_dirty = log_start_offset
    limits = [segments[-1].base_offset]
    if max_cleanable_offset is not None:
        limits.append(_floor_base(segments, max_cleanable_offset))
    if min_compaction_lag_ms > 0:
        for s in segments[:-1]:
            if s.base_offset >= _floor_base(segments, first_dirty) and (
                s.largest_timestamp > now_ms - min_compaction_lag_ms
            ):
                limits.append(s.base_offset)
                break
    first_uncleanable = min(limits)
    dirty_start = _floor_base(segments, first_dirty)
    clean_bytes = sum(s.size_bytes for s in segments if s.base_offset < dirty_start)
    dirty_bytes = sum(
        s.size_bytes for s in segments if dirty_start <= s.base_offset < first_uncleanable
    )
    return CleanableRange(
        min(dirty_start, first_uncleanable),
        first_uncleanable,
        clean_bytes,
        dirty_bytes,
    )


def group_segments(
    segments: Sequence[SegmentInfo], max_size: int, end_offset: int
) -> list[list[SegmentInfo]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments merged while their total size
    stays within ``max_size`` (``segment.bytes``) and every offset of the group fits a 32-bit
    offset relative to its first base offset. ``end_offset`` bounds the last segment."""
    groups: list[list[SegmentInfo]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size = segments[i].size_bytes
        i += 1
        while i < len(segments):
            s = segments[i]
            last = (
                segments[i + 1].base_offset - 1
                if i + 1 < len(segments)
                else (s.next_offset - 1 if s.next_offset is not None else end_offset - 1)
            )
            if size + s.size_bytes > max_size:
                break
            if s.size_bytes and last - group[0].base_offset > MAX_RELATIVE_OFFSET:
                break
            group.append(s)
            size += s.size_bytes
            i += 1
        groups.append(group)
    return groups


@dataclass
class CleanerStats:
    """What one ``clean`` did; ``cleaned`` is False when it decided there was nothing to do."""

    cleaned: bool = False
    range: CleanableRange | None = None
    segments_cleaned: int = 0
    segments_written: int = 0
    keys_in_map: int = 0
    records: FilterStats = field(default_factory=FilterStats)
    reason: str = ""


def cleaner_checkpoint(directory: str | os.PathLike[str]) -> CheckpointFile[int]:
    """The partition's ``cleaner-offset-checkpoint``: one line, the first dirty offset."""
    return CheckpointFile(
        os.path.join(os.fspath(directory), CLEANER_CHECKPOINT_FILENAME), 0, _OffsetFormatter()
    )


class _OffsetFormatter:
    def to_line(self, entry: int) -> str:
        return str(int(entry))

    def from_line(self, line: str) -> int:
        if not line.lstrip("-").isdigit():
            raise ValueError("expected one integer offset")
        return int(line)
