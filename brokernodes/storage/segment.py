"""``LogSegment``: one ``.log`` file and its ``.index`` / ``.timeindex`` / ``.txnindex``,
Kafka's layout (the ``.txnindex`` of aborted transactions exists only once one is aborted here:
``txn_index``).

Files are named by the segment's base offset, 20 digits zero-padded
(``00000000000000000042.log``). The ``.log`` holds whole RecordBatch v2 batches back to back;
the segment only ever looks at their 61-byte headers (``records.header``), never at records.

Appends write a caller-prepared run of batches with one ``pwrite`` and then add index entries
(buffered in memory; written at flush, roll and close):
an offset-index entry (and a time-index entry if the max timestamp grew) each time more than
``index.interval.bytes`` have been appended since the last entry, Kafka's rule. Reads never copy
data: ``translate_offset`` finds the batch holding an offset (index lookup then a header scan
of at most about one index interval) and the caller turns positions into ``FileSlice``s.

Not thread-safe: the owning ``PartitionLog`` serialises every call under its lock.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence

from brokernodes.errors import CorruptRecordError, KafkaStorageError
from brokernodes.records.header import HEADER, HEADER_SIZE, LOG_OVERHEAD, BatchHeader
from brokernodes.storage.files import pread_exactly, pwrite_all, segment_name
from brokernodes.storage.offset_index import IndexCorruptError, OffsetIndex
from brokernodes.storage.time_index import NO_TIMESTAMP, TimeIndex
from brokernodes.storage.txn_index import TXN_INDEX_SUFFIX, TxnIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
SCAN_CHUNK = 8192
INT32_MAX = 2**31 - 1

# One appended batch as the segment needs it:
# (position relative to the start of the written chunk, size, last offset, max timestamp)
BatchEntry = tuple[int, int, int, int]


class LogSegment:
    """One segment of a partition log; see the module docstring. Not thread-safe."""

    def __init__(
        self,
        directory: str,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10 * 1024 * 1024,
        created_ms: int = 0,
        fsync: bool = True,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.fsync_enabled = fsync
        self.log_path = os.path.join(directory, segment_name(base_offset, LOG_SUFFIX))
        try:
            self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
            self.size = os.fstat(self._fd).st_size
        except OSError as e:
            raise KafkaStorageError(f"cannot open segment file {self.log_path}: {e}") from e
        self.offset_index = OffsetIndex(
            os.path.join(directory, segment_name(base_offset, INDEX_SUFFIX)),
            base_offset,
            max_index_size,
        )
        self.time_index = TimeIndex(
            os.path.join(directory, segment_name(base_offset, TIME_INDEX_SUFFIX)),
            base_offset,
            max_index_size,
        )
        self.txn_index = TxnIndex(
            os.path.join(directory, segment_name(base_offset, TXN_INDEX_SUFFIX)), fsync=fsync
        )
        self._dirty = False
        self._bytes_since_index = 0
        # fsynced up to its log end without its indexes (``dup_log``): see ``PartitionLog._roll``
        self.indexes_behind = False
        # Filled lazily by _load_tail() for a segment opened from disk.
        self._next_offset: int | None = base_offset if self.size == 0 else None
        ts, off = self.time_index.last_entry
        self._max_timestamp = ts
        self._offset_of_max_timestamp = off
        self._rolling_timestamp: int | None = None  # first batch's max timestamp

    # --- facts -------------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"

    @property
    def next_offset(self) -> int:
        """The offset after the last batch (the base offset when empty)."""
        if self._next_offset is None:
            self._load_tail()
        return self._next_offset  # type: ignore[return-value]

    @property
    def max_timestamp(self) -> int:
        """The largest batch max timestamp in the segment, -1 if none."""
        if self._next_offset is None:
            self._load_tail()
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        if self._next_offset is None:
            self._load_tail()
        return self._offset_of_max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """What time retention compares: the max timestamp, else the file's mtime (Kafka)."""
        ts = self.max_timestamp
        if ts >= 0:
            return ts
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except OSError:
            return NO_TIMESTAMP

    @property
    def rolling_timestamp(self) -> int:
        """The first batch's max timestamp (what ``segment.ms`` is measured from), or -1."""
        if self._rolling_timestamp is None:
            if self.size == 0:
                return NO_TIMESTAMP
            self._rolling_timestamp = self.read_header(0).max_timestamp
        return self._rolling_timestamp

    @property
    def indexes_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    def can_hold_offset(self, offset: int) -> bool:
        """Kafka's ``canConvertToRelativeOffset``: the 4-byte relative offset must fit."""
        return 0 <= offset - self.base_offset <= INT32_MAX

    # --- header scanning ---------------------------------------------------------------------

    def read_header(self, position: int) -> BatchHeader:
        data = os.pread(self._fd, HEADER_SIZE, position)
        if len(data) < HEADER_SIZE:
            raise KafkaStorageError(
                f"segment {self.log_path}: truncated batch header at byte {position}"
            )
        return BatchHeader(position, *HEADER.unpack(data))

    def iter_headers(self, start: int = 0, end: int | None = None) -> Iterator[BatchHeader]:
        """Headers of the batches from byte ``start`` (a batch boundary) to ``end``.

        Reads ``SCAN_CHUNK`` bytes at a time. Checks only that lengths are sane and batches
        lie within ``end``; raises ``CorruptRecordError`` otherwise (no CRC check).
        """
        end = self.size if end is None else end
        fd = self._fd
        pos = start
        buf = b""
        buf_pos = start
        while pos < end:
            rel = pos - buf_pos
            if rel + HEADER_SIZE > len(buf):
                buf = os.pread(fd, max(HEADER_SIZE, min(SCAN_CHUNK, end - pos)), pos)
                buf_pos = pos
                rel = 0
                if len(buf) < HEADER_SIZE:
                    raise CorruptRecordError(
                        f"segment {self.log_path}: truncated batch header at byte {pos}"
                    )
            header = BatchHeader(pos, *HEADER.unpack_from(buf, rel))
            size = header.batch_length + LOG_OVERHEAD
            if size < HEADER_SIZE or pos + size > end:
                raise CorruptRecordError(
                    f"segment {self.log_path}: batch at byte {pos} declares {size} bytes, "
                    f"which does not fit in the {end}-byte log"
                )
            yield header
            pos += size

    def _load_tail(self) -> None:
        """Scan headers after the last offset-index entry: next offset, max timestamp."""
        _, pos = self.offset_index.lookup_by_position(self.size)
        next_offset = self.base_offset
        max_ts, max_off = self.time_index.last_entry
        try:
            for h in self.iter_headers(pos):
                next_offset = h.base_offset + h.last_offset_delta + 1
                if h.max_timestamp > max_ts:
                    max_ts, max_off = h.max_timestamp, next_offset - 1
        except (CorruptRecordError, OSError) as e:
            raise KafkaStorageError(f"segment {self.log_path}: {e}") from e
        self._next_offset = next_offset
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, max_off

    # --- reads -------------------------------------------------------------------------------

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchHeader | None:
        """The first batch whose last offset is >= ``offset``, or None (Kafka semantics)."""
        _, pos = self.offset_index.lookup(offset)
        pos = max(pos, start_position)
        try:
            for h in self.iter_headers(pos):
                if h.base_offset + h.last_offset_delta >= offset:
                    return h
        except CorruptRecordError as e:
            raise KafkaStorageError(str(e)) from e
        return None

    def last_boundary_at_or_before(self, limit: int, start: int) -> tuple[int, int]:
        """The largest batch end in ``[start, limit]`` (``start`` itself if none fits), and
        the offset there: the base offset of the batch that starts at it (the segment's
        next offset at its end). ``start`` must be a batch boundary."""
        if limit >= self.size:
            return self.size, self.next_offset
        _, pos = self.offset_index.lookup_by_position(limit)
        pos = max(pos, start)
        try:
            for h in self.iter_headers(pos):
                if h.position + h.batch_length + LOG_OVERHEAD > limit:
                    return h.position, h.base_offset  # batches are contiguous: h starts there
        except CorruptRecordError as e:
            raise KafkaStorageError(str(e)) from e
        return self.size, self.next_offset  # unreachable: the batch holding limit ends past it

    def find_by_timestamp(self, timestamp: int, min_offset: int = 0) -> BatchHeader | None:
        """The first batch whose max timestamp is >= ``timestamp`` (and whose last offset is
        >= ``min_offset``), or None.

        Batch granularity: storage never decodes records, so the caller gets the batch's base
        offset, not the exact record (a consumer starting there skips earlier records itself).
        """
        _, offset = self.time_index.lookup(timestamp - 1)  # every batch up to here is older
        _, pos = self.offset_index.lookup(offset) if offset > self.base_offset else (0, 0)
        try:
            for h in self.iter_headers(pos):
                if h.max_timestamp >= timestamp and h.last_offset >= min_offset:
                    return h
        except CorruptRecordError as e:
            raise KafkaStorageError(str(e)) from e
        return None

    def read_bytes(self, position: int, length: int) -> bytes:
        return pread_exactly(self._fd, length, position)

    # --- writes ------------------------------------------------------------------------------

    def append(self, data: memoryview | bytes, batches: Sequence[BatchEntry]) -> None:
        """Write ``data`` (whole batches, offsets already final) and index them."""
        position = self.size
        try:
            pwrite_all(self._fd, data, position)
        except OSError as e:
            # Cut whatever part was written so the file ends at a batch boundary again.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, position)
            raise KafkaStorageError(f"cannot append to {self.log_path}: {e}") from e
        self.size = position + len(data)
        self._dirty = True
        if self._next_offset is None:
            self._load_tail()
        max_ts = self._max_timestamp
        max_off = self._offset_of_max_timestamp
        since = self._bytes_since_index
        interval = self.index_interval_bytes
        oindex = self.offset_index
        tindex = self.time_index
        room = min(oindex.free_entries, tindex.free_entries)
        index_ts = tindex.last_timestamp
        offset_entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        if position == 0 and batches:
            self._rolling_timestamp = batches[0][3]
        last = self.base_offset - 1
        for rel, size, last, ts in batches:
            if ts > max_ts:
                max_ts, max_off = ts, last
            if since > interval and room > 0:
                offset_entries.append((last, position + rel))
                if max_ts > index_ts:
                    time_entries.append((max_ts, max_off))
                    index_ts = max_ts
                room -= 1
                since = 0
            since += size
        oindex.extend(offset_entries)
        tindex.extend(time_entries)
        self._bytes_since_index = since
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, max_off
        if batches:
            self._next_offset = last + 1
        # Index entries stay buffered until flush / roll / close (see offset_index).

    def append_batch(self, data: bytes | bytearray, last_offset: int, max_timestamp: int) -> None:
        """``append`` for a request of exactly one batch (the common produce): same effect,
        without building entry lists."""
        position = self.size
        size = len(data)
        try:
            if os.pwrite(self._fd, data, position) != size:
                pwrite_all(self._fd, memoryview(data), position)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, position)
            raise KafkaStorageError(f"cannot append to {self.log_path}: {e}") from e
        self.size = position + size
        self._dirty = True
        if self._next_offset is None:
            self._load_tail()
        if position == 0:
            self._rolling_timestamp = max_timestamp
        if max_timestamp > self._max_timestamp:
            self._max_timestamp, self._offset_of_max_timestamp = max_timestamp, last_offset
        since = self._bytes_since_index
        if since > self.index_interval_bytes:
            oindex, tindex = self.offset_index, self.time_index
            if oindex.free_entries > 0 and tindex.free_entries > 0:
                oindex.append(last_offset, position)
                if self._max_timestamp > tindex.last_timestamp:
                    tindex.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
                since = 0
        self._bytes_since_index = since + size
        self._next_offset = last_offset + 1

    def reset_for_rebuild(self) -> None:
        """Empty both indexes and forget derived facts (recovery re-adds batches)."""
        self.offset_index.reset()
        self.time_index.reset()
        self._bytes_since_index = 0
        self._next_offset = self.base_offset
        self._max_timestamp, self._offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        self._rolling_timestamp = None

    def index_batch(self, header: BatchHeader, position: int) -> None:
        """Recovery: account for a validated batch already in the file at ``position``."""
        last = header.base_offset + header.last_offset_delta
        if header.max_timestamp > self._max_timestamp:
            self._max_timestamp = header.max_timestamp
            self._offset_of_max_timestamp = last
        if self._bytes_since_index > self.index_interval_bytes and not self.indexes_full:
            self.offset_index.append(last, position)
            self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += header.batch_length + LOG_OVERHEAD
        self._next_offset = last + 1

    def truncate_bytes(self, size: int) -> None:
        """Cut the log file to ``size`` bytes (a batch boundary) without touching indexes."""
        if size < self.size:
            try:
                os.ftruncate(self._fd, size)
            except OSError as e:
                raise KafkaStorageError(f"cannot truncate {self.log_path}: {e}") from e
            self.size = size
            self._dirty = True

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns bytes removed.

        A batch straddling ``offset`` goes entirely (Kafka does the same), so the segment's
        next offset may end below ``offset``.
        """
        header = self.translate_offset(offset)
        if header is None:
            return 0
        removed = self.size - header.position
        self.truncate_bytes(header.position)
        self.offset_index.truncate_to_position(header.position)
        self.time_index.truncate_to_offset(header.base_offset)
        self.offset_index.write_pending()
        self.time_index.write_pending()
        self.txn_index.truncate_to(header.base_offset)
        self._bytes_since_index = 0
        self._next_offset = None
        if header.position == 0:
            self._rolling_timestamp = None
        self._load_tail()
        return removed

    def on_become_inactive(self) -> None:
        """The segment stops being active: record its max timestamp as the last time entry."""
        self.time_index.maybe_append(
            self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
        )
        self.offset_index.write_pending()
        self.time_index.write_pending()

    def dup_files(self) -> list[int]:
        """Duplicates of the log's and both indexes' fds (none with ``fsync=False``), with
        the pending index entries written first: an fsync of a segment that takes no more
        appends, done without the log's lock, which a close or a deletion meanwhile cannot
        pull away. The caller closes them."""
        self.offset_index.write_pending()
        self.time_index.write_pending()
        if not self.fsync_enabled:
            return []
        self.indexes_behind = False
        return [os.dup(self._fd), self.offset_index.dup_fd(), self.time_index.dup_fd()]

    def dup_log(self) -> list[int]:
        """A duplicate of the log file's fd alone (none with ``fsync=False``): the group
        commit's fsync of the active segment, whose indexes recovery rebuilds after a crash
        (docs/storage.md). The caller closes it."""
        if not self.fsync_enabled:
            return []
        self.indexes_behind = True
        return [os.dup(self._fd)]

    def flush(self) -> None:
        """fsync the log and both indexes (a no-op with ``fsync=False``)."""
        self.offset_index.write_pending()
        self.time_index.write_pending()
        if not self.fsync_enabled:
            return
        try:
            if self._dirty:
                os.fsync(self._fd)
                self._dirty = False
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()
        except OSError as e:
            raise KafkaStorageError(f"cannot fsync segment {self.log_path}: {e}") from e

    def sanity_check(self) -> None:
        """Raise ``IndexCorruptError`` if an index cannot belong to this log file.

        Cheap checks, as Kafka's: entry sizes, monotonic entries, positions inside the log,
        and the last offset-index entry must name a batch header holding that offset.
        """
        self.offset_index.sanity_check(self.size)
        if len(self.offset_index):
            offset, pos = self.offset_index.last_entry
            try:
                h = self.read_header(pos)
            except KafkaStorageError as e:
                raise IndexCorruptError(str(e)) from e
            if h.base_offset + h.last_offset_delta != offset:
                raise IndexCorruptError(
                    f"offset index {self.offset_index.path}: last entry says offset {offset} "
                    f"at byte {pos}, but the batch there ends at offset "
                    f"{h.base_offset + h.last_offset_delta}"
                )
        self.time_index.sanity_check(None if self._next_offset is None else self._next_offset)
        if self.size == 0 and (len(self.offset_index) or len(self.time_index)):
            raise IndexCorruptError(f"segment {self.log_path} is empty but its index is not")

    def close(self) -> None:
        """Write the final time-index entry, flush indexes' buffers and close the files."""
        if self._fd < 0:
            return
        try:
            if self.size:
                self.on_become_inactive()
            self.flush()
        finally:
            self.close_files()

    def close_files(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.offset_index.close_without_flush()
        self.time_index.close_without_flush()
        self.txn_index.close()

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def delete(self) -> None:
        """Close and remove the segment's files (rename to ``.deleted`` first, so a crash in
        between leaves files that the next open removes)."""
        self.close_files()
        paths = [self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path]
        try:
            for path in paths:
                if os.path.exists(path):
                    os.replace(path, path + DELETED_SUFFIX)
            for path in paths:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path + DELETED_SUFFIX)
        except OSError as e:
            raise KafkaStorageError(f"cannot delete segment {self.log_path}: {e}") from e
