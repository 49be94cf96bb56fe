"""The append validator (Kafka's ``LogValidator``): checks a request's batches before a write.

Pure: it reads batch headers (``records.header``: size, magic, CRC-32C, ``max.message.bytes``)
and decides the offsets each batch gets, touching no file. As leader every batch must
declare as many records as its offset delta spans, and offsets are assigned from the log
end; as follower the batches keep their offsets, which must continue the log without a gap
(a compacted log may skip offsets between batches, never below the log end). Any bad batch
refuses the whole request with an error naming it, and nothing is rewritten: the offsets
and leader epochs are set in the buffer only once every batch passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from brokernodes.errors import InvalidRecordError, SluiceError
from brokernodes.records.header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    crc_matches,
    peek_batch_size,
    set_base_offset,
    set_partition_leader_epoch,
    validate_batch,
)
from brokernodes.storage.segment import BatchEntry

__all__ = ["PreparedAppend", "single_batch_header", "validate_batches"]


@dataclass(slots=True)
class PreparedAppend:
    """A validated request: the mutable buffer, one ``BatchEntry`` per batch (position in
    the buffer, size, final last offset, max timestamp) and, as follower, batch epochs."""

    buf: bytearray | memoryview
    entries: list[BatchEntry] = field(default_factory=list)
    bases: list[int] = field(default_factory=list)
    epochs: list[int] = field(default_factory=list)
    records: int = 0


def single_batch_header(
    records: bytes | bytearray | memoryview,
    max_message_bytes: int,
    parsed: BatchHeader | None = None,
) -> BatchHeader | None:
    """The header of a request that is exactly one valid batch declaring as many records as
    its offset delta spans (the leader's fast path); None for anything else, which
    ``validate_batches`` then accepts or refuses with the reason. ``parsed`` is the caller's
    header of ``records`` from ``validate_batch(..., verify_crc=False)`` (every check but
    the CRC made, as the leader's produce walks its request): the header is then not read
    again, only the CRC is computed."""
    n = len(records)
    if parsed is not None and parsed.position == 0 and parsed.size == n:
        if n > max_message_bytes or not crc_matches(records, parsed):
            return None
        h = parsed
    else:
        try:
            if n < HEADER_SIZE or peek_batch_size(records) != n:
                return None
            h = validate_batch(records, 0, max_batch_bytes=max_message_bytes)
        except SluiceError:
            return None
    if h.records_count != h.last_offset_delta + 1:
        return None
    return h


def validate_batches(
    records: bytes | bytearray | memoryview,
    *,
    next_offset: int,
    assign_offsets: bool,
    leader_epoch: int | None,
    max_message_bytes: int,
    compacted: bool,
) -> PreparedAppend:
    """Validate every batch and compute final offsets (from ``next_offset``, the log end
    offset); rewrite them in the buffer only if all pass. ``bytes`` are copied once, a
    writable buffer is rewritten in place."""
    if isinstance(records, bytearray) or (isinstance(records, memoryview) and not records.readonly):
        buf = records
    else:
        buf = bytearray(records)
    n = len(buf)
    if n == 0:
        raise InvalidRecordError("the request holds no record batch; nothing was appended")
    prepared = PreparedAppend(buf)
    entries = prepared.entries
    bases = prepared.bases
    epochs = prepared.epochs
    pos = 0
    index = 0
    records_total = 0
    validate = validate_batch
    while pos < n:
        try:
            h = validate(buf, pos, max_batch_bytes=max_message_bytes)
        except SluiceError as e:
            raise type(e)(
                f"batch {index} of the request (byte {pos}) is refused: {e.message}; "
                f"nothing was appended"
            ) from e
        delta = h.last_offset_delta
        count = h.records_count
        if assign_offsets:
            if count != delta + 1 or count < 1:
                raise InvalidRecordError(
                    f"batch {index} of the request (byte {pos}) declares {count} records "
                    f"but last offset delta {delta}; nothing was appended"
                )
            base = next_offset
        else:
            base = h.base_offset
            if base < next_offset or (base > next_offset and not compacted):
                what = "the log end offset" if index == 0 else "the previous batch's end"
                how = "below" if base < next_offset else "past"
                raise InvalidRecordError(
                    f"batch {index} of the request (byte {pos}) has base offset {base}, "
                    f"{how} {what} {next_offset}: replicated offsets must continue the "
                    f"log without a gap; nothing was appended"
                )
            epochs.append(h.partition_leader_epoch)
        next_offset = base + delta + 1
        size = h.batch_length + LOG_OVERHEAD
        entries.append((pos, size, next_offset - 1, h.max_timestamp))
        bases.append(base)
        records_total += count
        pos += size
        index += 1
    prepared.records = records_total
    if assign_offsets:
        # Every batch passed: now rewrite offsets (and epochs) in place, outside the CRC.
        for (pos, _, _, _), base in zip(entries, bases, strict=True):
            set_base_offset(buf, pos, base)
            if leader_epoch is not None:
                set_partition_leader_epoch(buf, pos, leader_epoch)
    return prepared
