"""Header-only view of RecordBatch v2 (magic 2) for the broker's hot path.

Validates size, magic and CRC-32C and reads every header field without decoding a single
record. Rewrites the two fields that sit before the CRC'd region (base offset and partition
leader epoch) in place. Layout (big-endian), as Kafka's ``DefaultRecordBatch``::

    0  baseOffset int64        27 baseTimestamp int64
    8  batchLength int32       35 maxTimestamp int64
    12 partitionLeaderEpoch    43 producerId int64
    16 magic int8              51 producerEpoch int16
    17 crc uint32              53 baseSequence int32
    21 attributes int16        57 recordsCount int32
    23 lastOffsetDelta int32   61 records...

The CRC covers ``attributes`` up to the end of the batch.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from crc32c import crc32c

from brokernodes.errors import (
    CorruptRecordError,
    MessageTooLargeError,
    UnsupportedCompressionError,
)

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted in batchLength
MAGIC = 2
BASE_OFFSET_AT = 0
LENGTH_AT = 8
PARTITION_LEADER_EPOCH_AT = 12
MAGIC_AT = 16
CRC_AT = 17
ATTRIBUTES_AT = 21

_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_LENGTH_PREFIX = struct.Struct(">qi")

COMPRESSION_MASK = 0x07
MAX_COMPRESSION_ID = 4  # zstd
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40


@dataclass(slots=True)  # a value; not frozen, which costs ~1 us per instance on the hot path
class BatchHeader:
    """The 61-byte header of one batch found at ``position`` in some buffer or file."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_BIT)


def read_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Parse the header at ``position``; checks only that 61 bytes are there."""
    if len(buf) - position < HEADER_SIZE:
        raise CorruptRecordError(
            f"truncated batch header at byte {position}: need {HEADER_SIZE} bytes, "
            f"have {len(buf) - position}"
        )
    return BatchHeader(position, *HEADER.unpack_from(buf, position))


def peek_batch_size(buf: bytes | bytearray | memoryview, position: int = 0) -> int | None:
    """Size of the batch starting at ``position``, or None if even its length is not there.

    A declared length below the v2 minimum raises ``CorruptRecordError``: returning it would
    let a caller that advances by this size loop in place or step backwards.
    """
    if len(buf) - position < LOG_OVERHEAD:
        return None
    batch_length = _LENGTH_PREFIX.unpack_from(buf, position)[1]
    if batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"batch at byte {position} declares length {batch_length}, shorter than the "
            f"{HEADER_SIZE - LOG_OVERHEAD}-byte minimum of a v2 batch"
        )
    return batch_length + LOG_OVERHEAD


def validate_batch(
    buf: bytes | bytearray | memoryview,
    position: int = 0,
    *,
    max_batch_bytes: int | None = None,
    verify_crc: bool = True,
) -> BatchHeader:
    """Check one batch's length, magic, CRC and counts; return its header.

    Raises ``CorruptRecordError`` naming the problem, or ``MessageTooLargeError`` when the
    batch is larger than ``max_batch_bytes``.
    """
    available = len(buf) - position
    if available < HEADER_SIZE:
        _refuse_short(buf, position, available, max_batch_bytes)
    # One unpack of the whole header: this runs once per produced batch.
    fields = HEADER.unpack_from(buf, position)
    _, batch_length, _, magic, crc, attributes, delta, _, _, _, _, _, count = fields
    size = batch_length + LOG_OVERHEAD
    if batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"batch at byte {position} declares length {batch_length}, shorter than the "
            f"{HEADER_SIZE - LOG_OVERHEAD}-byte minimum of a v2 batch"
        )
    if max_batch_bytes is not None and size > max_batch_bytes:
        raise MessageTooLargeError(
            f"batch at byte {position} is {size} bytes, over max.message.bytes={max_batch_bytes}"
        )
    if size > available:
        raise CorruptRecordError(
            f"truncated batch at byte {position}: declares {size} bytes but only "
            f"{available} are present"
        )
    if magic != MAGIC:
        raise CorruptRecordError(
            f"batch at byte {position} has magic {magic}; Sluice accepts only "
            f"RecordBatch v2 (magic 2)"
        )
    if attributes & COMPRESSION_MASK > MAX_COMPRESSION_ID:
        raise UnsupportedCompressionError(
            f"batch at byte {position} names compression codec id "
            f"{attributes & COMPRESSION_MASK}; known ids are 0 (none), 1 (gzip), "
            f"2 (snappy), 3 (lz4) and 4 (zstd)"
        )
    if count < 0 or delta < 0:
        raise CorruptRecordError(
            f"batch at byte {position} has negative record count ({count}) "
            f"or last offset delta ({delta})"
        )
    if verify_crc:
        actual = crc32c(memoryview(buf)[position + ATTRIBUTES_AT : position + size])
        if actual != crc:
            raise CorruptRecordError(
                f"batch at byte {position} fails its CRC-32C check: stored "
                f"{crc:#010x}, computed {actual:#010x}"
            )
    return BatchHeader(position, *fields)


def crc_matches(buf: bytes | bytearray | memoryview, header: BatchHeader) -> bool:
    """Whether the batch ``header`` describes in ``buf`` has the CRC-32C it declares: the one
    check ``validate_batch(..., verify_crc=False)`` leaves out."""
    start = header.position
    return crc32c(memoryview(buf)[start + ATTRIBUTES_AT : start + header.size]) == header.crc


def _refuse_short(
    buf: bytes | bytearray | memoryview,
    position: int,
    available: int,
    max_batch_bytes: int | None,
) -> None:
    """Raise the error that fits a buffer too short to hold even a batch header."""
    if available < LOG_OVERHEAD:
        raise CorruptRecordError(
            f"truncated batch at byte {position}: {available} bytes, less than the "
            f"{LOG_OVERHEAD}-byte offset and length prefix"
        )
    batch_length = _I.unpack_from(buf, position + LENGTH_AT)[0]
    if batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"batch at byte {position} declares length {batch_length}, shorter than the "
            f"{HEADER_SIZE - LOG_OVERHEAD}-byte minimum of a v2 batch"
        )
    size = batch_length + LOG_OVERHEAD
    if max_batch_bytes is not None and size > max_batch_bytes:
        raise MessageTooLargeError(
            f"batch at byte {position} is {size} bytes, over max.message.bytes={max_batch_bytes}"
        )
    raise CorruptRecordError(
        f"truncated batch at byte {position}: declares {size} bytes but only "
        f"{available} are present"
    )


def iter_batches(
    buf: bytes | bytearray | memoryview,
    *,
    max_batch_bytes: int | None = None,
    verify_crc: bool = True,
) -> Iterator[BatchHeader]:
    """Validate and yield every batch in a buffer of back-to-back batches.

    The buffer must end exactly at a batch boundary; anything else raises
    ``CorruptRecordError``.
    """
    position = 0
    end = len(buf)
    while position < end:
        header = validate_batch(
            buf, position, max_batch_bytes=max_batch_bytes, verify_crc=verify_crc
        )
        yield header
        position += header.size


def set_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Rewrite the base offset in place; it lies outside the CRC, so the CRC stays valid."""
    _Q.pack_into(buf, position + BASE_OFFSET_AT, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    """Rewrite the partition leader epoch in place; it lies outside the CRC too."""
    _I.pack_into(buf, position + PARTITION_LEADER_EPOCH_AT, epoch)
