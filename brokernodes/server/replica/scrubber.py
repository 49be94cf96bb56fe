"""The follower scrubber: find corrupted batches in sealed segments and re-fetch them.

Recovery verifies CRCs only above the recovery point, and reads (zero-copy) never do, so a
bit flipped in a sealed, flushed segment would sit there unnoticed and be served if this
replica became leader. For every partition this broker *follows*, a pass (every
``--scrub-interval-ms``, default an hour) re-reads each sealed segment and verifies every
batch (length, magic, CRC-32C). At the first bad batch the follower truncates its log to
the end of the last good batch before it; its fetcher then fetches the rest again from the
leader, whose copy is intact. A leader's own corruption is only logged: there is nobody to
re-fetch from (its consumers verify CRCs and refuse the batch).

Blocking file reads: ``find_corruption`` runs in a worker thread.
"""

from __future__ import annotations

import logging

from brokernodes.errors import SluiceError
from brokernodes.records.header import LOG_OVERHEAD, peek_batch_size, validate_batch

logger = logging.getLogger("sluice.broker.scrubber")

READ_CHUNK = 8 * 1024 * 1024


def find_corruption(path: str, base_offset: int, size: int) -> tuple[int, int] | None:
    """``(byte position, offset to truncate to)`` of the first bad batch in the first
    ``size`` bytes of a segment file, or None when every batch is whole and intact."""
    with open(path, "rb") as f:
        data = f.read(size)
    pos = 0
    next_offset = base_offset
    while pos < len(data):
        batch_size = peek_batch_size(data, pos)
        if batch_size is None or batch_size < LOG_OVERHEAD or pos + batch_size > len(data):
            return pos, next_offset
        try:
            h = validate_batch(data, pos)
        except SluiceError:
            return pos, next_offset
        next_offset = h.base_offset + h.last_offset_delta + 1
        pos += batch_size
    return None


def sealed_segments(log) -> list[tuple[str, int, int]]:
    """(path, base offset, size) of every segment but the active one."""
    with log.lock:
        segs = list(log.segments)
        return [(s.log_path, s.base_offset, s.size) for s in segs[:-1]]
