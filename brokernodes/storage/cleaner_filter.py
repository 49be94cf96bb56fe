"""The log cleaner's record-level logic, pure: offset map, transaction scan, batch filter.

Works on RecordBatch v2 bytes in, bytes out; ``cleaner.py`` feeds it segment files and swaps
the results in. The cleaner is not the hot path, so records are decoded here
(``brokernodes.records.batch``). Rules follow Kafka's ``LogCleaner``:

- The **offset map** holds, for every key in the dirty section, the offset of its latest
  record (tombstones included: they must shadow older values). Control batches and batches of
  aborted transactions are skipped.
- A record **survives** cleaning when its offset is past the map's latest offset, or it is the
  latest record of its key and either has a value or is a tombstone still inside its delete
  horizon. Records without a key are dropped: a compacted topic refuses them at produce time,
  so any found here are invalid (Kafka counts them as invalid messages and drops them too).
- **Tombstones (KIP-534).** The first time the cleaner rewrites a batch holding tombstones it
  stamps it with ``delete_horizon_ms = now + delete.retention.ms`` (attributes bit 6; the base
  timestamp field carries the horizon). A later clean running at ``now >= horizon`` drops those
  tombstones. So a tombstone lives at least ``delete.retention.ms`` after it was first cleaned,
  which is what lets a consumer that read the old value also see its deletion.
- **Offsets are preserved.** A batch whose records all survive, and that needs no horizon
  stamp, is copied byte for byte. Otherwise the survivors are re-encoded into one batch with the
  original base offset, their own offset deltas, and the original producer id/epoch, base
  sequence, partition leader epoch, compression, timestamp type and transactional flag.
- A batch left with no records is dropped, except (as Kafka's ``RETAIN_EMPTY``) when it is
  the last batch of its producer in the range, which keeps idempotent producer state
  recoverable from the log, or the last batch of the segment group, which keeps the cleaned
  segment's next offset equal to the original's (the swap recovery relies on it). Such a batch
  is kept as a header-only batch with zero records and its original last offset delta.
- Batches of **aborted transactions** lose their records, as in Kafka: they are out of the
  offset map (an aborted value never shadows an older committed one) and out of the cleaned
  batches (so it never comes back as a key's latest value to a read_uncommitted reader).
- **Control batches** (transaction markers) go as Kafka's do (KIP-98): a marker is kept
  unchanged while any batch of its transaction is left in the log (``TxnScan.empty_markers``
  names those with none); once none is, the first clean stamps it with a delete horizon
  (``now + delete.retention.ms``, as tombstones are), and a clean at or after the horizon
  drops it. So a reader that read a transaction's data before it was cleaned away still
  finds its marker for ``delete.retention.ms``. A marker that is its producer's last batch in
  the range, or the group's last batch, is kept whole rather than emptied (Kafka keeps an
  empty control batch there): it keeps the producer's epoch recoverable from the log, and a
  record-less control batch would read as a damaged marker on replay.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from crc32c import crc32c

from brokernodes.records.batch import DecodedBatch, Record, decode_batch, encode_batch
from brokernodes.records.header import (
    COMPRESSION_MASK,
    DELETE_HORIZON_BIT,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
)

MAX_TIMESTAMP = 2**63 - 1  # delete.retention.ms may be "forever"
CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")  # version, type


@dataclass
class OffsetMap:
    """Key -> offset of its latest record in the dirty section (Kafka's ``SkimpyOffsetMap``,
    exact here: a dict, bounded by the number of distinct keys in the dirty section)."""

    offsets: dict[bytes, int] = field(default_factory=dict)
    latest_offset: int = -1

    def put(self, key: bytes, offset: int) -> None:
        self.offsets[key] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int | None:
        return self.offsets.get(key)

    def __len__(self) -> int:
        return len(self.offsets)


@dataclass
class TxnScan:
    """What a header scan of a range learned about producers and transactions."""

    aborted: set[int] = field(default_factory=set)
    """Base offsets of transactional data batches whose transaction ended with ABORT."""
    first_unstable_offset: int | None = None
    """First offset of the earliest transaction not yet ended by a marker in the range."""
    last_batch_of_producer: dict[int, int] = field(default_factory=dict)
    """Producer id -> base offset of its last batch in the range."""
    empty_markers: set[int] = field(default_factory=set)
    """Base offsets of control batches no batch of whose transaction is left in the range
    (its data was cleaned away or deleted): those markers may go after their horizon."""


def scan_transactions(batches: Iterable[tuple[BatchHeader, bytes]]) -> TxnScan:
    """Find aborted transactional batches, the first unstable offset and each producer's last
    batch, reading only headers plus the key of each control record."""
    scan = TxnScan()
    open_txns: dict[int, list[int]] = {}  # producer id -> base offsets of its open txn
    for header, buf in batches:
        pid = header.producer_id
        if pid >= 0:
            scan.last_batch_of_producer[pid] = header.base_offset
        if header.is_control:
            batch_offsets = open_txns.pop(pid, [])
            if not batch_offsets:
                scan.empty_markers.add(header.base_offset)
            elif control_type(buf) == CONTROL_ABORT:
                scan.aborted.update(batch_offsets)
        elif header.is_transactional:
            open_txns.setdefault(pid, []).append(header.base_offset)
    if open_txns:
        scan.first_unstable_offset = min(offsets[0] for offsets in open_txns.values())
    return scan


def control_type(buf: bytes) -> int | None:
    """The type of a control batch's marker (ABORT=0, COMMIT=1), None if unreadable."""
    batch = decode_batch(buf)
    if not batch.records or batch.records[0].key is None or len(batch.records[0].key) < 4:
        return None
    return _CONTROL_KEY.unpack_from(batch.records[0].key)[1]


def add_to_offset_map(
    offset_map: OffsetMap,
    header: BatchHeader,
    buf: bytes,
    aborted: set[int],
    max_records_bytes: int | None = None,
) -> None:
    """Put every keyed record of one batch into the map (skipping control/aborted batches);
    the map's latest offset moves past the batch either way, as Kafka's does."""
    if header.last_offset > offset_map.latest_offset:
        offset_map.latest_offset = header.last_offset
    if header.is_control or (header.is_transactional and header.base_offset in aborted):
        return
    for record in decode_batch(buf, max_records_bytes=max_records_bytes).records:
        if record.key is not None:
            offset_map.put(bytes(record.key), record.offset)


@dataclass
class FilterStats:
    """Counts for one cleaning pass (summed over batches)."""

    batches_read: int = 0
    records_read: int = 0
    bytes_read: int = 0
    batches_written: int = 0
    records_written: int = 0
    bytes_written: int = 0
    tombstones_removed: int = 0
    markers_removed: int = 0
    invalid_records: int = 0

    def add(self, other: FilterStats) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


def filter_batch(
    header: BatchHeader,
    buf: bytes,
    offset_map: OffsetMap,
    *,
    now_ms: int,
    delete_retention_ms: int,
    aborted: set[int],
    retain_empty: bool,
    stats: FilterStats,
    max_records_bytes: int | None = None,
    empty_markers: frozenset[int] | set[int] = frozenset(),
) -> bytes | None:
    """The cleaned bytes of one batch (possibly ``buf`` itself), or None to drop it.
    ``empty_markers``: the control batches whose transaction has no batch left
    (``TxnScan.empty_markers``); any other control batch is kept unchanged."""
    stats.batches_read += 1
    stats.records_read += header.records_count
    stats.bytes_read += len(buf)
    if header.is_control:
        return _filter_marker(
            header,
            buf,
            now_ms,
            delete_retention_ms,
            header.base_offset in empty_markers,
            retain_empty,
            stats,
        )
    batch = decode_batch(buf, max_records_bytes=max_records_bytes)
    discard_all = header.is_transactional and header.base_offset in aborted
    horizon = batch.delete_horizon_ms
    keep_tombstones = horizon is None or now_ms < horizon
    kept = []
    has_tombstone = False
    for record in batch.records:
        if discard_all:
            continue
        if _retain(record, offset_map, keep_tombstones, stats):
            kept.append(record)
            if record.value is None:
                has_tombstone = True
    stamp = has_tombstone and horizon is None
    if len(kept) == len(batch.records) and not stamp:
        return _written(buf, stats, len(kept))
    if not kept:
        if not retain_empty:
            return None
        return _written(empty_batch(header), stats, 0)
    if stamp:
        horizon = min(now_ms + delete_retention_ms, MAX_TIMESTAMP)
    out = _reencode(batch, kept, horizon)
    return _written(out, stats, len(kept))


def _filter_marker(
    header: BatchHeader,
    buf: bytes,
    now_ms: int,
    delete_retention_ms: int,
    empty: bool,
    retain: bool,
    stats: FilterStats,
) -> bytes | None:
    """A control batch: kept while its transaction has batches left (``empty`` False) or
    when ``retain`` (its producer's or the group's last batch); otherwise stamped with a
    delete horizon on the first clean, dropped by a clean at or after it."""
    if not empty or retain:
        return _written(buf, stats, header.records_count)
    if not header.has_delete_horizon:
        horizon = min(now_ms + delete_retention_ms, MAX_TIMESTAMP)
        batch = decode_batch(buf)
        return _written(_reencode(batch, batch.records, horizon), stats, header.records_count)
    if now_ms < header.base_timestamp:  # the horizon, in the base timestamp field
        return _written(buf, stats, header.records_count)
    stats.markers_removed += 1
    return None


def _retain(record, offset_map: OffsetMap, keep_tombstones: bool, stats: FilterStats) -> bool:
    if record.offset > offset_map.latest_offset:
        return True  # beyond what the map saw: not ours to judge
    if record.key is None:
        stats.invalid_records += 1
        return False
    latest = offset_map.get(bytes(record.key))
    if latest is not None and record.offset < latest:
        return False
    if record.value is None and not keep_tombstones:
        stats.tombstones_removed += 1
        return False
    return True


def _written(buf: bytes, stats: FilterStats, records: int) -> bytes:
    stats.batches_written += 1
    stats.records_written += records
    stats.bytes_written += len(buf)
    return buf


def _reencode(batch: DecodedBatch, kept: list, delete_horizon_ms: int | None) -> bytes:
    h = batch.header
    records = [
        Record(r.timestamp, r.key, r.value, r.headers, r.offset - h.base_offset) for r in kept
    ]
    return encode_batch(
        records,
        base_offset=h.base_offset,
        compression=h.compression,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        partition_leader_epoch=h.partition_leader_epoch,
        is_transactional=h.is_transactional,
        is_control=h.is_control,
        timestamp_type=h.timestamp_type,
        delete_horizon_ms=delete_horizon_ms,
    )


def empty_batch(h: BatchHeader) -> bytes:
    """A header-only copy of a batch: no records, same offsets and producer fields.

    Written as Kafka's ``DefaultRecordBatch.writeEmptyHeader`` does: compression none, the
    original last offset delta, timestamp type, transactional/control/delete-horizon bits.
    """
    attributes = h.attributes & ~COMPRESSION_MASK
    region = HEADER.pack(
        h.base_offset,
        HEADER_SIZE - LOG_OVERHEAD,
        h.partition_leader_epoch,
        2,
        0,
        attributes,
        h.last_offset_delta,
        h.base_timestamp if attributes & DELETE_HORIZON_BIT else h.max_timestamp,
        h.max_timestamp,
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        0,
    )
    out = bytearray(region)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def iter_file_batches(
    path: str, start: int = 0, end: int | None = None
) -> Iterator[tuple[BatchHeader, bytes]]:
    """Yield ``(header, batch bytes)`` for the batches of a segment file between byte
    positions ``start`` and ``end`` (default: its size when opened). Headers are not
    CRC-checked here; ``decode_batch`` checks each batch it decodes."""
    with open(path, "rb") as f:
        if end is None:
            end = f.seek(0, 2)
        pos = start
        f.seek(pos)
        while pos + HEADER_SIZE <= end:
            head = f.read(HEADER_SIZE)
            if len(head) < HEADER_SIZE:
                return
            header = BatchHeader(0, *HEADER.unpack(head))
            size = header.batch_length + LOG_OVERHEAD
            if size < HEADER_SIZE or pos + size > end:
                return  # a torn tail: recovery's business, not ours
            rest = f.read(size - HEADER_SIZE)
            if len(rest) < size - HEADER_SIZE:
                return
            yield header, head + rest
            pos += size


def next_offset_of_file(path: str) -> int | None:
    """The offset after the last batch in a segment file (reads headers only), or None if
    the file holds no complete batch."""
    last: BatchHeader | None = None
    with open(path, "rb") as f:
        end = f.seek(0, 2)
        pos = 0
        while pos + HEADER_SIZE <= end:
            f.seek(pos)
            head = f.read(HEADER_SIZE)
            header = BatchHeader(pos, *HEADER.unpack(head))
            size = header.batch_length + LOG_OVERHEAD
            if size < HEADER_SIZE or pos + size > end:
                break
            last = header
            pos += size
    return None if last is None else last.next_offset
