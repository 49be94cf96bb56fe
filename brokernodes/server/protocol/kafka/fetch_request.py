"""The usual Fetch request decoded directly: one topic, one partition, flexible versions.

A consumer at the log end of one partition sends the same small Fetch after every answer;
the generated decoder walks it through its general array, string, uuid and tagged-field
readers. This reads the same message for v12-17 with fixed offsets and answers the same dict
the generated decoder does (tests/unit/kafka/test_fetch_request.py compares them per
version), or None for anything else (several topics or partitions, forgotten topics, any
tagged field, a long topic name or rack id, a malformed or truncated message), which then
goes to the generated decoder and its errors.
"""

from __future__ import annotations

import struct

FIRST_VERSION = 12  # flexible from here; topic ids from 13, the replica id a tag from 15
_I32 = struct.Struct(">i")
# max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch
_TOP = struct.Struct(">iiibii")
# partition, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset,
# partition_max_bytes
_PART = struct.Struct(">iiqiqi")
_NO_UUID = bytes(16)


def decode_single(buf, pos: int, version: int) -> dict | None:
    """The request body at ``buf[pos:]`` when it is the usual one, else None."""
    if version < FIRST_VERSION:
        return None
    try:
        return _flexible(buf, pos, version)
    except (IndexError, struct.error, UnicodeDecodeError):
        return None


def _flexible(buf, pos: int, version: int) -> dict | None:
    if version < 15:
        (replica_id,) = _I32.unpack_from(buf, pos)
        pos += 4
    else:
        replica_id = -1
    max_wait_ms, min_bytes, max_bytes, isolation, session_id, session_epoch = _TOP.unpack_from(
        buf, pos
    )
    pos += _TOP.size
    if buf[pos] != 2:  # a compact array of one topic
        return None
    pos += 1
    if version >= 13:
        topic, topic_id = "", bytes(buf[pos : pos + 16])
        if len(topic_id) != 16:
            return None
        pos += 16
    else:
        n = buf[pos]  # the name's length + 1, in one varint byte
        if n < 2 or n >= 0x80:
            return None
        topic, topic_id = str(buf[pos + 1 : pos + n], "utf-8"), _NO_UUID
        pos += n
    if buf[pos] != 2:  # one partition
        return None
    partition, leader_epoch, offset, last_epoch, log_start, part_max = _PART.unpack_from(
        buf, pos + 1
    )
    pos += 1 + _PART.size
    # the partition's and the topic's empty tagged fields, no forgotten topics (an empty
    # compact array)
    if buf[pos] or buf[pos + 1] or buf[pos + 2] != 1:
        return None
    n = buf[pos + 3]  # the rack id's length + 1, in one varint byte
    if n < 1 or n >= 0x80:
        return None
    rack_end = pos + 3 + n
    if rack_end >= len(buf) or buf[rack_end]:  # then the request's tagged fields: none
        return None
    rack = str(buf[pos + 4 : rack_end], "utf-8")
    return {
        "cluster_id": None,
        "replica_id": replica_id,
        "replica_state": {"replica_id": -1, "replica_epoch": -1},
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": isolation,
        "session_id": session_id,
        "session_epoch": session_epoch,
        "topics": [
            {
                "topic": topic,
                "topic_id": topic_id,
                "partitions": [
                    {
                        "replica_directory_id": _NO_UUID,
                        "partition": partition,
                        "current_leader_epoch": leader_epoch,
                        "fetch_offset": offset,
                        "last_fetched_epoch": last_epoch,
                        "log_start_offset": log_start,
                        "partition_max_bytes": part_max,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": rack,
    }
