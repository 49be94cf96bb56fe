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
   ``min.cleanable.dirty.ratio`` (default 0.5), or when a cleanable dirty segment's first
   batch is older than ``max.compaction.lag.ms`` (KIP-354, ``compaction_lag_due``);
2. builds an offset map (key -> latest offset) over the dirty section, decoding records;
3. rewrites every closed segment below the first uncleanable offset (clean section too, so
   keys overwritten in the dirty section leave it), grouped as Kafka groups them (consecutive
   segments whose sizes sum to at most ``segment.bytes`` and whose offsets fit a 32-bit
   relative offset), keeping per key only its latest record; the record rules (tombstones and
   their KIP-534 delete horizon, keyless records, aborted transactions' records, transaction
   markers and their delete horizon, offsets kept) are in ``cleaner_filter``;
4. swaps each cleaned group in with the ``.cleaned`` / ``.swap`` / ``.deleted`` protocol of
   ``cleaner_swap`` (crash-safe; ``complete_interrupted_swaps`` on log open finishes it),
   replacing the segment objects in the log's segment map under the log's lock;
5. moves the cleaner checkpoint to the first uncleanable offset.

Offsets, the log start offset and the log end offset never change; a consumer reading the
cleaned log sees the latest value of every key at its original offset. With compact,delete,
retention (``retention.py``) deletes whole old segments as for delete; the two compose because
both only remove closed segments through the partition log.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from brokernodes.errors import KafkaStorageError
from brokernodes.records.compression import max_inflated_bytes
from brokernodes.records.header import LOG_OVERHEAD, BatchHeader, read_header
from brokernodes.storage.checkpoint import CheckpointFile
from brokernodes.storage.cleaner_filter import (
    FilterStats,
    OffsetMap,
    TxnScan,
    add_to_offset_map,
    filter_batch,
    iter_file_batches,
    scan_transactions,
)
from brokernodes.storage.cleaner_swap import (
    CLEANED_SUFFIX,
    LOG_EXT,
    commit_plan,
    complete_interrupted_swaps,
    replace_plan,
    run_plan,
    segment_file,
)
from brokernodes.storage.config import LogConfig
from brokernodes.storage.files import fsync_dir, write_all
from brokernodes.storage.offset_index import IndexCorruptError, OffsetIndex
from brokernodes.storage.recovery import recover_segment
from brokernodes.storage.segment import INDEX_SUFFIX, TIME_INDEX_SUFFIX
from brokernodes.storage.time_index import TimeIndex

if TYPE_CHECKING:
    from brokernodes.storage.log import PartitionLog
    from brokernodes.storage.segment import LogSegment

logger = logging.getLogger("sluice.storage.cleaner")

__all__ = [
    "CLEANER_CHECKPOINT_FILENAME",
    "DEFAULT_MIN_CLEANABLE_DIRTY_RATIO",
    "CleanableRange",
    "CleanerStats",
    "CleaningPlan",
    "LogCleaner",
    "SegmentInfo",
    "cleanable_range",
    "complete_interrupted_swaps",
    "group_segments",
]

CLEANER_CHECKPOINT_FILENAME = "cleaner-offset-checkpoint"
DEFAULT_MIN_CLEANABLE_DIRTY_RATIO = 0.5
MAX_RELATIVE_OFFSET = 2**31 - 1
WRITE_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What the cleaning decision needs to know of one segment."""

    base_offset: int
    size_bytes: int
    largest_timestamp: int = -1
    next_offset: int | None = None
    """Offset after the segment's last batch, None if unknown or empty."""
    first_timestamp: int = -1
    """The first batch's max timestamp (-1: none or unknown): KIP-354's compaction delay."""


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


def compaction_lag_due(
    segments: Sequence[SegmentInfo], rng: CleanableRange, now_ms: int, max_lag_ms: int
) -> bool:
    """KIP-354 (``max.compaction.lag.ms``): a cleanable dirty segment whose first batch is
    older than the lag must be cleaned now, whatever the dirty ratio."""
    deadline = now_ms - max_lag_ms
    return any(
        rng.first_dirty_offset <= s.base_offset < rng.first_uncleanable_offset
        and 0 <= s.first_timestamp <= deadline
        for s in segments
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
    """What one ``clean`` did; ``cleaned`` is False when it found nothing to do (``reason``)."""

    cleaned: bool = False
    reason: str = ""
    range: CleanableRange | None = None
    segments_read: int = 0
    segments_written: int = 0
    keys_in_map: int = 0
    records: FilterStats = field(default_factory=FilterStats)


def cleaner_checkpoint(directory: str | os.PathLike[str]) -> CheckpointFile[int]:
    """The partition's ``cleaner-offset-checkpoint``: one entry, the first dirty offset.

    Kafka keeps one such file per log directory keyed by topic-partition; Sluice keeps it in
    the partition directory, so it moves and is deleted with the partition.
    """
    path = os.path.join(os.fspath(directory), CLEANER_CHECKPOINT_FILENAME)
    return CheckpointFile(path, 0, _OffsetFormatter())


class _OffsetFormatter:
    def to_line(self, entry: int) -> str:
        return str(int(entry))

    def from_line(self, line: str) -> int:
        if not line.isascii() or not line.lstrip("-").isdigit():
            raise ValueError("expected one integer offset")
        return int(line)


@dataclass
class CleaningPlan:
    """What ``LogCleaner.prepare`` decided: the range, the offset map and the groups."""

    range: CleanableRange
    offset_map: OffsetMap
    txns: TxnScan
    groups: list[list[LogSegment]]
    sizes: dict[int, int]
    """Base offset -> size of every segment to clean, as read (the swap checks them)."""
    now_ms: int


@dataclass
class CleanedSegment:
    """A group's cleaned ``.log.cleaned`` file, written and fsynced, not yet swapped in."""

    base_offset: int
    old: list[LogSegment]
    changed: bool


class LogCleaner:
    """Compacts partition logs; one ``clean(log)`` call is one cleaning pass.

    ``now_ms`` (a fixed time) or ``clock`` (a function) sets the cleaner's time, which decides
    ``min.compaction.lag.ms`` and the tombstone delete horizon; default: the wall clock.
    Not thread-safe itself; run one cleaner per log at a time (the broker's cleaner thread).
    It holds the log's lock only to snapshot the segment list and to swap segments in, so
    appends and reads continue while it reads and rewrites closed segments.
    """

    def __init__(
        self, *, now_ms: int | None = None, clock: Callable[[], int] | None = None
    ) -> None:
        if clock is None:
            clock = (lambda: now_ms) if now_ms is not None else _wall_clock_ms  # type: ignore[assignment,return-value]
        self._clock = clock

    # --- the whole pass ----------------------------------------------------------------------

    def clean(self, log: PartitionLog, *, force: bool = False) -> CleanerStats:
        """Compact ``log`` if its dirty ratio calls for it. ``force`` cleans whatever closed
        segments are cleanable even with a low ratio (e.g. to drop tombstones whose delete
        horizon passed)."""
        stats = CleanerStats()
        plan = self.prepare(log, stats, force=force)
        if plan is None:
            return stats
        for group in plan.groups:
            try:
                cleaned = self.write_group(log, plan, group, stats)
            except FileNotFoundError:  # retention or truncation removed a segment meanwhile
                stats.reason = "a segment went away while cleaning; will retry"
                return stats
            if cleaned is None:
                continue
            if not self.swap_in(log, plan, cleaned):
                stats.reason = "the log changed while cleaning; will retry"
                return stats
            if cleaned.changed:
                stats.segments_written += 1
        cleaner_checkpoint(log.directory).write([plan.range.first_uncleanable_offset])
        stats.cleaned = True
        logger.info(
            "cleaned %s up to offset %d: %d records kept of %d, %d segments read, %d written",
            log.directory,
            plan.range.first_uncleanable_offset,
            stats.records.records_written,
            stats.records.records_read,
            stats.segments_read,
            stats.segments_written,
        )
        return stats

    # --- step 1: decide and build the offset map ---------------------------------------------

    def prepare(
        self, log: PartitionLog, stats: CleanerStats | None = None, *, force: bool = False
    ) -> CleaningPlan | None:
        """Decide the cleanable range and build the offset map; None if nothing to do."""
        stats = stats if stats is not None else CleanerStats()
        config = log.config
        if not config.compact_enabled:
            stats.reason = f"cleanup.policy={config.cleanup_policy} does not compact"
            return None
        now = self._clock()
        with log.lock:
            segments = list(log.segments)
            infos = [_info(s) for s in segments]
            sizes = {s.base_offset: s.size for s in segments}
            log_start, log_end, hw = log.log_start_offset, log.log_end_offset, log.high_watermark
        checkpoint = _read_checkpoint(log.directory)
        ratio = config.min_cleanable_dirty_ratio

        def decide(limit: int) -> CleanableRange:
            return cleanable_range(
                infos,
                log_start_offset=log_start,
                log_end_offset=log_end,
                checkpoint_offset=checkpoint,
                now_ms=now,
                min_compaction_lag_ms=config.min_compaction_lag_ms,
                max_cleanable_offset=limit,
            )

        rng = decide(hw)
        stats.range = rng
        if rng.first_uncleanable_offset <= infos[0].base_offset:
            stats.reason = "no closed segment below the first uncleanable offset"
            return None
        if not (
            rng.should_clean(ratio)
            or force
            or compaction_lag_due(infos, rng, now, config.max_compaction_lag_ms)
        ):
            stats.reason = (
                f"dirty ratio {rng.dirty_ratio:.2f} is below min.cleanable.dirty.ratio={ratio}"
                if rng.dirty_bytes
                else "nothing dirty to clean"
            )
            return None
        to_scan = [s for s in segments if s.base_offset < rng.first_uncleanable_offset]
        try:
            txns = scan_transactions(b for s in to_scan for b in iter_file_batches(s.log_path))
        except FileNotFoundError:
            stats.reason = "a segment went away while cleaning; will retry"
            return None
        if txns.first_unstable_offset is not None:
            rng = decide(min(hw, txns.first_unstable_offset))
            stats.range = rng
            if rng.first_uncleanable_offset <= infos[0].base_offset or not (
                force or rng.dirty_bytes
            ):
                stats.reason = "an open transaction holds back the whole dirty section"
                return None
        end = rng.first_uncleanable_offset
        offset_map = OffsetMap()
        inflate_cap = max_inflated_bytes(config.max_message_bytes)  # as produce allowed
        try:
            for s in segments:
                if rng.first_dirty_offset <= s.base_offset < end:
                    for header, buf in iter_file_batches(s.log_path):
                        add_to_offset_map(offset_map, header, buf, txns.aborted, inflate_cap)
        except FileNotFoundError:
            stats.reason = "a segment went away while cleaning; will retry"
            return None
        # The map speaks for everything below the end: records there that it does not name
        # were already deduplicated by an earlier pass (Kafka's map covers the same range).
        offset_map.latest_offset = max(offset_map.latest_offset, end - 1)
        stats.keys_in_map = len(offset_map)
        to_clean = [s for s in segments if s.base_offset < end]
        by_base = {s.base_offset: s for s in to_clean}
        grouped = group_segments([_info(s) for s in to_clean], config.segment_bytes, end)
        groups = [[by_base[i.base_offset] for i in g] for g in grouped]
        return CleaningPlan(rng, offset_map, txns, groups, sizes, now)

    # --- step 2: write one cleaned group -----------------------------------------------------

    def write_group(
        self,
        log: PartitionLog,
        plan: CleaningPlan,
        group: list[LogSegment],
        stats: CleanerStats | None = None,
    ) -> CleanedSegment | None:
        """Write ``<base>.log.cleaned`` for one group of segments (fsynced); None if the
        group holds no batch at all (nothing to rewrite)."""
        stats = stats if stats is not None else CleanerStats()
        config = log.config
        base = group[0].base_offset
        path = segment_file(log.directory, base, LOG_EXT) + CLEANED_SUFFIX
        stats.segments_read += len(group)
        batches = _with_last_flag(b for seg in group for b in iter_file_batches(seg.log_path))
        first = next(batches, None)
        if first is None:
            return None
        last_of_producer = plan.txns.last_batch_of_producer
        changed = len(group) > 1
        indexes = _IndexBuilder(log.directory, base, config)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            chunk: list[bytes] = []
            pending = 0
            position = 0
            for header, buf, is_last in itertools.chain([first], batches):
                # Kafka's RETAIN_EMPTY: the group's last batch keeps the cleaned segment's
                # next offset (swap recovery needs it), a producer's last batch its state.
                retain_empty = is_last or (
                    header.producer_id >= 0
                    and last_of_producer.get(header.producer_id) == header.base_offset
                )
                out = filter_batch(
                    header,
                    buf,
                    plan.offset_map,
                    now_ms=plan.now_ms,
                    delete_retention_ms=config.delete_retention_ms,
                    aborted=plan.txns.aborted,
                    retain_empty=retain_empty,
                    stats=stats.records,
                    max_records_bytes=max_inflated_bytes(config.max_message_bytes),
                    empty_markers=plan.txns.empty_markers,
                )
                if out is buf:
                    indexes.add(header, position)
                else:
                    changed = True
                    if out is None:
                        continue
                    indexes.add(read_header(out), position)
                chunk.append(out)
                position += len(out)
                pending += len(out)
                if pending >= WRITE_CHUNK:
                    write_all(fd, b"".join(chunk))
                    chunk, pending = [], 0
            write_all(fd, b"".join(chunk))
            os.fsync(fd)
            indexes.finish()
        except BaseException:
            os.close(fd)
            os.unlink(path)
            indexes.abort()
            raise
        os.close(fd)
        fsync_dir(log.directory)
        return CleanedSegment(base, group, changed)

    # --- step 3: swap it in ------------------------------------------------------------------

    def swap_in(self, log: PartitionLog, plan: CleaningPlan, cleaned: CleanedSegment) -> bool:
        """Replace the group's segments by the cleaned one under the log's lock, with the
        crash-safe protocol of ``cleaner_swap``. False (and the ``.cleaned`` file removed) if
        the log changed underneath: a segment deleted, truncated or made active."""
        directory = log.directory
        if not cleaned.changed:  # every batch copied as it was: nothing to swap
            _unlink_cleaned(directory, cleaned.base_offset)
            return True
        with log.lock:
            current = log.segments
            if not all(
                current.get(s.base_offset) is s
                and s.size == plan.sizes.get(s.base_offset)
                and s is not current.last
                for s in cleaned.old
            ):
                _unlink_cleaned(directory, cleaned.base_offset)
                return False
            run_plan(commit_plan(directory, cleaned.base_offset))
            for s in cleaned.old:
                s.close_files()
                current.remove(s.base_offset)
            run_plan(
                replace_plan(directory, cleaned.base_offset, [s.base_offset for s in cleaned.old])
            )
            # PartitionLog's own factory, so the segment gets the log's settings and fsync mode.
            new = log._new_segment(cleaned.base_offset)
            current.add(new)
            try:
                new.sanity_check()
            except IndexCorruptError as e:  # not expected: the indexes were just built
                logger.warning("%s; rebuilding the indexes of %s", e, new.log_path)
                recover_segment(new)
                new.on_become_inactive()
                new.flush()
        return True


class _IndexBuilder:
    """Builds a cleaned segment's ``.index.cleaned`` and ``.timeindex.cleaned`` as it is
    written, with ``LogSegment``'s rule (an entry per ``index.interval.bytes``, the max
    timestamp as the final time-index entry), so the swap needs no rebuild under the lock."""

    def __init__(self, directory: str, base_offset: int, config: LogConfig) -> None:
        self.interval = config.index_interval_bytes
        paths = [
            segment_file(directory, base_offset, ext) + CLEANED_SUFFIX
            for ext in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
        ]
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # a leftover of an aborted pass
        self.offset_index = OffsetIndex(paths[0], base_offset, config.segment_index_bytes)
        self.time_index = TimeIndex(paths[1], base_offset, config.segment_index_bytes)
        self.since = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset

    def add(self, header: BatchHeader, position: int) -> None:
        last = header.base_offset + header.last_offset_delta
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = header.max_timestamp, last
        if self.since > self.interval and not (
            self.offset_index.is_full or self.time_index.is_full
        ):
            self.offset_index.append(last, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.since = 0
        self.since += header.batch_length + LOG_OVERHEAD

    def finish(self) -> None:
        """Final time-index entry, then write, fsync and close both files."""
        self.time_index.maybe_append(
            self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
        )
        self.offset_index.close()
        self.time_index.close()

    def abort(self) -> None:
        for index in (self.offset_index, self.time_index):
            index.close_without_flush()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(index.path)


def _unlink_cleaned(directory: str, base_offset: int) -> None:
    for ext in (LOG_EXT, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(segment_file(directory, base_offset, ext) + CLEANED_SUFFIX)


def _with_last_flag(
    items: Iterator[tuple[BatchHeader, bytes]],
) -> Iterator[tuple[BatchHeader, bytes, bool]]:
    """Each batch with a flag telling whether it is the last one."""
    prev = next(items, None)
    for item in items:
        yield prev[0], prev[1], False  # type: ignore[index]
        prev = item
    if prev is not None:
        yield prev[0], prev[1], True


def _info(seg: LogSegment) -> SegmentInfo:
    try:
        return SegmentInfo(
            seg.base_offset,
            seg.size,
            seg.largest_timestamp,
            seg.next_offset,
            seg.rolling_timestamp if seg.size else -1,
        )
    except KafkaStorageError:
        return SegmentInfo(seg.base_offset, seg.size)


def _read_checkpoint(directory: str) -> int | None:
    try:
        entries = cleaner_checkpoint(directory).read()
    except KafkaStorageError as e:
        logger.warning("ignoring unreadable cleaner checkpoint: %s", e)
        return None
    return entries[0] if entries else None


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000
