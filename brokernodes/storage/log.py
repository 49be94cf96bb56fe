"""``PartitionLog``: one partition's segmented, append-only log on disk (Kafka's
``UnifiedLog`` + ``LocalLog``, without the replication state machine).

Directory layout::

    00000000000000000000.log / .index / .timeindex     segments, named by base offset
    recovery-point-offset-checkpoint                    offsets below it are fsynced
    log-start-offset-checkpoint                         the log start offset
    leader-epoch-checkpoint                             LeaderEpochFileCache
    .clean_shutdown                                     written by close(), removed by open

Hot path rules: append touches only batch headers (``records.header``: size, magic, CRC,
base offset and leader epoch rewritten in place) and writes each request with one ``pwrite``
per segment it lands in; read returns ``FileSlice``s without reading data.

Timestamps: batches keep the producer's timestamps (``CreateTime``). ``LogAppendTime`` is
not done here: it would rewrite maxTimestamp and attributes, which lie inside the CRC, so the
CRC would have to be recomputed; a caller that wants it must rewrite batches before append.

Offsets: the high watermark is set by the caller (replication) and clamped to [log start,
log end]; it is not persisted here (Kafka keeps it in the replica manager's checkpoint), so a
reopened log starts with it at the log start offset. Opening a directory recovers it
(``recovery``): a torn or corrupt tail is cut, missing or bad indexes are rebuilt, and a file
that cannot be fixed raises ``KafkaStorageError``; corrupt checkpoint files are not fatal
(recovery point -> recover everything; leader epochs -> rebuilt from batch headers).

Thread-safety: safe for concurrent use. One ``threading.RLock`` serialises every public
method, so the server may append from its event loop while a thread pool serves reads; each
call holds the lock only for header work and index lookups (segment deletion and ``close``
also hold it over their unlinks/fsyncs; flushes fsync duplicated file descriptors without
it, and a rolled segment is fsynced by a ``flusher`` thread). ``FileSlice``s returned are
immutable and usable from any thread, but see ``files.FileSlice`` on slices outliving
retention or truncation.
The segments, indexes and ``LogSegments`` inside are not thread-safe themselves.

The checks an append makes before it writes are ``log_validator``'s; when and how the log is
fsynced (flush policy, rolled segments, the recovery point) is ``log_flush``'s (``LogFlush``,
a base class of ``PartitionLog``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from brokernodes.errors import (
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
)
from brokernodes.records.header import (
    LOG_OVERHEAD,
    BatchHeader,
    set_base_offset,
    set_partition_leader_epoch,
)
from brokernodes.storage.checkpoint import (
    CheckpointFile,
    TopicPartitionOffset,
    TopicPartitionOffsetFormatter,
)
from brokernodes.storage.config import LogConfig
from brokernodes.storage.files import FileSlice, fsync_dir
from brokernodes.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILENAME, LeaderEpochFileCache
from brokernodes.storage.log_flush import LogFlush
from brokernodes.storage.log_validator import (
    PreparedAppend,
    single_batch_header,
    validate_batches,
)
from brokernodes.storage.recovery import CLEAN_SHUTDOWN_FILE, load_segments
from brokernodes.storage.retention import RetentionDecision, SegmentStats, plan_retention
from brokernodes.storage.segment import INT32_MAX, LogSegment
from brokernodes.storage.segments import LogSegments
from brokernodes.storage.txn_index import AbortedTxn

logger = logging.getLogger("sluice.storage")

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CHECKPOINT_VERSION = 0
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
# Appends up to this size stay in memory for consumers at the log end (``read_tail``).
TAIL_CACHE_BYTES = 64 * 1024


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class AppendInfo:
    """The result of one append: offsets and timestamps of what was written."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    batch_count: int
    record_count: int  # from batch headers (recordsCount), never by decoding
    valid_bytes: int
    log_start_offset: int
    log_end_offset: int
    # ``append(defer_flush=True)``: the offset the flush policy wants fsynced below before
    # the append may be acknowledged (None: no fsync due); the caller's to do
    flush_to: int | None = None


@dataclass(slots=True)  # a value; not frozen, which costs ~1 us per instance on the hot path
class FetchData:
    """What ``read`` returns: whole batches as file slices, in offset order."""

    slices: list[FileSlice]
    fetch_offset: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    first_batch_base_offset: int | None = None
    # Where the next fetch goes on: past every batch returned, at or before the first batch
    # left out (the fetch offset when nothing is returned). A client reads it without
    # walking the batches, so it can send its next fetch before this one's body arrives.
    next_offset: int = -1

    @property
    def size(self) -> int:
        return sum(s.length for s in self.slices)

    def read_bytes(self) -> bytes:
        """Concatenated bytes of every slice (tests, or servers without sendfile)."""
        return b"".join(s.read_bytes() for s in self.slices)


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    """ListOffsets answer: ``timestamp`` is the batch's max timestamp (-1 for the special
    earliest/latest lookups) and ``offset`` the batch's base offset (see
    ``PartitionLog.offset_for_timestamp``)."""

    timestamp: int
    offset: int


def _topic_partition(directory: str) -> tuple[str, int]:
    """Kafka names partition directories ``<topic>-<partition>``."""
    name = os.path.basename(os.path.normpath(directory))
    topic, sep, part = name.rpartition("-")
    if sep and topic and part.isdigit():
        return topic, int(part)
    return name or "partition", 0


class PartitionLog(LogFlush):
    """One partition's log; see the module docstring (thread-safe via one internal lock).

    ``clock`` returns wall-clock milliseconds (injected so tests are deterministic).
    ``fsync=False`` skips every fsync (tests and benchmarks only: durability is gone).
    ``checkpoint_interval_ms`` throttles recovery-point checkpoint writes from ``flush``
    (Kafka writes them every ``log.flush.offset.checkpoint.interval.ms``); truncation and
    ``close`` always write it.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        config: LogConfig | None = None,
        *,
        clock: Callable[[], int] | None = None,
        fsync: bool = True,
        checkpoint_interval_ms: int = 60_000,
    ) -> None:
        self.directory = os.fspath(directory)
        self._config = config or LogConfig()
        self.roll_ms = self._config.roll_ms  # computed once per config: read per append
        self._clock = clock or _wall_clock_ms
        self._fsync = fsync
        self._checkpoint_interval_ms = checkpoint_interval_ms
        self._lock = threading.RLock()
        self._closed = False
        # The last append's batches, (base offset, next offset, bytes), when small: see
        # ``read_tail``
        self._tail: tuple[int, int, bytes] | None = None
        self._rolled_to = 0  # the next offset of the last rolled segment (flusher jobs)
        self._truncations = 0  # counts cuts of the log end, for ``_fsync_to``
        self._rolled_flush_queued = False  # a flusher job for this log has not started yet
        self._flush_due: int | None = None  # set by a policy flush due in an append
        self._rolled_now = False  # set by ``_roll`` for the append that rolled
        self._rolled_flush: Future[None] | None = None  # the last flusher job submitted
        self._flush_error: KafkaStorageError | None = None  # a background fsync failed
        # told (from the flusher thread) when a background fsync took the log offline
        self.on_offline: Callable[[KafkaStorageError], None] | None = None
        self.topic, self.partition = _topic_partition(self.directory)
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as e:
            raise KafkaStorageError(f"cannot create log directory {self.directory}: {e}") from e
        self._rp_file = CheckpointFile(
            os.path.join(self.directory, RECOVERY_POINT_CHECKPOINT),
            CHECKPOINT_VERSION,
            TopicPartitionOffsetFormatter(),
        )
        self._ls_file = CheckpointFile(
            os.path.join(self.directory, LOG_START_OFFSET_CHECKPOINT),
            CHECKPOINT_VERSION,
            TopicPartitionOffsetFormatter(),
        )
        self._load()

    # --- opening -----------------------------------------------------------------------------

    def _read_offset(self, cp: CheckpointFile) -> int | None:
        entries = cp.read()
        for e in entries:
            if e.topic == self.topic and e.partition == self.partition:
                return e.offset
        return entries[0].offset if len(entries) == 1 else None

    def _write_offset(self, cp: CheckpointFile, offset: int) -> None:
        cp.write([TopicPartitionOffset(self.topic, self.partition, offset)])

    def _new_segment(self, base_offset: int) -> LogSegment:
        c = self._config
        return LogSegment(
            self.directory,
            base_offset,
            index_interval_bytes=c.index_interval_bytes,
            max_index_size=c.segment_index_bytes,
            created_ms=self._clock(),
            fsync=self._fsync,
        )

    def _load(self) -> None:
        marker = os.path.join(self.directory, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        try:
            recovery_point = self._read_offset(self._rp_file) or 0
        except KafkaStorageError as e:
            logger.warning("%s; recovering every segment", e)
            recovery_point = 0
            clean = False
        try:
            ckpt_start = self._read_offset(self._ls_file)
        except KafkaStorageError as e:
            logger.warning("%s; the log starts at its first segment", e)
            ckpt_start = None
        epoch_path = os.path.join(self.directory, LEADER_EPOCH_CHECKPOINT_FILENAME)
        try:
            self.leader_epoch_cache = LeaderEpochFileCache(epoch_path)
        except KafkaStorageError as e:
            # Rebuild the epochs from the batches' headers by recovering every segment.
            logger.warning("%s; rebuilding leader epochs from the log", e)
            try:
                os.unlink(epoch_path)
            except OSError as e2:
                raise KafkaStorageError(f"cannot remove {epoch_path}: {e2}") from e2
            self.leader_epoch_cache = LeaderEpochFileCache(epoch_path)
            recovery_point = 0
            clean = False
        cache = self.leader_epoch_cache

        def on_batch(h: BatchHeader) -> None:
            # Only a newer epoch is assigned while recovering (as Kafka's segment recovery
            # does): assigning an older one would drop the later entries and move the start
            # offsets of epochs the checkpoint already knows.
            epoch = h.partition_leader_epoch
            latest = cache.latest_epoch
            if epoch >= 0 and (latest is None or epoch > latest):
                cache.assign(epoch, h.base_offset)

        result = load_segments(
            self.directory,
            clean_shutdown=clean,
            recovery_point=recovery_point,
            make_segment=self._new_segment,
            on_batch=on_batch,
        )
        self._segments = result.segments
        if len(self._segments) == 0:
            self._segments.add(self._new_segment(ckpt_start or 0))
        first = self._segments.first
        assert first is not None
        self._log_end_offset = self._active.next_offset
        self._log_start_offset = max(ckpt_start or 0, first.base_offset)
        if self._log_start_offset > self._log_end_offset:
            # The checkpoint says data up to here was deleted, yet the log ends before it.
            self._truncate_fully(self._log_start_offset)
        self._recovery_point = (
            self._log_end_offset if clean else min(recovery_point, self._log_end_offset)
        )
        if result.recovered or result.deleted:
            self._recovery_point = self._log_end_offset
            self._flush_segments(self._segments.base_offsets[0])
        self._high_watermark = self._log_start_offset
        cache.truncate_from_end(self._log_end_offset)
        cache.truncate_from_start(self._log_start_offset)
        self._unflushed_since_ms = self._clock()
        self._last_flush_ms = self._clock()
        self._last_checkpoint_ms = self._clock()
        self._write_offset(self._rp_file, self._recovery_point)
        if clean:
            try:
                os.unlink(marker)
                fsync_dir(self.directory)
            except OSError as e:
                raise KafkaStorageError(f"cannot remove {marker}: {e}") from e
        if result.truncated_bytes:
            logger.warning(
                "partition log %s recovered: truncated %d bytes, deleted segments %s",
                self.directory,
                result.truncated_bytes,
                result.deleted,
            )

    # --- state -------------------------------------------------------------------------------

    @property
    def _active(self) -> LogSegment:
        seg = self._segments.last
        assert seg is not None
        return seg

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """New settings take effect from the next append / roll / retention run."""
        with self._lock:
            self._config = config
            self.roll_ms = config.roll_ms
            for seg in self._segments:
                seg.index_interval_bytes = config.index_interval_bytes

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return self._segments.size_in_bytes

    @property
    def segments(self) -> LogSegments:
        """The segment map itself (for the cleaner and tests); hold ``lock`` while using it."""
        return self._segments

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log start offset, log end offset]."""
        with self._lock:
            hw = min(max(offset, self._log_start_offset), self._log_end_offset)
            self._high_watermark = hw
            return hw

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"partition log {self.directory} is closed")
        if self._flush_error is not None:
            raise self._flush_error

    # --- append ------------------------------------------------------------------------------

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        assign_offsets: bool = True,
        leader_epoch: int | None = None,
        now_ms: int | None = None,
        expected_offset: int | None = None,
        defer_flush: bool = False,
        header: BatchHeader | None = None,
    ) -> AppendInfo:
        """Append whole RecordBatch v2 batches, all or nothing.

        As leader (``assign_offsets=True``) base offsets are rewritten in place from the log
        end offset and, with ``leader_epoch``, every batch's partition leader epoch is set; a
        writable ``bytearray``/``memoryview`` is modified in place, ``bytes`` are copied once.
        As follower (``assign_offsets=False``) offsets and epochs are kept; the first batch
        must start at the log end offset and each next one right after the one before (a
        gap is refused: the log would claim offsets it never held). A compacted log may
        skip offsets between batches, as the leader's cleaner removed them, but never
        below the log end. ``expected_offset``, when given, is the log end offset the
        caller read the batches for (a follower's fetch offset); a log whose end moved
        since refuses them. Every batch is validated first
        (length, magic, CRC-32C, ``max.message.bytes``); any bad batch refuses the whole
        request with an error naming it, and nothing is written.

        A flush the policy makes due (``flush.messages``, ``flush.ms``) runs before this
        returns, unless ``defer_flush``: then ``info.flush_to`` names it and the caller
        fsyncs (``flush_policy_to``) before acknowledging, so appends waiting together share
        one fsync (the leader's group commit, brokernodes/server/replica/partition.py).

        ``header``: the caller's header of ``records`` when they are one batch, from
        ``iter_batches(..., verify_crc=False)`` (the leader's produce has walked them): the
        log then computes the CRC without parsing the header again.
        """
        with self._lock:
            self._check_open()
            now = self._clock() if now_ms is None else now_ms
            if expected_offset is not None and expected_offset != self._log_end_offset:
                raise InvalidRecordError(
                    f"batches fetched for offset {expected_offset} reach a log that ends at "
                    f"{self._log_end_offset}: it was truncated or appended to meanwhile; "
                    f"nothing was appended"
                )
            info = (
                self._append_single_batch(records, leader_epoch, now, header)
                if assign_offsets
                else None
            )
            if info is None:
                prepared = validate_batches(
                    records,
                    next_offset=self._log_end_offset,
                    assign_offsets=assign_offsets,
                    leader_epoch=leader_epoch,
                    max_message_bytes=self._config.max_message_bytes,
                    compacted=self._config.compact_enabled,
                )
                info = self._append_prepared(prepared, leader_epoch, now)
            flush_to, self._flush_due = self._flush_due, None
            rolled, self._rolled_now = self._rolled_now, False
        if rolled:
            self._schedule_rolled_flush()
        if flush_to is not None:
            if defer_flush:
                info.flush_to = flush_to
            else:
                # flush.messages / flush.ms: this append returns once it is on disk, but the
                # fsync runs without the lock (readers of the log, and the loop, do not wait);
                # the active segment's log file alone, as the group commit's (log_flush)
                self._fsync_to(flush_to, now, checkpoint="policy", active_indexes=False)
        return info

    def _append_single_batch(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int | None,
        now: int,
        parsed: BatchHeader | None = None,
    ) -> AppendInfo | None:
        """The leader's fast path for a request of exactly one valid batch that needs no roll.

        Returns None, having written nothing, for anything else (several batches, a bad
        batch, a roll due); the general path then appends it or names the error.
        """
        c = self._config
        h = single_batch_header(records, c.max_message_bytes, parsed)
        if h is None:
            return None
        n = len(records)
        delta = h.last_offset_delta
        count = h.records_count
        seg = self._segments.last
        base = self._log_end_offset
        last = base + delta
        max_ts = h.max_timestamp
        if seg.size == 0:
            if base != seg.base_offset:
                return None
        else:
            rolling_ts = seg.rolling_timestamp
            waited = max_ts - rolling_ts if rolling_ts >= 0 else now - seg.created_ms
            if (
                seg.size + n > c.segment_bytes
                or waited > self.roll_ms
                or last - seg.base_offset > INT32_MAX
                or seg.indexes_full
            ):
                return None
        buf = records if isinstance(records, bytearray) else bytearray(records)
        set_base_offset(buf, 0, base)
        if leader_epoch is not None:
            set_partition_leader_epoch(buf, 0, leader_epoch)
        seg.append_batch(buf, last, max_ts)
        self._log_end_offset = last + 1
        self._remember_tail(base, buf)
        if leader_epoch is not None and leader_epoch >= 0:
            cache = self.leader_epoch_cache
            if leader_epoch != cache.latest_epoch:
                cache.assign(leader_epoch, base)
        if (
            last + 1 - self._recovery_point >= c.flush_messages
            or now - self._last_flush_ms >= c.flush_ms
        ):
            self._flush_due = last + 1
            self._last_flush_ms = now
        return AppendInfo(
            first_offset=base,
            last_offset=last,
            max_timestamp=max_ts,
            offset_of_max_timestamp=last if max_ts > -1 else base,
            batch_count=1,
            record_count=count,
            valid_bytes=n,
            log_start_offset=self._log_start_offset,
            log_end_offset=last + 1,
        )

    def _append_prepared(
        self, prepared: PreparedAppend, leader_epoch: int | None, now: int
    ) -> AppendInfo:
        entries = prepared.entries
        view = memoryview(prepared.buf)
        c = self._config
        total = len(view)
        first_offset = prepared.bases[0]
        max_ts = -1
        offset_of_max_ts = first_offset
        for _, _, last, ts in entries:
            if ts > max_ts:
                max_ts, offset_of_max_ts = ts, last
        seg = self._maybe_roll(prepared, 0, now)
        if seg.size + total <= c.segment_bytes and entries[-1][2] - seg.base_offset <= INT32_MAX:
            seg.append(view, entries)  # the common case: the whole request in one write
        else:
            self._append_chunks(prepared, view, seg, now)
        self._log_end_offset = entries[-1][2] + 1
        self._remember_tail(first_offset, view)
        self._assign_epochs(prepared, first_offset, leader_epoch)
        info = AppendInfo(
            first_offset=first_offset,
            last_offset=self._log_end_offset - 1,
            max_timestamp=max_ts,
            offset_of_max_timestamp=offset_of_max_ts,
            batch_count=len(entries),
            record_count=prepared.records,
            valid_bytes=total,
            log_start_offset=self._log_start_offset,
            log_end_offset=self._log_end_offset,
        )
        if (
            self._log_end_offset - self._recovery_point >= c.flush_messages
            or now - self._last_flush_ms >= c.flush_ms
        ):
            self._flush_due = self._log_end_offset
            self._last_flush_ms = now
        return info

    def _remember_tail(self, base_offset: int, written: bytearray | memoryview) -> None:
        """Keep a copy of what was just written (up to the log end offset) if it is small."""
        if len(written) <= TAIL_CACHE_BYTES:
            self._tail = (base_offset, self._log_end_offset, bytes(written))
        else:
            self._tail = None

    def _append_chunks(
        self, prepared: PreparedAppend, view: memoryview, seg: LogSegment, now: int
    ) -> None:
        """Split a request across segments at batch boundaries (rolling as needed)."""
        entries = prepared.entries
        count = len(entries)
        segment_bytes = self._config.segment_bytes
        i = 0
        while i < count:
            if i > 0:
                seg = self._maybe_roll(prepared, i, now)
            start = entries[i][0]
            room = segment_bytes - seg.size
            j = i + 1
            while j < count:
                pos, size, last, _ = entries[j]
                if pos + size - start > room or last - seg.base_offset > INT32_MAX:
                    break
                j += 1
            end = entries[j - 1][0] + entries[j - 1][1]
            chunk = [(p - start, size, last, ts) for p, size, last, ts in entries[i:j]]
            seg.append(view[start:end], chunk)
            self._log_end_offset = entries[j - 1][2] + 1
            i = j

    def _assign_epochs(
        self, prepared: PreparedAppend, first_offset: int, leader_epoch: int | None
    ) -> None:
        """Record new leader epochs at the first offset written under them."""
        cache = self.leader_epoch_cache
        latest = cache.latest_epoch
        if leader_epoch is not None or not prepared.epochs:
            if leader_epoch is not None and leader_epoch >= 0 and leader_epoch != latest:
                cache.assign(leader_epoch, first_offset)
            return
        for base, epoch in zip(prepared.bases, prepared.epochs, strict=True):
            if epoch >= 0 and epoch != latest:
                cache.assign(epoch, base)
                latest = cache.latest_epoch

    # --- roll --------------------------------------------------------------------------------

    def _maybe_roll(self, prepared: PreparedAppend, index: int, now: int) -> LogSegment:
        """Kafka's ``shouldRoll`` for batch ``index`` of the request, about to be appended."""
        seg = self._active
        c = self._config
        _, size, last, max_ts = prepared.entries[index]
        base = prepared.bases[index]
        if seg.size > 0:
            rolling_ts = seg.rolling_timestamp
            waited = max_ts - rolling_ts if rolling_ts >= 0 else now - seg.created_ms
            if (
                seg.size + size > c.segment_bytes
                or waited > self.roll_ms
                or seg.indexes_full
                or not seg.can_hold_offset(last)
                or base < seg.base_offset
            ):
                return self._roll(base)
        elif base != seg.base_offset and (not seg.can_hold_offset(last) or base < seg.base_offset):
            # An empty active segment whose base does not fit this batch: replace it.
            self._segments.remove(seg.base_offset)
            seg.delete()
            new = self._new_segment(base)
            self._segments.add(new)
            return new
        return seg

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active is empty)."""
        with self._lock:
            self._check_open()
            if self._active.size == 0:
                return self._active
            new = self._roll(self._log_end_offset)
            self._rolled_now = False
        self._schedule_rolled_flush()
        return new

    def _roll(self, base_offset: int) -> LogSegment:
        old = self._active
        old.on_become_inactive()
        existing = self._segments.get(base_offset)
        if existing is not None:
            raise KafkaStorageError(
                f"cannot roll {self.directory} to a new segment at {base_offset}: a segment "
                f"with that base offset already exists"
            )
        new = self._new_segment(base_offset)
        self._segments.add(new)
        # The rolled segment is fsynced by a flusher thread (``_schedule_rolled_flush``): an
        # fsync of up to a segment of dirty pages would otherwise stall the append that
        # rolled (and, under the lock, every reader of this log and the broker's loop).
        self._rolled_to = max(self._rolled_to, old.next_offset)
        self._rolled_now = True
        if old.indexes_behind and self._recovery_point >= old.next_offset:
            # A group commit fsynced the old segment's log but not its indexes, which
            # recovery rebuilds only while the recovery point is inside it: it steps back
            # inside until the flusher has fsynced the segment whole (docs/storage.md).
            self._recovery_point = old.next_offset - 1
        return new

    # --- read --------------------------------------------------------------------------------

    def read_tail(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None
    ) -> bytes | None:
        """The last append's batches from memory when they are exactly what ``read`` would
        return from ``offset`` (a consumer at the log end reading what was just appended:
        the live tail); None otherwise, and the caller reads the files.

        The copy is valid while it ends at the log end offset: a later append replaces it
        and a truncation moves the end below it; the log start offset may not pass it."""
        tail = self._tail
        if tail is None or tail[0] != offset:
            return None
        base, next_offset, data = tail
        with self._lock:
            if (
                self._closed
                or next_offset != self._log_end_offset
                or base < self._log_start_offset
                or (max_offset is not None and next_offset > max_offset)
                or len(data) > max_bytes
            ):
                return None
            return data

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FetchData:
        """File slices of whole batches starting at the batch that holds ``offset``.

        Kafka's semantics: the first batch returned is the first whose last offset is >=
        ``offset`` (it may start before ``offset``); at most ``max_bytes`` in whole batches,
        except that with ``min_one_batch`` the first batch is returned even if larger (KIP-74);
        no batch holding an offset >= ``max_offset`` (e.g. the high watermark for consumers).
        Unlike Kafka, a partial trailing batch is never returned. Slices may span segments.
        Raises ``OffsetOutOfRangeError`` outside [log start offset, log end offset].
        """
        with self._lock:
            self._check_open()
            fetch_offset = offset
            start, end = self._log_start_offset, self._log_end_offset
            if offset < start or offset > end:
                raise OffsetOutOfRangeError(
                    f"fetch offset {offset} is out of range for {self.topic}-{self.partition}: "
                    f"the log holds offsets [{start}, {end})"
                )
            limit_offset = end if max_offset is None else min(max_offset, end)
            slices: list[FileSlice] = []
            remaining = max_bytes
            first_base = None
            next_offset = offset
            for seg in self._segments.from_floor(offset):
                if seg.base_offset >= limit_offset or offset >= limit_offset:
                    break
                if seg.size == 0:
                    continue
                first = seg.translate_offset(offset)
                if first is None:
                    continue
                if first.base_offset + first.last_offset_delta >= limit_offset:
                    break  # the next batch reaches the limit
                start_pos = first.position
                end_pos = seg.size
                if limit_offset < seg.next_offset:
                    stop = seg.translate_offset(limit_offset, start_pos)
                    if stop is not None:
                        end_pos = stop.position
                first_size = first.batch_length + LOG_OVERHEAD
                if remaining < first_size:
                    if slices or not min_one_batch:
                        break
                    length = first_size
                    next_offset = first.base_offset + first.last_offset_delta + 1
                else:
                    limit = min(start_pos + remaining, end_pos)
                    boundary, next_offset = seg.last_boundary_at_or_before(limit, start_pos)
                    length = boundary - start_pos
                if first_base is None:
                    first_base = first.base_offset
                slices.append(FileSlice(seg.log_path, start_pos, length))
                remaining -= length
                if remaining <= 0 or start_pos + length < end_pos:
                    break
                offset = seg.next_offset
            return FetchData(
                slices,
                fetch_offset=fetch_offset,
                high_watermark=self._high_watermark,
                log_start_offset=start,
                log_end_offset=end,
                first_batch_base_offset=first_base,
                next_offset=next_offset,
            )

    # --- aborted transactions (.txnindex) ----------------------------------------------------

    def append_aborted_txn(self, entry: AbortedTxn) -> None:
        """Record an aborted transaction in the ``.txnindex`` of the segment holding its
        ABORT marker (``entry.last_offset``, just appended)."""
        with self._lock:
            self._check_open()
            seg = self._segments.floor(entry.last_offset)
            if seg is not None:
                seg.txn_index.append(entry)

    def aborted_transactions(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping offsets [``start_offset``, ``upper_bound``),
        in marker order: what a read_committed fetch of that range sends its client.

        Scans the ``.txnindex`` of the segment holding ``start_offset`` and the later ones,
        stopping after a segment with an entry whose last stable offset passed
        ``upper_bound``: every transaction starting below it had ended by then (Kafka's
        ``collectAbortedTransactions``)."""
        out: list[AbortedTxn] = []
        with self._lock:
            self._check_open()
            for seg in self._segments.from_floor(start_offset):
                entries = seg.txn_index.entries
                if not entries:
                    continue
                out.extend(
                    e
                    for e in entries
                    if e.last_offset >= start_offset and e.first_offset < upper_bound
                )
                if entries[-1].last_stable_offset > upper_bound:
                    break
        return out

    def replace_aborted_txns(self, entries: list[AbortedTxn]) -> int:
        """Make every segment's ``.txnindex`` hold exactly the given aborted transactions
        whose marker it holds (on open, from a replay of the log's markers). Returns how many
        index files were rewritten."""
        by_base: dict[int, list[AbortedTxn]] = {}
        with self._lock:
            self._check_open()
            for e in entries:
                seg = self._segments.floor(e.last_offset)
                if seg is not None:
                    by_base.setdefault(seg.base_offset, []).append(e)
            return sum(
                seg.txn_index.replace(by_base.get(seg.base_offset, [])) for seg in self._segments
            )

    def offset_for_timestamp(
        self, timestamp: int, *, max_offset: int | None = None
    ) -> TimestampOffset | None:
        """Kafka's ListOffsets lookup.

        ``-2`` (earliest) gives the log start offset, ``-1`` (latest) the log end offset
        (capped at ``max_offset``, e.g. the high watermark), ``-3`` the batch holding the
        largest timestamp. Otherwise the first batch whose max timestamp is >= ``timestamp``:
        batch granularity, the offset is that batch's base offset (storage never decodes
        records; a consumer starting there sees a few earlier records at most) and the
        timestamp its max timestamp. None if no such batch (below ``max_offset``).
        """
        with self._lock:
            self._check_open()
            end = (
                self._log_end_offset
                if max_offset is None
                else min(max_offset, self._log_end_offset)
            )
            if timestamp == EARLIEST_TIMESTAMP:
                return TimestampOffset(-1, self._log_start_offset)
            if timestamp == LATEST_TIMESTAMP:
                return TimestampOffset(-1, end)
            if timestamp == MAX_TIMESTAMP:
                best: tuple[int, int] | None = None
                for seg in self._segments:
                    if seg.size and (best is None or seg.max_timestamp > best[0]):
                        best = (seg.max_timestamp, seg.offset_of_max_timestamp)
                if best is None or best[1] >= end:
                    return None
                header = self._segments.floor(best[1]).translate_offset(best[1])  # type: ignore[union-attr]
                if header is None:
                    return None
                return TimestampOffset(best[0], max(header.base_offset, self._log_start_offset))
            if timestamp < 0:
                raise InvalidRecordError(f"invalid timestamp {timestamp} for an offset lookup")
            for seg in self._segments:
                if seg.size == 0 or seg.max_timestamp < timestamp:
                    continue
                h = seg.find_by_timestamp(timestamp, self._log_start_offset)
                if h is None:
                    continue
                offset = max(h.base_offset, self._log_start_offset)
                return TimestampOffset(h.max_timestamp, offset) if offset < end else None
            return None

    # --- truncation (replication) ------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove everything at and after ``offset`` (a follower diverged from its leader).

        A batch straddling ``offset`` goes entirely, so the log end offset may end below
        ``offset``. Below the first segment this becomes ``truncate_fully_and_start_at``.
        Returns False if there was nothing to remove from the log. Truncating to exactly
        the log end still drops a leader epoch that starts there: an epoch holding no record
        (a leader assigns its epoch at its log end when it takes over; demoted before any
        append, it keeps that entry). A follower's KIP-279 rounds each drop its latest epoch;
        kept, the next OffsetsForLeaderEpoch would ask for the same epoch again, forever.
        """
        with self._lock:
            self._check_open()
            if offset < 0:
                raise ValueError(f"cannot truncate to negative offset {offset}")
            if offset >= self._log_end_offset:
                if offset == self._log_end_offset:
                    self.leader_epoch_cache.truncate_from_end(offset)
                return False
            first = self._segments.first
            assert first is not None
            if offset < first.base_offset:
                self._truncate_fully(offset)
                return True
            for seg in reversed(list(self._segments)):
                if seg.base_offset > offset:
                    self._segments.remove(seg.base_offset)
                    seg.delete()
            active = self._active
            active.truncate_to(offset)
            self._log_end_offset = active.next_offset
            if self._log_start_offset > self._log_end_offset:
                self._log_start_offset = self._log_end_offset
                self._write_offset(self._ls_file, self._log_start_offset)
            self._after_truncation()
            return True

    def _after_truncation(self) -> None:
        self._truncations += 1
        leo = self._log_end_offset
        self._high_watermark = min(self._high_watermark, leo)
        self._recovery_point = min(self._recovery_point, leo)
        self.leader_epoch_cache.truncate_from_end(leo)
        # Written at once: a stale recovery point above the new end would let unflushed
        # data appended later escape validation after a crash.
        self._active.flush()
        self._checkpoint_recovery_point()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset`` (a follower whose
        log is entirely behind the leader's log start)."""
        with self._lock:
            self._check_open()
            self._truncate_fully(offset)

    def _truncate_fully(self, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"cannot start the log at negative offset {offset}")
        for seg in list(self._segments):
            self._segments.remove(seg.base_offset)
            seg.delete()
        self._segments.add(self._new_segment(offset))
        self._log_start_offset = self._log_end_offset = offset
        self._high_watermark = self._recovery_point = offset
        self._truncations += 1
        self._rolled_to = offset
        self.leader_epoch_cache.clear()
        fsync_dir(self.directory)
        self._checkpoint_recovery_point()
        self._write_offset(self._ls_file, offset)

    # --- retention ---------------------------------------------------------------------------

    def segment_stats(self) -> list[SegmentStats]:
        """Per-segment facts retention decides on (oldest first, the active one last)."""
        with self._lock:
            segs = list(self._segments)
            stats = []
            for i, seg in enumerate(segs):
                end = segs[i + 1].base_offset if i + 1 < len(segs) else self._log_end_offset
                stats.append(SegmentStats(seg.base_offset, seg.size, seg.largest_timestamp, end))
            return stats

    def plan_retention(self, now_ms: int | None = None) -> RetentionDecision:
        with self._lock:
            self._check_open()
            return plan_retention(
                self.segment_stats(),
                config=self._config,
                now_ms=self._clock() if now_ms is None else now_ms,
                log_start_offset=self._log_start_offset,
                high_watermark=self._high_watermark,
            )

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete the old segments retention allows (never the active one, never data at or
        above the high watermark) and advance the log start offset; returns how many went."""
        with self._lock:
            decision = self.plan_retention(now_ms)
            if decision.empty:
                return 0
            for reason in decision.reasons:
                seg = self._segments.first
                assert seg is not None
                logger.info("deleting segment %s: %s", seg.log_path, reason)
                self._segments.remove(seg.base_offset)
                seg.delete()
            first = self._segments.first
            assert first is not None
            self._advance_log_start(max(self._log_start_offset, first.base_offset))
            return decision.count

    def delete_records(self, offset: int) -> int:
        """Kafka's DeleteRecords: move the log start offset up to ``offset`` (at most the
        high watermark); whole segments below it are deleted. Returns the log start offset."""
        with self._lock:
            self._check_open()
            if offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before offset {offset}: it is above the high "
                    f"watermark {self._high_watermark}"
                )
            if offset > self._log_start_offset:
                self._advance_log_start(offset)
                while len(self._segments) > 1:
                    seg = self._segments.first
                    assert seg is not None
                    if self._segments.upper_bound(seg, self._log_end_offset) > offset:
                        break
                    self._segments.remove(seg.base_offset)
                    seg.delete()
            return self._log_start_offset

    def _advance_log_start(self, offset: int) -> None:
        if offset <= self._log_start_offset:
            return
        self._log_start_offset = offset
        self._high_watermark = max(self._high_watermark, offset)
        self._recovery_point = max(self._recovery_point, offset)
        self.leader_epoch_cache.truncate_from_start(offset)
        self._write_offset(self._ls_file, offset)

    # --- close -------------------------------------------------------------------------------

    def close(self) -> None:
        """Flush everything, checkpoint the recovery point and log start offset, close the
        files and write the ``.clean_shutdown`` marker (so the next open skips recovery)."""
        with self._lock:
            if self._closed:
                return
            if self._flush_error is not None:
                # An fsync failed: what is on disk is not known, so no recovery point
                # checkpoint and no clean-shutdown marker (the next open recovers)
                logger.error("closing %s without a flush: %s", self.directory, self._flush_error)
                self.close_without_flush()
                return
            try:
                self._flush_all_locked()
                for seg in self._segments:
                    seg.close()
                self._checkpoint_recovery_point()
                self._write_offset(self._ls_file, self._log_start_offset)
                marker = os.path.join(self.directory, CLEAN_SHUTDOWN_FILE)
                with open(marker, "wb") as f:
                    if self._fsync:
                        os.fsync(f.fileno())
                fsync_dir(self.directory)
            except OSError as e:
                raise KafkaStorageError(f"cannot close partition log {self.directory}: {e}") from e
            finally:
                self._closed = True
                for seg in self._segments:
                    seg.close_files()

    def close_without_flush(self) -> None:
        """Close the files without flushing or writing the marker (tests simulate a crash)."""
        with self._lock:
            self._closed = True
            for seg in self._segments:
                seg.close_files()

    def delete(self) -> None:
        """Close and remove the whole partition directory (the partition was deleted)."""
        with self._lock:
            self.close_without_flush()
            for name in os.listdir(self.directory):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.directory, name))
            with contextlib.suppress(OSError):
                os.rmdir(self.directory)

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.directory!r}, log_start_offset={self._log_start_offset}, "
            f"log_end_offset={self._log_end_offset}, segments={len(self._segments)})"
        )
