"""The usual Fetch answer encoded directly: one topic, one partition, no error, flexible
versions (12+, what current clients send).

A consumer at the log end gets one such answer per record it is woken for, and the generated
encoder spends more on its dicts, defaults and three tagged-field checks than the rest of the
answer costs. This writes the generated codec's bytes for that answer
(tests/unit/kafka/test_fetch_answer.py compares them): the record data stays a deferred
chunk (open segment slices the connection sends with ``sendfile``) or the live tail's bytes.
"""

from __future__ import annotations

import struct
from typing import Any

from brokernodes.server.protocol.kafka.codec import write_uvarint

FIRST_VERSION = 12  # flexible from here; topic ids from 13
_TOP = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
# partition_index, error_code, high_watermark, last_stable_offset, log_start_offset
_PART = struct.Struct(">ihqqq")
_I32 = struct.Struct(">i")
_ONE = b"\x02"  # a compact array of one element
_TAIL = b"\x00\x00\x00"  # the partition's, the topic's and the answer's tagged fields


def encode_single_answer(
    version: int,
    topic: str | None,
    topic_id: bytes | None,
    index: int,
    high_watermark: int,
    last_stable_offset: int,
    log_start_offset: int,
    aborted_null: bool,
    records: Any,
    throttle_time_ms: int,
) -> tuple[list, int]:
    """(chunks, size) of the body of a Fetch v12+ answer for one partition without an
    error, diverging epoch or leader hint, and no aborted transactions (null for
    read_uncommitted, empty for read_committed). ``records``: bytes, or a deferred value
    with a ``length`` (kept as a chunk of its own)."""
    out = bytearray(_TOP.pack(throttle_time_ms, 0, 0))
    out += _ONE
    if version >= 13:
        out += topic_id if topic_id is not None else bytes(16)
    else:
        name = (topic or "").encode()
        write_uvarint(out, len(name) + 1)
        out += name
    out += _ONE
    out += _PART.pack(index, 0, high_watermark, last_stable_offset, log_start_offset)
    out.append(0 if aborted_null else 1)
    out += _I32.pack(-1)  # preferred_read_replica
    if records is None:
        out.append(0)
    elif isinstance(records, (bytes, bytearray, memoryview)):
        write_uvarint(out, len(records) + 1)
        out += records
    else:
        write_uvarint(out, records.length + 1)
        head = bytes(out)
        return [head, records, _TAIL], len(head) + records.length + len(_TAIL)
    out += _TAIL
    return [bytes(out)], len(out)
