"""The sparse offset index (``.index``): offset -> file position of a segment's batches.

Entries are Kafka's: 4-byte offset relative to the segment's base offset + 4-byte position,
big-endian, one per ``index.interval.bytes`` of appended log. An entry ``(offset, position)``
says "the batch at ``position`` has last offset ``offset``"; both columns strictly increase,
so both are binary-searchable.

Design: the entries live in memory in two ``array('i')`` columns (4 bytes each, searched with
``bisect`` in C) and are appended to the file with ``pwrite``; there is no preallocation and
no mmap. ``segment.index.bytes`` still caps the entry count (``is_full``), which makes the log
roll as Kafka's does. Appends are buffered until ``write_pending()`` (one ``pwrite`` per log
append request) and made durable by ``flush()``. The index is a cache: recovery rebuilds it
from the ``.log``.

Not thread-safe: the owning ``PartitionLog`` serialises every call.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_right

from brokernodes.errors import KafkaStorageError

ENTRY = struct.Struct(">ii")


class IndexCorruptError(Exception):
    """An index file that does not match its log; the segment rebuilds it."""


def _be_int32_columns(data: bytes) -> tuple[array, array]:
    """Split big-endian (int32, int32) pairs into two native ``array('i')`` columns."""
    arr = array("i")
    arr.frombytes(data)
    if sys.byteorder == "little":
        arr.byteswap()
    return arr[0::2], arr[1::2]


class IndexFile:
    """File handling shared by the offset and time index: pending bytes, truncate, fsync.

    Not thread-safe: the owning ``PartitionLog`` serialises calls under its lock."""

    entry_size = 8

    def __init__(self, path: str, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry_size)
        self._pending = bytearray()
        self._dirty = False  # bytes written since the last fsync
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            self._file_size = os.fstat(self._fd).st_size
        except OSError as e:
            raise KafkaStorageError(f"cannot open index file {path}: {e}") from e
        self.load_error: str | None = None

    def _read_file(self) -> bytes:
        data = os.pread(self._fd, self._file_size, 0) if self._file_size else b""
        usable = len(data) - len(data) % self.entry_size
        if usable != len(data):
            self.load_error = (
                f"size {len(data)} is not a multiple of the {self.entry_size}-byte entry"
            )
        return data[:usable]

    def write_pending(self) -> None:
        """Write buffered entries to the file (no fsync)."""
        if self._pending:
            os.pwrite(self._fd, self._pending, self._file_size)
            self._file_size += len(self._pending)
            self._pending.clear()
            self._dirty = True

    def dup_fd(self) -> int:
        """A duplicate of the file's fd (an fsync outside the log's lock; the caller closes it)."""
        return os.dup(self._fd)

    def flush(self) -> None:
        """Write buffered entries and fsync the file."""
        self.write_pending()
        if self._dirty:
            os.fsync(self._fd)
            self._dirty = False

    def _truncate_file(self, entries: int) -> None:
        """Keep only the first ``entries`` entries, in the file and in the pending buffer."""
        size = entries * self.entry_size
        if size >= self._file_size:
            del self._pending[size - self._file_size :]
            return
        self._pending.clear()
        os.ftruncate(self._fd, size)
        self._file_size = size
        self._dirty = True

    @property
    def size_in_bytes(self) -> int:
        return self._file_size + len(self._pending)

    def close(self) -> None:
        if self._fd >= 0:
            try:
                self.flush()
            finally:
                os.close(self._fd)
                self._fd = -1

    def close_without_flush(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename_to(self, path: str) -> None:
        os.replace(self.path, path)
        self.path = path


class OffsetIndex(IndexFile):
    """Sparse ``.index`` of one segment; see the module docstring. Not thread-safe (the
    owning ``PartitionLog``'s lock serialises calls)."""

    entry_size = 8

    def __init__(self, path: str, base_offset: int, max_index_size: int = 10 * 1024 * 1024):
        super().__init__(path, base_offset, max_index_size)
        self._offsets, self._positions = _be_int32_columns(self._read_file())

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    @property
    def last_entry(self) -> tuple[int, int]:
        """``(offset, position)`` of the last entry, ``(base_offset, 0)`` when empty."""
        if not self._offsets:
            return self.base_offset, 0
        return self.base_offset + self._offsets[-1], self._positions[-1]

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self._offsets and (rel <= self._offsets[-1] or position <= self._positions[-1]):
            raise ValueError(
                f"offset index entry ({offset}, {position}) is not after the last entry "
                f"{self.last_entry} in {self.path}"
            )
        if self.is_full:
            raise ValueError(f"offset index {self.path} is full ({self.max_entries} entries)")
        self._offsets.append(rel)
        self._positions.append(position)
        self._pending += ENTRY.pack(rel, position)

    @property
    def free_entries(self) -> int:
        return self.max_entries - len(self._offsets)

    def extend(self, entries: list[tuple[int, int]]) -> None:
        """Append several ``(offset, position)`` entries, increasing (the append path)."""
        if not entries:
            return
        if len(entries) > self.free_entries:
            raise ValueError(f"offset index {self.path} is full ({self.max_entries} entries)")
        base = self.base_offset
        first_rel = entries[0][0] - base
        if self._offsets and (
            first_rel <= self._offsets[-1] or entries[0][1] <= self._positions[-1]
        ):
            raise ValueError(
                f"offset index entry {entries[0]} is not after the last entry "
                f"{self.last_entry} in {self.path}"
            )
        offsets, positions, pending, pack = (
            self._offsets,
            self._positions,
            self._pending,
            ENTRY.pack,
        )
        for offset, position in entries:
            rel = offset - base
            offsets.append(rel)
            positions.append(position)
            pending += pack(rel, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The last entry with offset <= ``offset``, or ``(base_offset, 0)``."""
        i = bisect_right(self._offsets, offset - self.base_offset)
        if i == 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[i - 1], self._positions[i - 1]

    def lookup_by_position(self, position: int) -> tuple[int, int]:
        """The last entry with position <= ``position``, or ``(base_offset, 0)``."""
        i = bisect_right(self._positions, position)
        if i == 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[i - 1], self._positions[i - 1]

    def truncate_to_position(self, position: int) -> None:
        """Drop the entries of batches at or after ``position`` (the log was cut there)."""
        n = bisect_right(self._positions, position - 1)
        if n < len(self._offsets):
            del self._offsets[n:]
            del self._positions[n:]
            self._truncate_file(n)

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._offsets = array("i")
        self._positions = array("i")
        self._truncate_file(0)

    def sanity_check(self, log_size: int) -> None:
        """Raise ``IndexCorruptError`` if the file cannot belong to a log of ``log_size`` bytes."""
        if self.load_error:
            raise IndexCorruptError(f"offset index {self.path}: {self.load_error}")
        offsets, positions = self._offsets, self._positions
        if not offsets:
            return
        if offsets[0] < 0 or positions[0] < 0:
            raise IndexCorruptError(f"offset index {self.path} has a negative first entry")
        if positions[-1] >= log_size:
            raise IndexCorruptError(
                f"offset index {self.path} points at byte {positions[-1]}, past the end of "
                f"its {log_size}-byte log"
            )
        for i in range(1, len(offsets)):
            if offsets[i] <= offsets[i - 1] or positions[i] <= positions[i - 1]:
                raise IndexCorruptError(
                    f"offset index {self.path} entries are not increasing at entry {i}"
                )

    def entries(self) -> list[tuple[int, int]]:
        """All entries as absolute ``(offset, position)`` (tests and tools)."""
        return [
            (self.base_offset + o, p) for o, p in zip(self._offsets, self._positions, strict=True)
        ]
