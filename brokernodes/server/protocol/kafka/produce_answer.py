"""The usual Produce answer encoded directly: one topic, one partition, no error.

A producer with linger.ms 0 sends one partition per request, and the generated encoder
spends more time on that answer's dicts, defaults and tagged-field sections than the rest of
the answer costs together. This writes the same bytes the generated codec writes for such an
answer (v3-11; tests/unit/protocol/test_kafka_produce_answer.py compares them), from a
per-topic prefix built once and a fixed tail packed per request.
"""

from __future__ import annotations

import functools
import struct

from brokernodes.server.protocol.kafka.codec import write_uvarint

FLEXIBLE_FROM = 9
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
# index, error_code, base_offset, log_append_time_ms, log_start_offset (v5+)
_PART_V3 = struct.Struct(">ihqq")
_PART_V5 = struct.Struct(">ihqqq")


@functools.lru_cache(maxsize=4096)
def _prefix(version: int, topic: str) -> bytes:
    """The answer up to the partition: one topic named ``topic`` holding one partition."""
    name = topic.encode()
    out = bytearray()
    if version >= FLEXIBLE_FROM:
        out.append(2)  # compact array of one topic
        write_uvarint(out, len(name) + 1)
        out += name
        out.append(2)  # compact array of one partition
    else:
        out += _I32.pack(1)
        out += _I16.pack(len(name))
        out += name
        out += _I32.pack(1)
    return bytes(out)


@functools.cache
def _suffix(version: int) -> tuple[bytes, bytes]:
    """(after the partition's fixed fields, after the topic) minus the throttle time."""
    if version >= FLEXIBLE_FROM:
        # record_errors: empty compact array, error_message: null, no tagged fields;
        # then the topic's tagged fields
        return b"\x01\x00\x00", b"\x00"
    if version >= 8:
        return _I32.pack(0) + _I16.pack(-1), b""  # record_errors [], error_message null
    return b"", b""


def encode_single_answer(
    version: int,
    topic: str,
    index: int,
    base_offset: int,
    log_append_time_ms: int,
    log_start_offset: int,
    throttle_time_ms: int,
) -> bytes:
    """The body of a Produce v3-11 answer for one partition appended without error."""
    if version >= 5:
        part = _PART_V5.pack(index, 0, base_offset, log_append_time_ms, log_start_offset)
    else:
        part = _PART_V3.pack(index, 0, base_offset, log_append_time_ms)
    after_part, after_topic = _suffix(version)
    tail = _I32.pack(throttle_time_ms)
    if version >= FLEXIBLE_FROM:
        tail += b"\x00"  # the answer's tagged fields (no node endpoints: nothing moved)
    return b"".join((_prefix(version, topic), part, after_part, after_topic, tail))
