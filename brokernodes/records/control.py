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

from brokernodes.errors import CorruptRecordError
from brokernodes.records.batch import Record, decode_batch, encode_batch
from brokernodes.records.header import BatchHeader, read_header

__all__ = [
    "ABORT",
    "COMMIT",
    "TxnMarker",
    "decode_txn_marker",
    "encode_txn_marker",
    "marker_is_commit",
]

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch
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
