"""``LogSegments``: a partition's segments ordered by base offset (Kafka's segment map).

A sorted list of base offsets plus a dict, so appending the newest segment and dropping the
oldest are cheap and ``floor`` (the segment that may hold an offset) is a ``bisect``.

Not thread-safe: the owning ``PartitionLog`` serialises every call under its lock.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator

from brokernodes.storage.segment import LogSegment


class LogSegments:
    """Ordered map base offset -> ``LogSegment``; the last one is the active segment.

    Not thread-safe: hold the owning ``PartitionLog``'s ``lock`` while using it."""

    def __init__(self) -> None:
        self._bases: list[int] = []
        self._by_base: dict[int, LogSegment] = {}

    def __len__(self) -> int:
        return len(self._bases)

    def __iter__(self) -> Iterator[LogSegment]:
        by_base = self._by_base
        return iter([by_base[b] for b in self._bases])

    def __contains__(self, base_offset: object) -> bool:
        return base_offset in self._by_base

    def add(self, segment: LogSegment) -> None:
        """Insert (or replace) the segment with this base offset."""
        base = segment.base_offset
        if base not in self._by_base:
            if not self._bases or base > self._bases[-1]:
                self._bases.append(base)
            else:
                self._bases.insert(bisect_left(self._bases, base), base)
        self._by_base[base] = segment

    def remove(self, base_offset: int) -> LogSegment:
        segment = self._by_base.pop(base_offset)
        del self._bases[bisect_left(self._bases, base_offset)]
        return segment

    def get(self, base_offset: int) -> LogSegment | None:
        return self._by_base.get(base_offset)

    @property
    def first(self) -> LogSegment | None:
        return self._by_base[self._bases[0]] if self._bases else None

    @property
    def last(self) -> LogSegment | None:
        return self._by_base[self._bases[-1]] if self._bases else None

    @property
    def base_offsets(self) -> list[int]:
        return list(self._bases)

    def floor(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset <= ``offset``."""
        i = bisect_right(self._bases, offset)
        return self._by_base[self._bases[i - 1]] if i else None

    def higher(self, base_offset: int) -> LogSegment | None:
        """The segment after the one with ``base_offset`` (any base greater than it)."""
        i = bisect_right(self._bases, base_offset)
        return self._by_base[self._bases[i]] if i < len(self._bases) else None

    def from_floor(self, offset: int) -> list[LogSegment]:
        """The segment that may hold ``offset`` and every later one."""
        i = max(bisect_right(self._bases, offset) - 1, 0)
        return [self._by_base[b] for b in self._bases[i:]]

    def at_or_above(self, base_offset: int) -> list[LogSegment]:
        i = bisect_left(self._bases, base_offset)
        return [self._by_base[b] for b in self._bases[i:]]

    def upper_bound(self, segment: LogSegment, log_end_offset: int) -> int:
        """Where ``segment``'s offsets end: the next segment's base, or the log end offset."""
        nxt = self.higher(segment.base_offset)
        return log_end_offset if nxt is None else nxt.base_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._by_base.values())
