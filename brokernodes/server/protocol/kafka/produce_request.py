"""The usual Produce request decoded directly: one topic, one partition, no transaction.

A producer with linger.ms 0 sends one partition per request; the generated decoder walks
that request through its general array, string and tagged-field readers. This reads the
same message for v3-11 with fixed offsets and answers the same dict the generated decoder
does (tests/unit/kafka/test_produce_request.py compares them per version), or None for
anything else (a transactional id, several topics or partitions, null records, tagged
fields, a malformed or truncated message), which then goes to the generated decoder and its
errors.
"""

from __future__ import annotations

import struct

FLEXIBLE_FROM = 9
_ACKS_TIMEOUT = struct.Struct(">hi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def decode_single(buf: bytes, pos: int, version: int) -> dict | None:
    """The request body at ``buf[pos:]`` when it is the usual one, else None."""
    try:
        if version >= FLEXIBLE_FROM:
            return _flexible(buf, pos)
        return _classic(buf, pos)
    except (IndexError, struct.error, UnicodeDecodeError):
        return None


def _flexible(buf: bytes, pos: int) -> dict | None:
    if buf[pos] != 0:  # a transactional id (compact nullable string; 0 is null)
        return None
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos + 1)
    pos += 7
    if buf[pos] != 2:  # a compact array of one topic
        return None
    n = buf[pos + 1]  # the name's length + 1, in one varint byte
    if n < 2 or n >= 0x80:
        return None
    name_end = pos + 1 + n
    name = str(buf[pos + 2 : name_end], "utf-8")
    if buf[name_end] != 2:  # one partition
        return None
    (index,) = _I32.unpack_from(buf, name_end + 1)
    pos = name_end + 5
    size = shift = 0  # the records' length + 1, an unsigned varint
    while True:
        b = buf[pos]
        pos += 1
        size |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 28:
            return None
    size -= 1
    end = pos + size
    # then three empty tagged-field sections: the partition's, the topic's, the request's
    if size < 0 or end + 3 > len(buf) or buf[end] or buf[end + 1] or buf[end + 2]:
        return None
    return _message(acks, timeout_ms, name, index, memoryview(buf)[pos:end])


def _classic(buf: bytes, pos: int) -> dict | None:
    if _I16.unpack_from(buf, pos)[0] != -1:  # a transactional id
        return None
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos + 2)
    pos += 8
    if _I32.unpack_from(buf, pos)[0] != 1:  # one topic
        return None
    (n,) = _I16.unpack_from(buf, pos + 4)
    name_end = pos + 6 + n
    if n < 0 or name_end > len(buf):
        return None
    name = str(buf[pos + 6 : name_end], "utf-8")
    if _I32.unpack_from(buf, name_end)[0] != 1:  # one partition
        return None
    index, size = struct.unpack_from(">ii", buf, name_end + 4)
    pos = name_end + 12
    end = pos + size
    if size < 0 or end > len(buf):
        return None
    return _message(acks, timeout_ms, name, index, memoryview(buf)[pos:end])


def _message(acks: int, timeout_ms: int, name: str, index: int, records) -> dict:
    partition = {"index": index, "records": records}
    topic = {"name": name, "partition_data": [partition]}
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": timeout_ms,
        "topic_data": [topic],
    }
