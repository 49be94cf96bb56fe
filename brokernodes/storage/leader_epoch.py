"""The leader epoch cache: which leader epoch started at which offset (KIP-101, KIP-279).

Each partition keeps an ordered list of ``EpochEntry(epoch, start_offset)``: the first offset
written under every leader epoch this replica has seen. Followers use it to find where their
log diverges from the leader's (``OffsetsForLeaderEpoch`` answered by ``end_offset_for``) and
truncate there instead of at the high watermark, which is what makes acknowledged writes
survive leader changes. Entries are strictly increasing in both epoch and start offset.

The rules are Kafka's ``LeaderEpochFileCache`` exactly:

- ``assign(epoch, start)`` does nothing when ``epoch`` is already the latest epoch and
  ``start`` is not lower than its start offset. Otherwise every trailing entry with
  ``epoch >= new epoch`` or ``start_offset >= new start`` is removed and the new entry
  appended. (So, as in Kafka, assigning an epoch lower than the latest one is not ignored: it
  drops the later entries. The log only assigns the epochs of batches it appends, and a
  follower truncates before it appends, so this only fires on a genuine conflict.)
- ``truncate_from_end(end_offset)`` drops entries starting at or after ``end_offset``.
- ``truncate_from_start(start_offset)`` drops entries starting at or before ``start_offset``
  and re-adds the last of them with its start moved up to ``start_offset``.

The list logic is pure (module functions over tuples, tested in memory); the class adds a
lock and writes the ``leader-epoch-checkpoint`` file after every change, so the file I/O sits
at the edges. Thread-safe: every public method takes the instance's lock, so the request
handlers and the replica fetcher may share one cache (as Kafka's does).
"""

from __future__ import annotations

import os
import threading
from bisect import bisect_left, bisect_right
from typing import NamedTuple

from brokernodes.storage.checkpoint import CheckpointFile

LEADER_EPOCH_CHECKPOINT_FILENAME = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    """The first offset (``start_offset``) written under leader epoch ``epoch``."""

    epoch: int
    start_offset: int


class EpochEntryFormatter:
    """``epoch startOffset``, the line format of Kafka's ``leader-epoch-checkpoint``."""

    def to_line(self, entry: EpochEntry) -> str:
        return f"{entry.epoch} {entry.start_offset}"

    def from_line(self, line: str) -> EpochEntry:
        parts = line.split(" ")
        if len(parts) != 2 or not all(_is_int(p) for p in parts):
            raise ValueError("expected 'epoch startOffset' as two integers")
        return EpochEntry(int(parts[0]), int(parts[1]))


def _is_int(s: str) -> bool:
    body = s[1:] if s.startswith("-") else s
    return body.isascii() and body.isdigit()


# --- pure list logic --------------------------------------------------------------------------


def assign(entries: list[EpochEntry], epoch: int, start_offset: int) -> list[EpochEntry] | None:
    """The list after assigning ``epoch`` at ``start_offset``, or None when nothing changes."""
    if epoch < 0 or start_offset < 0:
        raise ValueError(f"invalid leader epoch entry: epoch={epoch} start_offset={start_offset}")
    if entries:
        last = entries[-1]
        if epoch == last.epoch and start_offset >= last.start_offset:
            return None
    kept = list(entries)
    while kept and (kept[-1].epoch >= epoch or kept[-1].start_offset >= start_offset):
        kept.pop()
    kept.append(EpochEntry(epoch, start_offset))
    return kept


def truncate_from_end(entries: list[EpochEntry], end_offset: int) -> list[EpochEntry] | None:
    """Drop entries with ``start_offset >= end_offset``; None when nothing changes."""
    if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
        return None
    starts = [e.start_offset for e in entries]
    return entries[: bisect_left(starts, end_offset)]


def truncate_from_start(entries: list[EpochEntry], start_offset: int) -> list[EpochEntry] | None:
    """Drop entries starting at or before ``start_offset``, keeping the last one's epoch from
    ``start_offset`` on (the log start moved up); None when nothing changes."""
    starts = [e.start_offset for e in entries]
    n = bisect_right(starts, start_offset)
    if n == 0:
        return None
    first = EpochEntry(entries[n - 1].epoch, start_offset)
    new = [first, *entries[n:]]
    return None if new == entries else new


def epoch_for_offset(entries: list[EpochEntry], offset: int) -> int | None:
    """The epoch ``offset`` was written in: the largest epoch starting at or before it."""
    starts = [e.start_offset for e in entries]
    i = bisect_right(starts, offset)
    return entries[i - 1].epoch if i else None


def end_offset_for(
    entries: list[EpochEntry], requested_epoch: int, log_end_offset: int
) -> tuple[int, int]:
    """Kafka's answer to ``OffsetsForLeaderEpoch``: ``(epoch, end_offset)``.

    - requested is UNDEFINED_EPOCH, or above every known epoch: ``(-1, -1)``;
    - requested is the latest epoch: ``(latest, log_end_offset)``;
    - otherwise the end offset is the start offset of the first epoch above the requested
      one, and the epoch is the largest known epoch <= requested; if the requested epoch is
      below every known epoch (older entries were truncated away with the log start), the
      epoch returned is the requested one itself, as Kafka >= 2.0 (KIP-279) does, so that the
      follower truncates to the leader's earliest epoch start instead of falling back to the
      high watermark.
    """
    if requested_epoch == UNDEFINED_EPOCH or not entries:
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    if entries[-1].epoch == requested_epoch:
        return requested_epoch, log_end_offset
    epochs = [e.epoch for e in entries]
    higher = bisect_right(epochs, requested_epoch)
    if higher == len(entries):
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    end = entries[higher].start_offset
    if higher == 0:
        return requested_epoch, end
    return entries[higher - 1].epoch, end


# --- the cache with its checkpoint file -------------------------------------------------------


class LeaderEpochFileCache:
    """A partition's epoch -> start offset list, persisted in ``leader-epoch-checkpoint``.

    ``path`` is the checkpoint file (usually ``<partition dir>/leader-epoch-checkpoint``), or
    None for a cache that lives only in memory. The file is read once here and rewritten
    atomically after each change; a malformed file raises ``KafkaStorageError``.
    """

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self._lock = threading.RLock()
        self._checkpoint = (
            None
            if path is None
            else CheckpointFile(path, CHECKPOINT_VERSION, EpochEntryFormatter())
        )
        entries: list[EpochEntry] = []
        if self._checkpoint is not None:
            # Re-assigning sanitises a file with non-monotonic entries, as Kafka does.
            for e in self._checkpoint.read():
                entries = assign(entries, e.epoch, e.start_offset) or entries
        self._entries = entries

    @property
    def path(self) -> str | None:
        return None if self._checkpoint is None else self._checkpoint.path

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed."""
        with self._lock:
            return self._update(assign(self._entries, epoch, start_offset))

    def truncate_from_end(self, end_offset: int) -> bool:
        """The log was truncated to ``end_offset``: forget epochs starting at or after it."""
        with self._lock:
            return self._update(truncate_from_end(self._entries, end_offset))

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log start moved to ``start_offset``: forget what lies wholly before it."""
        with self._lock:
            return self._update(truncate_from_start(self._entries, start_offset))

    def clear(self) -> None:
        """Forget every entry (and write the empty checkpoint)."""
        with self._lock:
            self._flush([])
            self._entries = []

    @property
    def entries(self) -> list[EpochEntry]:
        with self._lock:
            return list(self._entries)

    def is_empty(self) -> bool:
        with self._lock:
            return not self._entries

    @property
    def latest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[0] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        """The epoch of the latest entry (the current leader epoch on a leader), or None.

        Lock-free (every append asks): one read of the list's last item is atomic.
        """
        try:
            return self._entries[-1].epoch
        except IndexError:
            return None

    def previous_epoch(self) -> int | None:
        """The epoch before the latest one, or None."""
        with self._lock:
            return self._entries[-2].epoch if len(self._entries) >= 2 else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch ``offset`` was written in, None if before the first entry."""
        with self._lock:
            return epoch_for_offset(self._entries, offset)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end_offset)`` for an ``OffsetsForLeaderEpoch`` request; see the function."""
        with self._lock:
            return end_offset_for(self._entries, requested_epoch, log_end_offset)

    def _update(self, new: list[EpochEntry] | None) -> bool:
        if new is None:
            return False
        self._flush(new)  # file first: a failed write leaves memory and file agreeing
        self._entries = new
        return True

    def _flush(self, entries: list[EpochEntry]) -> None:
        if self._checkpoint is not None:
            self._checkpoint.write(entries)

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self.path!r}, {self._entries!r})"
