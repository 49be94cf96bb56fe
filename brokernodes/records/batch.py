"""Encode and decode whole RecordBatch v2 batches, records included.

Each record inside a batch is (Kafka's ``DefaultRecord``)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value |
    headersCount varint | (keyLength varint | key utf-8 | valueLength varint | value)*

with -1 as the length of a null key, value or header value. Deltas are relative to the
batch's base offset and base timestamp. The encoder is table-driven (precomputed varints,
one join per batch) because the SDK and the REST produce path encode every record; the broker
itself only ever needs ``header.py``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

from crc32c import crc32c

from brokernodes.errors import CorruptRecordError, InvalidRecordError
from brokernodes.records.compression import Compression, codec_of, compress, decompress
from brokernodes.records.header import (
    CONTROL_BIT,
    DELETE_HORIZON_BIT,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    validate_batch,
)
from brokernodes.records.varint import (
    NULL_LENGTH,
    TABLE_SIZE,
    VARINTS,
    decode_varint,
    encode_varint,
    encode_varlong,
)

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

Headers = Sequence[tuple[str, bytes | None]]

_PREFIX = struct.Struct(">qiibI")  # baseOffset .. crc: the part outside the CRC
_CRC_REGION = struct.Struct(">hiqqqhii")  # attributes .. recordsCount: the CRC'd header part
_ATTRIBUTES = b"\x00"  # record attributes: unused by Kafka, always 0
_EMPTY_HEADERS = VARINTS[0]


class Record(NamedTuple):
    """One record to encode. ``offset_delta`` None means "one after the previous record"."""

    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    offset_delta: int | None = None


class DecodedRecord(NamedTuple):
    """One record read back, with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    """A batch's header and its records, decompressed and decoded (``DecodedRecord`` unless
    ``decode_batch`` was given another ``record_type``)."""

    header: BatchHeader
    records: list[DecodedRecord]

    @property
    def delete_horizon_ms(self) -> int | None:
        """KIP-534: when attributes bit 6 is set, the base timestamp holds the delete horizon."""
        return self.header.base_timestamp if self.header.has_delete_horizon else None


def encode_batch(
    records: Iterable[Record | tuple],
    *,
    base_offset: int = 0,
    compression: int = Compression.NONE,
    compression_level: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: int = 0,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Build one RecordBatch v2, byte for byte as Kafka's ``MemoryRecordsBuilder`` does.

    ``records`` are ``Record`` tuples; plain ``(timestamp, key, value[, headers[,
    offset_delta]])`` tuples work too, a little slower.

    Offset deltas must strictly increase. The base timestamp is the first record's timestamp,
    or ``delete_horizon_ms`` when given (which also sets attributes bit 6); the max timestamp
    is the largest record timestamp. An empty batch gets ``NO_TIMESTAMP`` for both. As in
    Kafka's Java client, a timestamp below -1 (``NO_TIMESTAMP``) is refused.
    """
    parts: list[bytes] = []
    append = parts.append
    varints = VARINTS
    null = NULL_LENGTH
    table_size = TABLE_SIZE
    empty_headers = _EMPTY_HEADERS
    attributes_byte = _ATTRIBUTES
    join = b"".join

    base_timestamp = delete_horizon_ms
    max_timestamp = NO_TIMESTAMP
    offset_delta = -1
    count = 0
    normalized = True
    try:
        if not isinstance(records, list | tuple):
            records = list(records)
        if records and type(records[0]) is not Record:
            if len(records[0]) == 5:
                normalized = False  # full 5-tuples are used as they are
            else:  # plain tuples: fill in defaults
                records = [r if type(r) is Record else Record(*r) for r in records]
        for timestamp, key, value, headers, next_delta in records:
            if next_delta is None:
                offset_delta += 1
            elif next_delta > offset_delta:
                offset_delta = next_delta
            else:
                raise InvalidRecordError(
                    f"record {count} has offset delta {next_delta}, not above the "
                    f"previous {offset_delta}"
                )
            if base_timestamp is None:
                base_timestamp = timestamp
            if timestamp > max_timestamp:
                max_timestamp = timestamp
            elif timestamp < NO_TIMESTAMP:
                raise InvalidRecordError(
                    f"record {count} has negative timestamp {timestamp}; only -1 (none) is allowed"
                )
            delta = timestamp - base_timestamp
            if key is None:
                key_length = null
                key = b""
            else:
                size = len(key)
                key_length = varints[size] if size < table_size else encode_varint(size)
            if value is None:
                value_length = null
                value = b""
            else:
                size = len(value)
                value_length = varints[size] if size < table_size else encode_varint(size)
            body = join(
                (
                    attributes_byte,
                    varints[delta] if 0 <= delta < table_size else encode_varlong(delta),
                    varints[offset_delta]
                    if offset_delta < table_size
                    else encode_varint(offset_delta),
                    key_length,
                    key,
                    value_length,
                    value,
                    _encode_headers(headers) if headers else empty_headers,
                )
            )
            size = len(body)
            append(varints[size] if size < table_size else encode_varint(size))
            append(body)
            count += 1
    except (TypeError, ValueError) as exc:
        if not normalized:  # a shorter plain tuple after full ones: fill in defaults, again
            return encode_batch(
                [r if type(r) is Record else Record(*r) for r in records],
                base_offset=base_offset,
                compression=compression,
                compression_level=compression_level,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=base_sequence,
                partition_leader_epoch=partition_leader_epoch,
                is_transactional=is_transactional,
                is_control=is_control,
                timestamp_type=timestamp_type,
                delete_horizon_ms=delete_horizon_ms,
            )
        raise InvalidRecordError(
            f"record {count} cannot be encoded (expected a Record of timestamp int, key and "
            f"value bytes or None, headers, offset delta): {exc}"
        ) from exc

    attributes = _attributes(
        compression, timestamp_type, is_transactional, is_control, delete_horizon_ms
    )
    payload = join(parts)
    if attributes & 0x07:
        payload = compress(attributes & 0x07, payload, compression_level)
    if base_timestamp is None:
        base_timestamp = NO_TIMESTAMP
    try:
        region = _CRC_REGION.pack(
            attributes,
            max(offset_delta, 0),
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
        prefix = _PREFIX.pack(
            base_offset,
            HEADER_SIZE - LOG_OVERHEAD + len(payload),
            partition_leader_epoch,
            MAGIC,
            crc32c(payload, crc32c(region)),
        )
    except struct.error as exc:
        raise InvalidRecordError(f"batch header field out of range: {exc}") from exc
    return join((prefix, region, payload))


def _attributes(
    compression: int,
    timestamp_type: int,
    is_transactional: bool,
    is_control: bool,
    delete_horizon_ms: int | None,
) -> int:
    attributes = int(codec_of(compression))
    if timestamp_type not in (0, 1):
        raise InvalidRecordError(
            f"timestamp type {timestamp_type} is neither CreateTime (0) nor LogAppendTime (1)"
        )
    if timestamp_type:
        attributes |= TIMESTAMP_TYPE_BIT
    if is_transactional:
        attributes |= TRANSACTIONAL_BIT
    if is_control:
        attributes |= CONTROL_BIT
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_BIT
    return attributes


def _encode_headers(headers: Headers) -> bytes:
    """headersCount, then each header's key (UTF-8 string) and nullable value."""
    varints = VARINTS
    table_size = TABLE_SIZE
    size = len(headers)
    parts = [varints[size] if size < table_size else encode_varint(size)]
    append = parts.append
    for key, value in headers:
        key = key.encode() if type(key) is str else bytes(key)
        size = len(key)
        append(varints[size] if size < table_size else encode_varint(size))
        append(key)
        if value is None:
            append(NULL_LENGTH)
        else:
            size = len(value)
            append(varints[size] if size < table_size else encode_varint(size))
            append(value)
    return b"".join(parts)


def decode_batch(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    max_batch_bytes: int | None = None,
    max_records_bytes: int | None = None,
    verify_crc: bool = True,
    record_type: type[tuple] = DecodedRecord,
    record_prefix: tuple = (),
) -> DecodedBatch:
    """Validate the batch at ``pos`` (length, magic, CRC) and decode all its records.

    ``max_records_bytes`` bounds the decompressed records section, so a small compressed
    batch cannot expand without limit (None: ``compression.DEFAULT_MAX_INFLATED_BYTES``).
    Each record is a ``record_type`` built from ``record_prefix + (offset, timestamp, key,
    value, headers)``: a NamedTuple with leading fields of its own (a consumer's topic and
    partition) is made directly, without a ``DecodedRecord`` to copy it from. Raises
    ``CorruptRecordError`` for malformed bytes, ``InvalidRecordError`` when the record count
    disagrees with the records present,
    ``UnsupportedCompressionError`` and ``MessageTooLargeError`` as their names say.
    """
    header = validate_batch(buf, pos, max_batch_bytes=max_batch_bytes, verify_crc=verify_crc)
    codec = codec_of(header.compression)
    data = bytes(buf[pos + HEADER_SIZE : pos + header.size])
    if codec is not Compression.NONE:
        data = decompress(codec, data, max_records_bytes)
    log_append_time = header.max_timestamp if header.timestamp_type else None
    records = _decode_records(
        data,
        header.records_count,
        header.base_offset,
        header.base_timestamp,
        log_append_time,
        _new_record if record_type is DecodedRecord else partial(tuple.__new__, record_type),
        record_prefix,
    )
    return DecodedBatch(header, records)


def decode_batches(
    buf: bytes | bytearray | memoryview,
    *,
    max_batch_bytes: int | None = None,
    max_records_bytes: int | None = None,
    verify_crc: bool = True,
) -> list[DecodedBatch]:
    """Decode every batch in a buffer of back-to-back batches that ends on a boundary."""
    batches = []
    pos = 0
    end = len(buf)
    while pos < end:
        batch = decode_batch(
            buf,
            pos,
            max_batch_bytes=max_batch_bytes,
            max_records_bytes=max_records_bytes,
            verify_crc=verify_crc,
        )
        batches.append(batch)
        pos += batch.header.size
    return batches


def _decode_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    make: Callable[[tuple], tuple],
    prefix: tuple,
) -> list:
    """Decode ``count`` records filling ``data`` exactly, each ``make(prefix + fields)``.

    Varints of one and two bytes (values below 8192) are decoded inline: they cover nearly
    every field of ordinary records and save a function call per field. Each is read as its
    raw zig-zag form ``z`` and mapped back with ``(z >> 1) ^ -(z & 1)``.
    """
    records = []
    append = records.append
    pos = 0
    end = len(data)
    slow = _read_zigzag
    for index in range(count):
        if pos >= end:
            raise InvalidRecordError(f"batch declares {count} records but holds only {index}")
        try:
            # length
            z = data[pos]
            if z < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (z & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                z, pos = slow(data, pos, 5)
            length = (z >> 1) ^ -(z & 1)
            start = pos
            record_end = pos + length
            if length < 6 or record_end > end:
                raise CorruptRecordError(
                    f"record {index} declares length {length} but {end - pos} bytes remain"
                )
            pos += 1  # attributes: unused
            # timestampDelta (a varlong)
            z = data[pos]
            if z < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (z & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                z, pos = slow(data, pos, 10)
            timestamp_delta = (z >> 1) ^ -(z & 1)
            # offsetDelta
            z = data[pos]
            if z < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (z & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                z, pos = slow(data, pos, 5)
            offset_delta = (z >> 1) ^ -(z & 1)
            # key
            z = data[pos]
            if z == 1:
                key = None
                pos += 1
            else:
                if z < 0x80:
                    pos += 1
                elif data[pos + 1] < 0x80:
                    z = (z & 0x7F) | (data[pos + 1] << 7)
                    pos += 2
                else:
                    z, pos = slow(data, pos, 5)
                if z & 1:
                    raise CorruptRecordError(f"record {index} has key length {-(z + 1) // 2}")
                key = data[pos : pos + (z >> 1)]
                pos += z >> 1
            # value
            z = data[pos]
            if z == 1:
                value = None
                pos += 1
            else:
                if z < 0x80:
                    pos += 1
                elif data[pos + 1] < 0x80:
                    z = (z & 0x7F) | (data[pos + 1] << 7)
                    pos += 2
                else:
                    z, pos = slow(data, pos, 5)
                if z & 1:
                    raise CorruptRecordError(f"record {index} has value length {-(z + 1) // 2}")
                value = data[pos : pos + (z >> 1)]
                pos += z >> 1
            # headers
            if data[pos] == 0:
                headers = []
                pos += 1
            else:
                headers, pos = _decode_headers(data, pos, index)
        except IndexError:
            raise CorruptRecordError(f"record {index} runs past the end of the batch") from None
        if pos != record_end:
            raise CorruptRecordError(
                f"record {index} declares length {length} but its fields take {pos - start}"
            )
        append(
            make(
                prefix  # noqa: RUF005 - a tuple concatenation is 3x faster than unpacking
                + (
                    base_offset + offset_delta,
                    base_timestamp + timestamp_delta
                    if log_append_time is None
                    else log_append_time,
                    key,
                    value,
                    headers,
                )
            )
        )
    if pos != end:
        raise InvalidRecordError(
            f"batch declares {count} records but {end - pos} bytes remain after them"
        )
    return records


_new_record = partial(tuple.__new__, DecodedRecord)  # skips NamedTuple's Python-level __new__


def _read_zigzag(data: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    """Slow path: the raw (still zig-zagged) varint at ``pos``, at most ``max_bytes`` long."""
    z = 0
    shift = 0
    for i in range(pos, pos + max_bytes):
        byte = data[i]
        z |= (byte & 0x7F) << shift
        if byte < 0x80:
            if (max_bytes == 5 and z > 0xFFFFFFFF) or z >> 64:
                break
            return z, i + 1
        shift += 7
    raise CorruptRecordError(f"varint at byte {pos} is longer than {max_bytes} bytes or too big")


def _decode_headers(data: bytes, pos: int, index: int) -> tuple[list, int]:
    """A record's headers: count, then (key, nullable value) pairs."""
    count, pos = decode_varint(data, pos)
    if count < 0:
        raise CorruptRecordError(f"record {index} has header count {count}")
    headers = []
    append = headers.append
    slow = _read_zigzag
    for _ in range(count):
        z = data[pos]
        if z < 0x80:
            pos += 1
        else:
            z, pos = slow(data, pos, 5)
        if z & 1:
            raise CorruptRecordError(f"record {index} has a header key of negative length")
        end = pos + (z >> 1)
        try:
            key = data[pos:end].decode()
        except UnicodeDecodeError:
            raise CorruptRecordError(f"record {index} has a header key that is not UTF-8") from None
        pos = end
        z = data[pos]
        if z == 1:
            value = None
            pos += 1
        else:
            if z < 0x80:
                pos += 1
            else:
                z, pos = slow(data, pos, 5)
            if z & 1:
                raise CorruptRecordError(f"record {index} has a header value of negative length")
            end = pos + (z >> 1)
            value = data[pos:end]
            pos = end
        append((key, value))
    return headers, pos
