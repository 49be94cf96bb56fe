"""The sparse time index (``.timeindex``): timestamp -> offset within a segment.

Entries are Kafka's: 8-byte timestamp + 4-byte offset relative to the segment's base offset,
big-endian. An entry is added (at the same points as the offset index) only when the
segment's max timestamp so far has grown, so timestamps strictly increase; the entry's offset
is the last offset of the batch that first reached that timestamp. When the segment stops
being active, one last entry with the segment's max timestamp is added, so the last entry is
the segment's largest timestamp (what time retention and timestamp lookup use).

Same design as ``OffsetIndex``: in-memory columns, ``pwrite`` appends, no mmap, a cache that
recovery rebuilds. Not thread-safe: the owning ``PartitionLog`` serialises every call.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right

from brokernodes.storage.offset_index import IndexCorruptError, IndexFile

ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class TimeIndex(IndexFile):
    """Sparse ``.timeindex`` of one segment; see the module docstring. Not thread-safe (the
    owning ``PartitionLog``'s lock serialises calls)."""

    entry_size = 12

    def __init__(self, path: str, base_offset: int, max_index_size: int = 10 * 1024 * 1024):
        super().__init__(path, base_offset, max_index_size)
        self._timestamps = array("q")
        self._offsets = array("i")
        for ts, rel in ENTRY.iter_unpack(self._read_file()):
            self._timestamps.append(ts)
            self._offsets.append(rel)

    def __len__(self) -> int:
        return len(self._timestamps)

    @property
    def is_full(self) -> bool:
        return len(self._timestamps) >= self.max_entries

    @property
    def last_entry(self) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry, ``(-1, base_offset)`` when empty."""
        if not self._timestamps:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Append ``(timestamp, offset)`` if ``timestamp`` is above the last entry's."""
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return False
        if timestamp < 0:
            return False
        rel = offset - self.base_offset
        if self._offsets and rel < self._offsets[-1]:
            return False
        if self.is_full and not skip_full_check:
            raise ValueError(f"time index {self.path} is full ({self.max_entries} entries)")
        self._timestamps.append(timestamp)
        self._offsets.append(rel)
        self._pending += ENTRY.pack(timestamp, rel)
        return True

    @property
    def free_entries(self) -> int:
        return self.max_entries - len(self._timestamps)

    @property
    def last_timestamp(self) -> int:
        return self._timestamps[-1] if self._timestamps else NO_TIMESTAMP

    def extend(self, entries: list[tuple[int, int]]) -> None:
        """Append several ``(timestamp, offset)`` entries with strictly increasing timestamps
        above the last entry's (the append path)."""
        if not entries:
            return
        if len(entries) > self.free_entries:
            raise ValueError(f"time index {self.path} is full ({self.max_entries} entries)")
        if entries[0][0] <= self.last_timestamp or (
            self._offsets and entries[0][1] - self.base_offset < self._offsets[-1]
        ):
            raise ValueError(f"time index entry {entries[0]} is not after the last entry")
        base = self.base_offset
        timestamps, offsets, pending, pack = (
            self._timestamps,
            self._offsets,
            self._pending,
            ENTRY.pack,
        )
        for timestamp, offset in entries:
            rel = offset - base
            timestamps.append(timestamp)
            offsets.append(rel)
            pending += pack(timestamp, rel)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """The last entry with timestamp <= ``timestamp``, or ``(-1, base_offset)``."""
        i = bisect_right(self._timestamps, timestamp)
        if i == 0:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[i - 1], self.base_offset + self._offsets[i - 1]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset`` (those batches were cut)."""
        n = bisect_right(self._offsets, offset - self.base_offset - 1)
        if n < len(self._offsets):
            del self._timestamps[n:]
            del self._offsets[n:]
            self._truncate_file(n)

    def reset(self) -> None:
        self._timestamps = array("q")
        self._offsets = array("i")
        self._truncate_file(0)

    def sanity_check(self, next_offset: int | None = None) -> None:
        """Raise ``IndexCorruptError`` if entries are not increasing or point outside the
        segment (``next_offset``, when known, bounds the offsets)."""
        if self.load_error:
            raise IndexCorruptError(f"time index {self.path}: {self.load_error}")
        ts, offs = self._timestamps, self._offsets
        if not ts:
            return
        if offs[0] < 0 or ts[0] < 0:
            raise IndexCorruptError(f"time index {self.path} has a negative first entry")
        if next_offset is not None and self.base_offset + offs[-1] >= max(
            next_offset, self.base_offset + 1
        ):
            raise IndexCorruptError(
                f"time index {self.path} points at offset {self.base_offset + offs[-1]}, "
                f"past the segment's end offset {next_offset}"
            )
        for i in range(1, len(ts)):
            if ts[i] <= ts[i - 1] or offs[i] < offs[i - 1]:
                raise IndexCorruptError(
                    f"time index {self.path} entries are not increasing at entry {i}"
                )

    def entries(self) -> list[tuple[int, int]]:
        """All entries as ``(timestamp, absolute offset)`` (tests and tools)."""
        return [
            (t, self.base_offset + o) for t, o in zip(self._timestamps, self._offsets, strict=True)
        ]


__all__ = ["NO_TIMESTAMP", "IndexCorruptError", "TimeIndex"]
