"""Zig-zag varints and varlongs, as Kafka's ``ByteUtils`` writes them in records.

A signed value ``v`` is zig-zag mapped (``(v << 1) ^ (v >> 63)``) so small negatives stay
short, then written 7 bits a byte, least significant group first, high bit = "more follows".
Kafka uses varints (int32) for lengths, counts and offset deltas and a varlong (int64) for the
timestamp delta; both share this encoding and differ only in range.

Encoding is table-driven for the values records use most (lengths, counts, small deltas):
``VARINTS[v]`` is the encoding of ``v`` for ``0 <= v < TABLE_SIZE``, and ``NULL_LENGTH`` that
of -1. The batch encoder indexes these tables inline to avoid a call per field.
"""

from __future__ import annotations

from brokernodes.errors import CorruptRecordError, InvalidRecordError

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10

TABLE_SIZE = 1 << 14  # every length below 16 KiB: 1-byte or 2-byte (zig-zagged: 3) encodings


def _encode_zigzag(zigzag: int) -> bytes:
    """Write an already zig-zagged, non-negative value: one byte per 7-bit group."""
    out = bytearray()
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


VARINTS: tuple[bytes, ...] = tuple(_encode_zigzag(v << 1) for v in range(TABLE_SIZE))
NULL_LENGTH = _encode_zigzag(1)  # -1: a null key, value or header value


def encode_varlong(value: int) -> bytes:
    """Zig-zag varlong (int64) encoding of ``value``."""
    if 0 <= value < TABLE_SIZE:
        return VARINTS[value]
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidRecordError(f"value {value} is outside the int64 range of a varlong")
    return _encode_zigzag(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def encode_varint(value: int) -> bytes:
    """Zig-zag varint (int32) encoding of ``value``."""
    if 0 <= value < TABLE_SIZE:
        return VARINTS[value]
    if not INT32_MIN <= value <= INT32_MAX:
        raise InvalidRecordError(f"value {value} is outside the int32 range of a varint")
    return _encode_zigzag(((value << 1) ^ (value >> 63)) & 0xFFFFFFFF)


def size_of_varlong(value: int) -> int:
    """Bytes ``encode_varlong(value)`` takes."""
    zigzag = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    return max(1, (zigzag.bit_length() + 6) // 7)


size_of_varint = size_of_varlong  # same bytes for any value both can hold


def decode_varlong(buf: bytes | bytearray, pos: int) -> tuple[int, int]:
    """Read a zig-zag varlong at ``pos``; return ``(value, position after it)``.

    Raises ``CorruptRecordError`` if the buffer ends inside it or it runs past 10 bytes.
    """
    try:
        byte = buf[pos]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), pos + 1
        zigzag = byte & 0x7F
        shift = 7
        while True:
            pos += 1
            byte = buf[pos]
            zigzag |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
            if shift >= 7 * MAX_VARLONG_BYTES:
                raise CorruptRecordError(
                    f"varint at byte {pos} runs past {MAX_VARLONG_BYTES} bytes"
                )
    except IndexError:
        raise CorruptRecordError(f"buffer ends inside a varint at byte {pos}") from None
    if zigzag >> 64:
        raise CorruptRecordError(f"varint ending at byte {pos} is outside the int64 range")
    return (zigzag >> 1) ^ -(zigzag & 1), pos + 1


def decode_varint(buf: bytes | bytearray, pos: int) -> tuple[int, int]:
    """Read a zig-zag varint (int32) at ``pos``; return ``(value, position after it)``."""
    value, end = decode_varlong(buf, pos)
    if end - pos > MAX_VARINT_BYTES or not INT32_MIN <= value <= INT32_MAX:
        raise CorruptRecordError(f"varint at byte {pos} is outside the int32 range")
    return value, end
