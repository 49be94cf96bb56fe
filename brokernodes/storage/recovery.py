"""Opening a partition directory: stray files, segment loading, index checks, recovery.

Rules (Kafka's ``LogLoader``):

- Interrupted cleaner swaps are finished or undone first (``cleaner_swap``: ``.swap`` files
  complete to their final names, ``.cleaned`` and ``.deleted`` files go); leftover ``.tmp``
  files and index files without a ``.log`` are deleted.
- Every segment's indexes get a cheap sanity check; a missing or inconsistent index is
  rebuilt from the ``.log`` (indexes are caches).
- After an unclean shutdown (no ``.clean_shutdown`` marker) every segment from the one that
  holds the recovery point on is validated batch by batch from its headers (length, magic,
  CRC-32C, offsets never going backwards), its indexes are rebuilt, and the log is cut at the
  first invalid byte; segments after a cut one are deleted.
- A file that cannot be read or fixed raises ``KafkaStorageError`` naming it, so the broker
  takes the partition offline instead of crash-looping.

Pure functions over a directory; no state, no threads.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from brokernodes.errors import CorruptRecordError, KafkaStorageError, SluiceError
from brokernodes.records.header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    peek_batch_size,
    validate_batch,
)
from brokernodes.storage.cleaner_swap import complete_interrupted_swaps
from brokernodes.storage.offset_index import IndexCorruptError
from brokernodes.storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment
from brokernodes.storage.segments import LogSegments

logger = logging.getLogger("sluice.storage")

CLEAN_SHUTDOWN_FILE = ".clean_shutdown"
RECOVERY_CHUNK = 1024 * 1024
_SEGMENT_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex)$")
_SWAP_ACTION = re.compile(r"(\d{20})\.(?:log|index|timeindex|txnindex)\.swap")

OnBatch = Callable[[BatchHeader], None]


@dataclass(slots=True)
class SegmentRecovery:
    """What recovering one segment found."""

    valid_bytes: int
    truncated_bytes: int = 0
    reason: str | None = None


@dataclass(slots=True)
class LoadResult:
    segments: LogSegments
    recovered: list[int] = field(default_factory=list)  # base offsets validated
    rebuilt: list[int] = field(default_factory=list)  # base offsets with indexes rebuilt
    truncated_bytes: int = 0
    deleted: list[int] = field(default_factory=list)  # segments removed after a cut


def clean_directory(directory: str) -> set[int]:
    """Finish swaps, drop stray files; return base offsets whose indexes must be rebuilt."""
    try:
        actions = complete_interrupted_swaps(directory, log=logger.warning)
        forced = {int(m.group(1)) for a in actions for m in [_SWAP_ACTION.search(a)] if m}
        names = os.listdir(directory)
        logs = {n[:20] for n in names if n.endswith(LOG_SUFFIX) and _SEGMENT_FILE.match(n)}
        for name in names:
            path = os.path.join(directory, name)
            if name.endswith(".tmp"):
                logger.warning("deleting leftover temporary file %s", path)
                os.unlink(path)
            elif (
                (m := _SEGMENT_FILE.match(name))
                and m.group(2) != LOG_SUFFIX
                and m.group(1) not in logs
            ):
                logger.warning("deleting index file %s that has no log file", path)
                os.unlink(path)
    except OSError as e:
        raise KafkaStorageError(f"cannot clean up partition directory {directory}: {e}") from e
    return forced


def segment_base_offsets(directory: str) -> list[int]:
    return sorted(
        int(n[:20])
        for n in os.listdir(directory)
        if n.endswith(LOG_SUFFIX) and _SEGMENT_FILE.match(n)
    )


def recover_segment(segment: LogSegment, on_batch: OnBatch | None = None) -> SegmentRecovery:
    """Validate every batch of ``segment``, rebuild its indexes, cut it at the first bad byte.

    Checks each batch's length, magic, CRC-32C and that offsets never go backwards (not
    ``max.message.bytes``: lowering that setting must not cut existing data).
    """
    segment.reset_for_rebuild()
    size = segment.size
    pos = 0
    expected = segment.base_offset
    reason: str | None = None
    buf = b""
    buf_start = 0
    try:
        while pos < size:
            rel = pos - buf_start
            if rel + LOG_OVERHEAD > len(buf):
                buf = segment.read_bytes(pos, min(RECOVERY_CHUNK, size - pos))
                buf_start, rel = pos, 0
            try:
                n = peek_batch_size(buf, rel)
                if n is not None and n >= HEADER_SIZE and rel + n > len(buf) and pos + n <= size:
                    # The batch runs past this chunk: read from its start, at least the batch.
                    buf = segment.read_bytes(pos, max(n, min(RECOVERY_CHUNK, size - pos)))
                    buf_start, rel = pos, 0
                h = validate_batch(buf, rel, verify_crc=True)
            except SluiceError as e:
                reason = e.message
                break
            if h.base_offset < expected:
                reason = (
                    f"batch at byte {pos} has base offset {h.base_offset}, below the "
                    f"expected next offset {expected}"
                )
                break
            if not segment.can_hold_offset(h.base_offset + h.last_offset_delta):
                reason = f"batch at byte {pos} has offsets outside the segment's range"
                break
            segment.index_batch(h, pos)
            if on_batch is not None:
                on_batch(h)
            expected = h.base_offset + h.last_offset_delta + 1
            pos += h.batch_length + LOG_OVERHEAD
        truncated = size - pos
        if truncated:
            reason = reason or "torn batch at the end of the file"
            logger.warning(
                "segment %s: %s; truncating %d bytes at byte %d",
                segment.log_path,
                reason,
                truncated,
                pos,
            )
            segment.truncate_bytes(pos)
        segment.offset_index.write_pending()
        segment.time_index.write_pending()
    except OSError as e:
        raise KafkaStorageError(f"cannot recover segment {segment.log_path}: {e}") from e
    return SegmentRecovery(pos, truncated, reason)


def load_segments(
    directory: str,
    *,
    clean_shutdown: bool,
    recovery_point: int,
    make_segment: Callable[[int], LogSegment],
    on_batch: OnBatch | None = None,
) -> LoadResult:
    """Open every segment of ``directory``, checking and recovering as the module says."""
    forced = clean_directory(directory)
    result = LoadResult(LogSegments())
    segments = result.segments
    bases = segment_base_offsets(directory)
    for base in bases:
        missing = not (
            os.path.exists(os.path.join(directory, f"{base:020d}{INDEX_SUFFIX}"))
            and os.path.exists(os.path.join(directory, f"{base:020d}{TIME_INDEX_SUFFIX}"))
        )
        segment = make_segment(base)
        if missing:
            forced.add(base)
        else:
            try:
                segment.sanity_check()
            except IndexCorruptError as e:
                logger.warning("%s; rebuilding the indexes of %s", e, segment.log_path)
                forced.add(base)
        segments.add(segment)

    unflushed_from = None
    if not clean_shutdown:
        floor = segments.floor(recovery_point)
        unflushed_from = floor.base_offset if floor else (bases[0] if bases else None)
    elif segments.last is not None and segments.last.base_offset not in forced:
        # A clean shutdown still gets the active segment's tail checked cheaply.
        try:
            segments.last.next_offset  # noqa: B018 - scans the tail's headers
        except (KafkaStorageError, CorruptRecordError, OSError):
            unflushed_from = segments.last.base_offset

    cut = False
    for segment in list(segments):
        base = segment.base_offset
        if cut:
            segments.remove(base)
            segment.delete()
            result.deleted.append(base)
            logger.warning("deleting segment %s after a truncated one", segment.log_path)
            continue
        unflushed = unflushed_from is not None and base >= unflushed_from
        if not unflushed and base not in forced:
            continue
        rec = recover_segment(segment, on_batch if unflushed else None)
        if segment is not segments.last and segment.size:
            segment.on_become_inactive()
        (result.recovered if unflushed else result.rebuilt).append(base)
        result.truncated_bytes += rec.truncated_bytes
        if rec.truncated_bytes and unflushed:
            cut = True
    return result
