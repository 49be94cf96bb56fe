"""Leader-side rewrites of a produced batch for its topic's configs (Kafka's ``LogValidator``).

- ``set_log_append_time``: ``message.timestamp.type=LogAppendTime``. The attributes'
  timestamp-type bit and the max timestamp are set to the append time and the CRC is
  recomputed, as Kafka's ``DefaultRecordBatch.setMaxTimestamp`` does for a batch validated in
  place. Only header fields change; no record is read. The base timestamp stays (readers of a
  LogAppendTime batch give every record the max timestamp, so the deltas no longer count).
- ``recompress_batch``: ``compression.type`` other than ``producer``. The records section is
  inflated (bounded, as at validation) and deflated with the topic's codec; one batch in, one
  batch out with a new length, codec bits and CRC. Offsets, sequence and producer fields are
  kept, so idempotence and the offsets a leader assigns are unchanged.

Both work on RecordBatch v2 bytes only (sans-IO).
"""

from __future__ import annotations

import struct

from crc32c import crc32c

from brokernodes.records.compression import compress, decompress
from brokernodes.records.header import (
    ATTRIBUTES_AT,
    COMPRESSION_MASK,
    CRC_AT,
    HEADER_SIZE,
    LENGTH_AT,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
)

MAX_TIMESTAMP_AT = 35
_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")
_LENGTH = struct.Struct(">i")


def set_log_append_time(buf: bytearray | memoryview, position: int, now_ms: int) -> None:
    """Stamp the batch at ``position`` with LogAppendTime ``now_ms`` in place, CRC included.

    The CRC covers the records too, so it is computed over the whole batch after the CRC
    field (crc32c runs at memory speed); the records themselves are never parsed.
    """
    view = memoryview(buf)
    (length,) = _LENGTH.unpack_from(view, position + LENGTH_AT)
    (attributes,) = _ATTRIBUTES.unpack_from(view, position + ATTRIBUTES_AT)
    _ATTRIBUTES.pack_into(view, position + ATTRIBUTES_AT, attributes | TIMESTAMP_TYPE_BIT)
    _MAX_TIMESTAMP.pack_into(view, position + MAX_TIMESTAMP_AT, now_ms)
    end = position + LOG_OVERHEAD + length
    _CRC.pack_into(view, position + CRC_AT, crc32c(view[position + ATTRIBUTES_AT : end]))


def recompress_batch(
    buf: bytes | bytearray | memoryview, header: BatchHeader, codec: int, max_inflated: int
) -> bytearray:
    """The batch ``header`` describes in ``buf``, its records section in ``codec``.

    ``max_inflated`` caps the inflation of a compressed source (``MESSAGE_TOO_LARGE`` past
    it). Every header field but the length, the codec bits and the CRC is kept.
    """
    view = memoryview(buf)
    start = header.position
    stop = start + header.size
    records = view[start + HEADER_SIZE : stop]
    if header.compression:
        records = decompress(header.compression, records, max_inflated)
    payload = compress(codec, records) if codec else bytes(records)
    out = bytearray(HEADER_SIZE + len(payload))
    out[:HEADER_SIZE] = view[start : start + HEADER_SIZE]
    out[HEADER_SIZE:] = payload
    _LENGTH.pack_into(out, LENGTH_AT, HEADER_SIZE - LOG_OVERHEAD + len(payload))
    attributes = (header.attributes & ~COMPRESSION_MASK) | codec
    _ATTRIBUTES.pack_into(out, ATTRIBUTES_AT, attributes)
    _CRC.pack_into(out, CRC_AT, crc32c(memoryview(out)[ATTRIBUTES_AT:]))
    return out
