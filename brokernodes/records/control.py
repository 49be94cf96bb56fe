"""Kafka's end-transaction marker: the control batch that commits or aborts a transaction.

A marker is a RecordBatch v2 with attributes ``isTransactional | isControl``, the producer's
id and epoch, no sequence (-1), and exactly one record whose

- key is ``version int16 = 0 | type int16`` (0 = ABORT, 1 = COMMIT), and
- value is ``version int16 = 0 | coordinatorEpoch int32``.

The broker writes markers (``Partition.write_txn_marker``) on the transaction coordinator's
word; a client never produces one (the produce validator refuses control batches). Readers
of the log (producer state, the cleaner, read_committed fetches) tell a commit from an abort
by the key's type.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from brokernodes.errors import CorruptRecordError, InvalidRecordError
from brokernodes.records.batch import Record, decode_batch, encode_batch
from brokernodes.records.header import (
    ATTRIBUTES_AT,
    LENGTH_AT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    read_header,
)

__all__ = [
    "ABORT",
    "COMMIT",
    "TxnMarker",
    "decode_txn_marker",
    "encode_txn_marker",
    "marker_is_commit",
    "refuse_transactional",
]

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch
_ATTRIBUTES = struct.Struct(">h")
_LENGTH = struct.Struct(">i")
_VERSION = 0


class TxnMarker(NamedTuple):
    """A decoded end-transaction marker and where it sits."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    timestamp_ms: int
    offset: int


def encode_txn_marker(
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp_ms: int,
    *,
    base_offset: int = 0,
) -> bytes:
    """One control batch ending ``producer_id``'s transaction (the log assigns the offset)."""
    if producer_id < 0 or producer_epoch < 0:
        raise ValueError(
            f"a transaction marker needs a producer id and epoch >= 0, got "
            f"{producer_id}/{producer_epoch}"
        )
    key = _KEY.pack(_VERSION, COMMIT if commit else ABORT)
    value = _VALUE.pack(_VERSION, coordinator_epoch)
    return encode_batch(
        [Record(timestamp_ms, key, value)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
    )


def decode_txn_marker(batch: bytes | bytearray | memoryview) -> TxnMarker:
    """Read the marker of one whole control batch; ``CorruptRecordError`` if it is not one."""
    header = read_header(batch)
    return _decode(header, batch)


def marker_is_commit(header: BatchHeader, buf: bytes | bytearray | memoryview) -> bool:
    """COMMIT (True) or ABORT (False) for the control batch ``header`` describes in ``buf``
    (a buffer of several batches, the header's ``position`` locating it)."""
    end = header.position + header.size
    return _decode(header, memoryview(buf)[header.position : end]).commit


def refuse_transactional(buf: bytes | bytearray, where: str) -> None:
    """Refuse a produce body holding a transactional batch (INVALID_RECORD), for produce
    paths that do not verify it with the transaction coordinator: such a batch would open a
    transaction no coordinator knows of, which no marker ever ends, and hold the partition's
    last stable offset (every read_committed reader) back for good. A malformed body passes
    here and is refused by the append's own validation."""
    if _any_transactional(buf):
        raise InvalidRecordError(
            f"{where} takes no transactional batches (attributes bit 4): a transaction is "
            f"written over the Kafka protocol by a producer with a transactional.id, whose "
            f"coordinator ends it; nothing was appended"
        )


def _any_transactional(buf: bytes | bytearray) -> bool:
    """Whether any batch of ``buf`` has the transactional attribute: a walk over the length
    and attributes fields only (a produce's hot path pays a few hundred nanoseconds)."""
    pos, end = 0, len(buf)
    while pos + ATTRIBUTES_AT + 2 <= end:
        if _ATTRIBUTES.unpack_from(buf, pos + ATTRIBUTES_AT)[0] & TRANSACTIONAL_BIT:
            return True
        length = _LENGTH.unpack_from(buf, pos + LENGTH_AT)[0]
        if length <= 0:
            return False
        pos += LENGTH_AT + 4 + length
    return False


def _decode(header: BatchHeader, batch: bytes | bytearray | memoryview) -> TxnMarker:
    if not header.is_control:
        raise CorruptRecordError(
            f"the batch at offset {header.base_offset} is not a control batch (attributes "
            f"{header.attributes:#x}); it holds no transaction marker"
        )
    records = decode_batch(bytes(batch)).records
    if len(records) != 1:
        raise CorruptRecordError(
            f"control batch at offset {header.base_offset} holds {len(records)} records; "
            f"a transaction marker has exactly one"
        )
    key, value = records[0].key, records[0].value
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(
            f"control record at offset {header.base_offset} has a key of "
            f"{0 if key is None else len(key)} bytes; a marker key is {_KEY.size}"
        )
    version, kind = _KEY.unpack_from(key)
    if version != _VERSION or kind not in (ABORT, COMMIT):
        raise CorruptRecordError(
            f"control record at offset {header.base_offset} has key version {version} type "
            f"{kind}; only version 0 ABORT (0) and COMMIT (1) markers are known"
        )
    coordinator_epoch = -1
    if value is not None and len(value) >= _VALUE.size:
        coordinator_epoch = _VALUE.unpack_from(value)[1]
    return TxnMarker(
        header.producer_id,
        header.producer_epoch,
        kind == COMMIT,
        coordinator_epoch,
        header.max_timestamp,
        header.base_offset,
    )
