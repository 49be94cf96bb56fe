"""``TxnIndex``: a segment's ``.txnindex``, the aborted transactions whose ABORT marker it holds.

Kafka's layout, one 34-byte entry per aborted transaction, in marker order::

    version int16 = 0 | producer_id int64 | first_offset int64 | last_offset int64 |
    last_stable_offset int64

``first_offset`` is the transaction's first data offset in this partition, ``last_offset``
the offset of its ABORT marker, ``last_stable_offset`` the partition's LSO once the marker
was written. A read_committed fetch from offset ``o`` up to ``u`` asks every segment from the
one holding ``o`` for the entries with ``last_offset >= o`` and ``first_offset < u``
(``PartitionLog.aborted_transactions``) and hands them to the client, which drops those
producers' batches from ``first_offset`` until their marker.

The file is created on the first entry (most segments never see an abort) and appended to
with ``pwrite``. It is derived data: on open, the partition replays the log's markers and
``replace``s an index that disagrees (a crash between the marker's append and its entry, a
torn write, or an entry never fsynced), so the file needs no recovery protocol of its own
and no fsync with each append: the log's group commit and flush policy fsync the ``.log``
without it, and ``flush`` (the segment's whole flush: close, truncation) fsyncs it
(docs/transactions.md, "Restart and truncation").
Not thread-safe: the owning ``PartitionLog`` serialises calls under its lock.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterable
from typing import NamedTuple

from brokernodes.errors import KafkaStorageError
from brokernodes.storage.files import atomic_write, pwrite_all

__all__ = ["ENTRY_SIZE", "TXN_INDEX_SUFFIX", "AbortedTxn", "TxnIndex", "decode", "encode"]

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
_VERSION = 0


class AbortedTxn(NamedTuple):
    """One aborted transaction: its producer, first data offset and ABORT marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def encode(entries: Iterable[AbortedTxn]) -> bytes:
    return b"".join(_ENTRY.pack(_VERSION, *e) for e in entries)


def decode(data: bytes, path: str = "<txnindex>") -> list[AbortedTxn]:
    """Entries of a ``.txnindex`` file's bytes; a torn last entry is ignored (the partition
    rewrites the file from the log on open), an unknown version is an error."""
    whole = len(data) - len(data) % ENTRY_SIZE
    out = []
    for version, *fields in _ENTRY.iter_unpack(data[:whole]):
        if version != _VERSION:
            raise KafkaStorageError(
                f"{path}: aborted-transaction entry of unknown version {version}"
            )
        out.append(AbortedTxn(*fields))
    return out


class TxnIndex:
    """The aborted transactions of one segment (module docstring). Entries live in memory,
    read from the file on first use."""

    __slots__ = ("_dirty", "_entries", "_fd", "fsync_enabled", "path")

    def __init__(self, path: str, *, fsync: bool = True) -> None:
        self.path = path
        self.fsync_enabled = fsync
        self._entries: list[AbortedTxn] | None = None
        self._fd = -1
        self._dirty = False

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                with open(self.path, "rb") as f:
                    self._entries = decode(f.read(), self.path)
            except FileNotFoundError:
                self._entries = []
            except OSError as e:
                raise KafkaStorageError(f"cannot read {self.path}: {e}") from e
        return self._entries

    def __len__(self) -> int:
        return len(self.entries)

    def _open(self) -> int:
        if self._fd < 0:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                raise KafkaStorageError(f"cannot open {self.path}: {e}") from e
        return self._fd

    def append(self, entry: AbortedTxn) -> None:
        """Add the entry of an ABORT marker just appended to this segment."""
        entries = self.entries
        position = len(entries) * ENTRY_SIZE
        try:
            pwrite_all(self._open(), _ENTRY.pack(_VERSION, *entry), position)
        except OSError as e:
            raise KafkaStorageError(f"cannot write {self.path}: {e}") from e
        entries.append(entry)
        self._dirty = True

    def collect(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Entries overlapping offsets [``start_offset``, ``upper_bound``)."""
        return [
            e
            for e in self.entries
            if e.last_offset >= start_offset and e.first_offset < upper_bound
        ]

    def truncate_to(self, offset: int) -> None:
        """The segment lost its batches from ``offset`` on: drop their markers' entries."""
        entries = self.entries
        keep = [e for e in entries if e.last_offset < offset]
        if len(keep) == len(entries):
            return
        self._entries = keep
        if not keep:
            self.delete()
            return
        try:
            os.ftruncate(self._open(), len(keep) * ENTRY_SIZE)
        except OSError as e:
            raise KafkaStorageError(f"cannot truncate {self.path}: {e}") from e
        self._dirty = True

    def replace(self, entries: list[AbortedTxn]) -> bool:
        """Make the file hold exactly ``entries`` (recovery from the log); True if it
        changed."""
        if entries == self.entries:
            return False
        self.close()
        if entries:
            atomic_write(self.path, encode(entries))
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        self._entries = list(entries)
        return True

    def flush(self) -> None:
        if self._fd >= 0 and self._dirty and self.fsync_enabled:
            try:
                os.fsync(self._fd)
            except OSError as e:
                raise KafkaStorageError(f"cannot fsync {self.path}: {e}") from e
        self._dirty = False

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        """Remove the file (the segment is deleted, or has no aborted transaction left)."""
        self.close()
        self._entries = []
        self._dirty = False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
