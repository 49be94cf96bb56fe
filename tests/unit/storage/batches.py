"""Test helper: a tiny uncompressed RecordBatch v2 builder (storage tests need valid batches;
storage itself never decodes records)."""

from __future__ import annotations

import struct

from crc32c import crc32c

from brokernodes.records.header import CRC_AT, HEADER, read_header


def _varint(v: int) -> bytes:
    z = (v << 1) ^ (v >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def make_batch(
    values: list[bytes] | int,
    *,
    base_offset: int = 0,
    timestamp: int = 1_000,
    timestamps: list[int] | None = None,
    epoch: int = -1,
    last_offset_delta: int | None = None,
    magic: int = 2,
) -> bytes:
    """One batch; ``values`` is a list of record values or a record count."""
    if isinstance(values, int):
        values = [b"v%d" % i for i in range(values)]
    if timestamps is None:
        timestamps = [timestamp + i for i in range(len(values))]
    base_ts = timestamps[0] if timestamps else timestamp
    records = bytearray()
    for i, (value, ts) in enumerate(zip(values, timestamps, strict=True)):
        body = (
            b"\x00"
            + _varint(ts - base_ts)
            + _varint(i)
            + _varint(-1)
            + _varint(len(value))
            + value
            + _varint(0)
        )
        records += _varint(len(body)) + body
    n = len(values)
    delta = n - 1 if last_offset_delta is None else last_offset_delta
    header = HEADER.pack(
        base_offset,
        HEADER.size - 12 + len(records),
        epoch,
        magic,
        0,
        0,
        delta,
        base_ts,
        max(timestamps) if timestamps else base_ts,
        -1,
        -1,
        -1,
        n,
    )
    buf = bytearray(header + records)
    struct.pack_into(">I", buf, CRC_AT, crc32c(memoryview(buf)[CRC_AT + 4 :]))
    return bytes(buf)


def batch_offsets(data: bytes) -> tuple[int, int]:
    h = read_header(data)
    return h.base_offset, h.last_offset


def split_batches(data: bytes) -> list[bytes]:
    """Cut back-to-back batches apart (by header lengths)."""
    out = []
    pos = 0
    while pos < len(data):
        h = read_header(data, pos)
        out.append(bytes(data[pos : pos + h.size]))
        pos += h.size
    return out


def with_base_offset(data: bytes, base_offset: int) -> bytes:
    return struct.pack(">q", base_offset) + data[8:]
