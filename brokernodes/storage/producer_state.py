"""Idempotent-producer state of one partition: Kafka's ``ProducerStateManager`` in spirit.

For every producer id that has written to the partition the broker keeps the producer epoch
and the metadata of its last five batches (``NUM_BATCHES_TO_RETAIN``, matching the client's
``max.in.flight.requests.per.connection`` <= 5). With them a leader can answer a retried
batch with the offsets it was first written at instead of appending it twice, refuse a batch
that skips sequences, and refuse a zombie producer's older epoch.

Pure and header-only: it reads ``BatchHeader`` fields and never decodes records, sockets or
asyncio; the only file I/O is the optional ``.snapshot`` file. How the broker uses it::

    duplicate = state.check(header)          # leader, before the append; may raise
    if duplicate is not None:                # answer with duplicate.first_offset etc.
        ...
    else:
        ...append, assigning base_offset...
        state.update(header, base_offset=base_offset)   # leader and follower, every append

    state.rebuild(headers_from_log_start, log_start_offset=...)    # on restart

Rules, as Kafka 3.x/4.x applies them to a produce from a client (``ProducerAppendInfo``):

- A batch whose epoch and exact sequence range equal one of the producer's last five batches
  is a duplicate: ``check`` returns that batch's original metadata. An older retry (the 6th
  most recent or before) is not recognised and fails as ``OUT_OF_ORDER_SEQUENCE_NUMBER``;
  ``DUPLICATE_SEQUENCE_NUMBER`` was only ever sent by 0.11 brokers.
- An epoch older than the producer's current one: ``INVALID_PRODUCER_EPOCH`` (Kafka 2.7+;
  ``PRODUCER_FENCED`` comes from the transaction coordinator, not from a partition).
- A newer epoch must start at sequence 0; it then replaces the producer's state.
- In the same epoch the base sequence must be the last sequence + 1, where the sequence after
  ``2**31 - 1`` is 0; anything else is ``OUT_OF_ORDER_SEQUENCE_NUMBER``.
- A producer id without state is accepted at any sequence (KIP-360, Kafka 2.5+): its earlier
  batches may have been removed by retention or ``DeleteRecords``.
- Batches without a producer id (-1) are not tracked.

Transactions (KIP-98). A data batch with the isTransactional attribute opens its producer's
transaction at the batch's base offset, unless one is open already; the producer's next
control batch (the COMMIT or ABORT marker the broker writes, ``update(..., commit=...)``)
ends it and ``update`` returns the ``CompletedTxn``. The partition's **first unstable
offset** is the smallest first offset of the transactions still open or ended by a marker
not yet below the high watermark (a marker that a failover could still lose); the **last
stable offset** is that, capped by the high watermark (``last_stable_offset``).
read_committed consumers read below the LSO only. An ABORT's ``AbortedTxn`` goes to the
marker's segment ``.txnindex`` (``aborted_entry``). Transactional batches follow the same
idempotence rules as any other.

State is always what replaying the log's batch headers from the log start offset would give
(``rebuild``), so a follower, a restarted broker and the leader agree. That is why
``on_log_start_advanced`` forgets producers whose last batch fell below the log start offset
(Kafka keeps those in memory until ``producer.id.expiration.ms``; with the KIP-360 rule above
either choice accepts the producer's next batch).
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from crc32c import crc32c

from brokernodes.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    KafkaStorageError,
    OutOfOrderSequenceError,
    ProducerFencedError,
)
from brokernodes.records.control import TxnMarker
from brokernodes.records.header import BatchHeader
from brokernodes.storage.txn_index import AbortedTxn

__all__ = [
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "MAX_SEQUENCE",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NUM_BATCHES_TO_RETAIN",
    "SNAPSHOT_SUFFIX",
    "BatchMetadata",
    "CompletedTxn",
    "CorruptSnapshotError",
    "ProducerStateEntry",
    "ProducerStateManager",
    "decrement_sequence",
    "increment_sequence",
    "last_sequence",
    "list_snapshot_offsets",
    "read_snapshot",
    "snapshot_file",
    "write_snapshot",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
MAX_SEQUENCE = 2**31 - 1  # Integer.MAX_VALUE; the sequence after it is 0
NUM_BATCHES_TO_RETAIN = 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
SNAPSHOT_SUFFIX = ".snapshot"


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` wrapping past ``MAX_SEQUENCE`` to 0, as Kafka's
    ``DefaultRecordBatch.incrementSequence``."""
    if sequence > MAX_SEQUENCE - increment:
        return increment - (MAX_SEQUENCE - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Inverse of ``increment_sequence`` (Kafka's ``DefaultRecordBatch.decrementSequence``)."""
    if sequence < decrement:
        return MAX_SEQUENCE - (decrement - sequence) + 1
    return sequence - decrement


def last_sequence(header: BatchHeader) -> int:
    """Sequence of the batch's last record: base sequence + last offset delta, wrapped."""
    if header.base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return increment_sequence(header.base_sequence, header.last_offset_delta)


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


@dataclass(slots=True)  # a value; not frozen, which costs ~1 us per instance on the hot path
class BatchMetadata:
    """Where one idempotent batch went: its sequence range, offset range and max timestamp."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int

    @property
    def offset_delta(self) -> int:
        return self.last_offset - self.first_offset


@dataclass(slots=True)
class ProducerStateEntry:
    """One producer id's state in one partition: epoch and its last few batches.

    ``batches`` holds at most ``NUM_BATCHES_TO_RETAIN`` batches of the current epoch, oldest
    first. ``last_offset`` is the last offset of anything the producer wrote here (control
    batches included); it decides when the log start offset has passed the producer by.
    """

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=deque)
    last_timestamp: int = NO_TIMESTAMP
    last_offset: int = -1
    coordinator_epoch: int = -1  # of the last marker written for this producer
    current_txn_first_offset: int = -1  # first offset of its open transaction, -1 if none

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The retained batch with exactly this epoch and sequence range, if any."""
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def maybe_update_epoch(self, epoch: int) -> None:
        """Adopt ``epoch``; a different epoch drops the batches of the old one."""
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, batch: BatchMetadata) -> None:
        self.maybe_update_epoch(epoch)
        if len(self.batches) == NUM_BATCHES_TO_RETAIN:
            self.batches.popleft()
        self.batches.append(batch)
        self.last_timestamp = batch.timestamp
        self.last_offset = max(self.last_offset, batch.last_offset)


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker: its producer, first data offset, the marker's offset
    and whether it was aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


class CorruptSnapshotError(KafkaStorageError):
    """A producer snapshot file that cannot be trusted; delete it and rebuild from the log."""


class ProducerStateManager:
    """Producer id -> ``ProducerStateEntry`` for one partition, plus the offset it covers.

    ``map_end_offset`` is the offset after the last batch folded in (Kafka's ``mapEndOffset``):
    the state describes the log below it. Not thread-safe; the partition owns it.
    """

    __slots__ = (
        "_map_end_offset",
        "_ongoing",
        "_producers",
        "_unreplicated",
        "has_transactions",
        "producer_id_expiration_ms",
    )

    def __init__(
        self,
        *,
        map_end_offset: int = 0,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self._producers: dict[int, ProducerStateEntry] = {}
        self._map_end_offset = map_end_offset
        self.producer_id_expiration_ms = producer_id_expiration_ms
        # producer id -> first offset of its open transaction
        self._ongoing: dict[int, int] = {}
        # transactions ended by a marker the high watermark has not passed yet, marker order
        self._unreplicated: deque[CompletedTxn] = deque()
        # a transactional batch was ever folded in since the last reset (truncation then
        # needs an exact rebuild: a truncated marker reopens its transaction)
        self.has_transactions = False

    # --- reading -------------------------------------------------------------------------

    @property
    def map_end_offset(self) -> int:
        return self._map_end_offset

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        """Read-only view of the active producers (Kafka's ``activeProducers``)."""
        return MappingProxyType(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def __len__(self) -> int:
        return len(self._producers)

    # --- transactions ----------------------------------------------------------------------

    @property
    def ongoing_transactions(self) -> Mapping[int, int]:
        """Producer id -> first offset of each open transaction (read-only)."""
        return MappingProxyType(self._ongoing)

    @property
    def first_unstable_offset(self) -> int | None:
        """The smallest first offset of a transaction open, or ended by a marker the high
        watermark has not passed (``on_high_watermark``); None when there is none."""
        firsts = list(self._ongoing.values())
        firsts.extend(t.first_offset for t in self._unreplicated)
        return min(firsts) if firsts else None

    def on_high_watermark(self, high_watermark: int) -> None:
        """The high watermark moved: forget ended transactions whose marker is below it."""
        unreplicated = self._unreplicated
        while unreplicated and unreplicated[0].last_offset < high_watermark:
            unreplicated.popleft()

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: the first unstable offset, or the high watermark if that is lower or
        there is none. read_committed reads stop here."""
        if not self._ongoing and not self._unreplicated:
            return high_watermark  # the common case: no transaction here at all
        self.on_high_watermark(high_watermark)
        first = self.first_unstable_offset
        return high_watermark if first is None else min(first, high_watermark)

    def aborted_entry(self, txn: CompletedTxn) -> AbortedTxn:
        """The ``.txnindex`` entry of an aborted transaction just ended: its LSO field is the
        first offset of the earliest transaction still open, else the offset after the
        marker (what Kafka stores; a reader stops scanning past an upper bound with it)."""
        firsts = self._ongoing.values()
        lso = min(firsts) if firsts else txn.last_offset + 1
        return AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso)

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Refuse a marker of a fenced producer epoch (INVALID_PRODUCER_EPOCH) or from an
        older coordinator than the last marker's (``ProducerFencedError``,
        TRANSACTION_COORDINATOR_FENCED in Kafka's words)."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"transaction marker for producer {producer_id} has epoch {producer_epoch}, "
                f"older than its current epoch {entry.producer_epoch} on this partition"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise ProducerFencedError(
                f"transaction marker for producer {producer_id} comes from coordinator epoch "
                f"{coordinator_epoch}, older than {entry.coordinator_epoch} that wrote its "
                f"last marker here: a newer transaction coordinator took over"
            )

    def __repr__(self) -> str:
        return (
            f"ProducerStateManager(producers={len(self._producers)}, "
            f"map_end_offset={self._map_end_offset})"
        )

    # --- the produce path ----------------------------------------------------------------

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate one batch from a client before it is appended.

        Returns the original ``BatchMetadata`` when the batch duplicates one of the producer's
        last five (answer with its offsets and do not append), None when it may be appended.
        Raises ``InvalidProducerEpochError``, ``OutOfOrderSequenceError`` or
        ``InvalidRecordError``. Changes nothing; call ``update`` after the append.
        """
        return self.check_batches((header,))

    def check_batches(self, headers: Iterable[BatchHeader]) -> BatchMetadata | None:
        """``check`` for a request that must be all duplicates or all new: the first
        duplicate's metadata, or None when every batch may be appended. A request mixing the
        two is for ``analyze_batches``."""
        for outcome in self.analyze_batches(headers):
            if outcome is not None:
                return outcome
        return None

    def analyze_batches(self, headers: Iterable[BatchHeader]) -> list[BatchMetadata | None]:
        """Each batch's outcome for one produce request to this partition, in order: its
        original ``BatchMetadata`` when it is already in the log (answer with those offsets,
        do not append it), None when it is new and may be appended.

        Every new batch is validated against the state the batches before it leave (Kafka's
        ``analyzeAndValidateProducerState``), so ``[b1, b2]`` with only ``b1`` in the log
        answers ``b1`` from the producer state and appends ``b2``. A batch of a producer
        found in the log *after* a new batch of the same producer in the request is out of
        order (its sequences go back). Raises as ``check`` does, for the whole request;
        changes nothing.
        """
        pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last seq) so far
        outcomes: list[BatchMetadata | None] = []
        for header in headers:
            producer_id = header.producer_id
            if producer_id <= NO_PRODUCER_ID:
                outcomes.append(None)
                continue
            epoch = header.producer_epoch
            first_seq = header.base_sequence
            if first_seq < 0 or epoch < 0:
                raise InvalidRecordError(
                    f"batch from producer {producer_id} has producer epoch {epoch} and base "
                    f"sequence {first_seq}; an idempotent batch needs both to be >= 0"
                )
            last_seq = last_sequence(header)
            entry = self._producers.get(producer_id)
            duplicate = (
                entry.find_duplicate(epoch, first_seq, last_seq) if entry is not None else None
            )
            if duplicate is not None:
                if producer_id in pending:
                    raise OutOfOrderSequenceError(
                        f"producer {producer_id} epoch {epoch}: a batch with sequences "
                        f"{first_seq}..{last_seq}, already in the log, follows a new batch of "
                        f"the same producer in one request; sequences must rise"
                    )
                outcomes.append(duplicate)
                continue
            if producer_id in pending:
                current_epoch, current_last_seq = pending[producer_id]
            elif entry is not None:
                current_epoch, current_last_seq = entry.producer_epoch, entry.last_seq
            else:
                current_epoch, current_last_seq = NO_PRODUCER_EPOCH, NO_SEQUENCE
            _validate(producer_id, epoch, first_seq, current_epoch, current_last_seq)
            pending[producer_id] = (epoch, last_seq)
            outcomes.append(None)
        return outcomes

    def update(
        self,
        header: BatchHeader,
        *,
        base_offset: int | None = None,
        commit: bool | None = None,
        coordinator_epoch: int = -1,
    ) -> CompletedTxn | None:
        """Fold in a batch that is now in the log, at ``base_offset`` if given.

        Leader and follower call it after every append, with no validation (a follower takes
        the leader's word, like Kafka's replication origin). Batches without a producer id
        only move ``map_end_offset``. A transactional data batch opens its producer's
        transaction if none is open. A control batch (transaction marker; ``commit`` says
        which, read from its record by the caller) sets the epoch and ends the open
        transaction, which is returned (None when none was open here); a control batch whose
        record is not a marker the caller could read (``commit`` None) only sets the epoch.
        """
        if base_offset is None:
            base_offset = header.base_offset
        last_offset = base_offset + header.last_offset_delta
        self._map_end_offset = last_offset + 1
        producer_id = header.producer_id
        if producer_id <= NO_PRODUCER_ID:
            return
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerStateEntry(producer_id)
        if header.is_control:
            entry.maybe_update_epoch(header.producer_epoch)
            entry.last_timestamp = header.max_timestamp
            entry.last_offset = max(entry.last_offset, last_offset)
            if coordinator_epoch >= 0:
                entry.coordinator_epoch = coordinator_epoch
            if commit is None:
                return None
            entry.current_txn_first_offset = -1
            first = self._ongoing.pop(producer_id, -1)
            if first < 0:
                return None
            txn = CompletedTxn(producer_id, first, last_offset, not commit)
            self._unreplicated.append(txn)
            return txn
        if header.is_transactional:
            self.has_transactions = True
            first = self._ongoing.setdefault(producer_id, base_offset)
            entry.current_txn_first_offset = first
        entry.add_batch(
            header.producer_epoch,
            BatchMetadata(
                header.base_sequence,
                last_sequence(header),
                base_offset,
                last_offset,
                header.max_timestamp,
            ),
        )
        return None

    # --- recovery, truncation, retention -------------------------------------------------

    def replay(
        self,
        headers: Iterable[BatchHeader],
        *,
        marker_of: Callable[[BatchHeader], TxnMarker | None] | None = None,
    ) -> list[AbortedTxn]:
        """``update`` with every batch at or beyond ``map_end_offset`` (after a snapshot);
        ``marker_of`` reads a control batch's marker. Returns the aborted transactions
        the replayed markers ended."""
        aborted: list[AbortedTxn] = []
        for header in headers:
            if header.base_offset + header.last_offset_delta >= self._map_end_offset:
                self._fold(header, marker_of, aborted)
        return aborted

    def rebuild(
        self,
        headers: Iterable[BatchHeader],
        *,
        log_start_offset: int = 0,
        marker_of: Callable[[BatchHeader], TxnMarker | None] | None = None,
        high_watermark: int | None = None,
    ) -> list[AbortedTxn]:
        """Forget everything and replay the log's batch headers, read from the log start.

        Batches that end below ``log_start_offset`` (the head of the first segment) are
        skipped, so the result equals the live state after ``on_log_start_advanced``.
        ``marker_of`` reads a control batch's marker (required when the log has
        markers); ended transactions below ``high_watermark`` are forgotten as the replay
        goes. Returns every aborted transaction the markers ended, in marker order: what
        the segments' ``.txnindex`` files must hold.
        """
        self.truncate_fully_and_start_at(log_start_offset)
        aborted: list[AbortedTxn] = []
        for header in headers:
            if header.base_offset + header.last_offset_delta >= log_start_offset:
                self._fold(header, marker_of, aborted)
                if high_watermark is not None:
                    self.on_high_watermark(high_watermark)
        return aborted

    def _fold(
        self,
        header: BatchHeader,
        marker_of: Callable[[BatchHeader], TxnMarker | None] | None,
        aborted: list[AbortedTxn],
    ) -> None:
        commit, coordinator_epoch = None, -1
        if header.is_control and header.producer_id > NO_PRODUCER_ID:
            if marker_of is None:
                raise ValueError(
                    f"control batch at offset {header.base_offset}: replay needs marker_of"
                )
            marker = marker_of(header)
            if marker is not None:
                commit, coordinator_epoch = marker.commit, marker.coordinator_epoch
        txn = self.update(header, commit=commit, coordinator_epoch=coordinator_epoch)
        if txn is not None and txn.aborted:
            aborted.append(self.aborted_entry(txn))

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop all state; the log now starts (empty) at ``offset``."""
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self.has_transactions = False
        self._map_end_offset = offset

    def truncate_to(self, offset: int) -> None:
        """The log was truncated to end at ``offset``: drop what the producers wrote there.

        A producer keeps its retained batches below ``offset``. A producer none of whose
        retained batches survive is forgotten (its older batches, if any, were not retained),
        and its next batch is accepted as an unknown producer's. For the exact state call
        ``rebuild``, or ``load_snapshot`` of a snapshot at or below ``offset`` and ``replay``;
        a log with transactions needs that (``has_transactions``): a truncated marker reopens
        its transaction, which this cheap path cannot know. Open transactions that start at
        or after ``offset`` and ended ones whose marker is there are dropped here.
        """
        for producer_id, first in list(self._ongoing.items()):
            if first >= offset:
                del self._ongoing[producer_id]
                entry = self._producers.get(producer_id)
                if entry is not None:
                    entry.current_txn_first_offset = -1
        self._unreplicated = deque(t for t in self._unreplicated if t.last_offset < offset)
        for producer_id, entry in list(self._producers.items()):
            if entry.last_offset < offset:
                continue
            batches = entry.batches
            while batches and batches[-1].last_offset >= offset:
                batches.pop()
            if batches:
                entry.last_offset = batches[-1].last_offset
                entry.last_timestamp = batches[-1].timestamp
            else:
                del self._producers[producer_id]
        self._map_end_offset = min(self._map_end_offset, offset)

    def on_log_start_advanced(self, log_start_offset: int) -> None:
        """Retention or ``DeleteRecords`` moved the log start: forget what lies below it."""
        for producer_id, entry in list(self._producers.items()):
            if entry.last_offset < log_start_offset:
                del self._producers[producer_id]
                continue
            batches = entry.batches
            while batches and batches[0].last_offset < log_start_offset:
                batches.popleft()
        self._map_end_offset = max(self._map_end_offset, log_start_offset)

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        """Forget producers idle for ``producer_id_expiration_ms`` (by batch max timestamp,
        as Kafka does); returns their ids."""
        expired = [
            producer_id
            for producer_id, entry in self._producers.items()
            if now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
            and producer_id not in self._ongoing  # an open transaction keeps its producer
        ]
        for producer_id in expired:
            del self._producers[producer_id]
        return expired

    # --- snapshots -----------------------------------------------------------------------

    def take_snapshot(self, log_dir: str | os.PathLike[str]) -> Path:
        """Write ``<map_end_offset:020d>.snapshot`` into ``log_dir`` atomically; return it.

        Kafka's snapshot format keeps only each producer's last batch, so after loading one
        a producer's duplicate window is one batch until it writes more, as in Kafka. Each
        producer's open transaction (first offset) and coordinator epoch are kept, so the
        LSO survives; transactions ended by a marker above the high watermark are not (the
        snapshot is taken at or below the high watermark's checkpoint).
        """
        path = snapshot_file(log_dir, self._map_end_offset)
        write_snapshot(path, self._producers.values())
        return path

    def load_snapshot(self, path: str | os.PathLike[str]) -> None:
        """Replace the state by a snapshot's; ``map_end_offset`` becomes its offset.

        Follow with ``replay`` of the log's batches from ``map_end_offset``. Raises
        ``CorruptSnapshotError`` (and changes nothing) if the file is damaged.
        """
        path = Path(path)
        offset = _snapshot_offset(path)
        if offset is None:
            raise CorruptSnapshotError(f"{path} is not named <20-digit offset>{SNAPSHOT_SUFFIX}")
        entries = read_snapshot(path)
        self.truncate_fully_and_start_at(offset)
        for entry in entries:
            self._producers[entry.producer_id] = entry
            if entry.current_txn_first_offset >= 0:
                self._ongoing[entry.producer_id] = entry.current_txn_first_offset
                self.has_transactions = True


def _validate(
    producer_id: int, epoch: int, first_seq: int, current_epoch: int, current_last_seq: int
) -> None:
    """Kafka's ``checkProducerEpoch`` then ``checkSequence`` for a client append."""
    if epoch < current_epoch:
        raise InvalidProducerEpochError(
            f"producer {producer_id} sent epoch {epoch}, older than its current epoch "
            f"{current_epoch} on this partition; a newer producer instance has taken over"
        )
    if epoch != current_epoch:
        if first_seq != 0 and current_epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequenceError(
                f"producer {producer_id} started epoch {epoch} (was {current_epoch}) at "
                f"sequence {first_seq}; a new epoch must start at sequence 0"
            )
    elif current_epoch != NO_PRODUCER_EPOCH and not _in_sequence(current_last_seq, first_seq):
        expected = increment_sequence(current_last_seq, 1) if current_last_seq >= 0 else 0
        raise OutOfOrderSequenceError(
            f"producer {producer_id} epoch {epoch} sent base sequence {first_seq}, expected "
            f"{expected} (last written sequence {current_last_seq}); a batch is missing or "
            f"is a retry older than the last {NUM_BATCHES_TO_RETAIN} batches"
        )


# --- snapshot files: Kafka's producer snapshot format, version 1 ----------------------------
#
#   version int16 | crc uint32 (CRC-32C of everything after it) | count int32 | entries:
#   producer_id int64, epoch int16, last_sequence int32, last_offset int64,
#   offset_delta int32, timestamp int64, coordinator_epoch int32,
#   current_txn_first_offset int64

_SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = struct.Struct(">hIi")
_SNAPSHOT_CRC_END = 6  # the CRC covers bytes [6, end)
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")


def snapshot_file(log_dir: str | os.PathLike[str], offset: int) -> Path:
    """``<log_dir>/<offset:020d>.snapshot``, named like a segment."""
    return Path(log_dir) / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def _snapshot_offset(path: Path) -> int | None:
    stem, suffix = path.stem, path.suffix
    if suffix != SNAPSHOT_SUFFIX or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def list_snapshot_offsets(log_dir: str | os.PathLike[str]) -> list[int]:
    """Offsets of the snapshot files in ``log_dir``, ascending."""
    try:
        names = os.listdir(log_dir)
    except FileNotFoundError:
        return []
    offsets = (_snapshot_offset(Path(name)) for name in names)
    return sorted(offset for offset in offsets if offset is not None)


def write_snapshot(path: str | os.PathLike[str], entries: Iterable[ProducerStateEntry]) -> None:
    """Write entries in Kafka's snapshot format: temp file, fsync, rename, fsync the dir."""
    entries = list(entries)
    body = bytearray(_SNAPSHOT_HEAD.size + _SNAPSHOT_ENTRY.size * len(entries))
    _SNAPSHOT_HEAD.pack_into(body, 0, _SNAPSHOT_VERSION, 0, len(entries))
    position = _SNAPSHOT_HEAD.size
    for entry in entries:
        last = entry.batches[-1] if entry.batches else None
        _SNAPSHOT_ENTRY.pack_into(
            body,
            position,
            entry.producer_id,
            entry.producer_epoch,
            last.last_seq if last else NO_SEQUENCE,
            last.last_offset if last else -1,
            last.offset_delta if last else 0,
            entry.last_timestamp,
            entry.coordinator_epoch,
            entry.current_txn_first_offset,
        )
        position += _SNAPSHOT_ENTRY.size
    struct.pack_into(">I", body, 2, crc32c(memoryview(body)[_SNAPSHOT_CRC_END:]))
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise KafkaStorageError(f"cannot write producer snapshot {path}: {exc}") from exc


def read_snapshot(path: str | os.PathLike[str]) -> list[ProducerStateEntry]:
    """Read a snapshot file; ``CorruptSnapshotError`` if its version, size or CRC is wrong."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise KafkaStorageError(f"cannot read producer snapshot {path}: {exc}") from exc
    if len(data) < _SNAPSHOT_HEAD.size:
        raise CorruptSnapshotError(f"producer snapshot {path} is truncated ({len(data)} bytes)")
    version, crc, count = _SNAPSHOT_HEAD.unpack_from(data, 0)
    if version != _SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"producer snapshot {path} has unknown version {version}")
    expected_size = _SNAPSHOT_HEAD.size + _SNAPSHOT_ENTRY.size * count
    if count < 0 or len(data) != expected_size:
        raise CorruptSnapshotError(
            f"producer snapshot {path} declares {count} entries but is {len(data)} bytes"
        )
    actual = crc32c(memoryview(data)[_SNAPSHOT_CRC_END:])
    if actual != crc:
        raise CorruptSnapshotError(
            f"producer snapshot {path} fails its CRC-32C check: stored {crc:#010x}, "
            f"computed {actual:#010x}"
        )
    entries = []
    for fields in _SNAPSHOT_ENTRY.iter_unpack(memoryview(data)[_SNAPSHOT_HEAD.size :]):
        producer_id, epoch, last_seq, last_offset, offset_delta, timestamp = fields[:6]
        coordinator_epoch, txn_first_offset = fields[6:]
        entry = ProducerStateEntry(
            producer_id,
            epoch,
            last_timestamp=timestamp,
            coordinator_epoch=coordinator_epoch,
            current_txn_first_offset=txn_first_offset,
        )
        if last_offset >= 0:
            entry.batches.append(
                BatchMetadata(
                    decrement_sequence(last_seq, offset_delta),
                    last_seq,
                    last_offset - offset_delta,
                    last_offset,
                    timestamp,
                )
            )
            entry.last_offset = last_offset
        entries.append(entry)
    return entries
