"""Shared helpers for the cleaner tests: a small compacted log, a model and a reader."""

from __future__ import annotations

from brokernodes.records.batch import Record, decode_batches, encode_batch
from brokernodes.storage.config import LogConfig
from brokernodes.storage.log import PartitionLog

T0 = 1_700_000_000_000
DAY = 86_400_000


def config(**kw) -> LogConfig:
    args = {
        "segment_bytes": 400,
        "cleanup_policy": "compact",
        "delete_retention_ms": DAY,
        "min_cleanable_dirty_ratio": 0.0,
        "index_interval_bytes": 128,
    }
    args.update(kw)
    return LogConfig(**args)


def open_log(path, **kw) -> PartitionLog:
    return PartitionLog(path, config(**kw), clock=lambda: T0, fsync=False)


def append(log: PartitionLog, pairs, ts=T0) -> int:
    """Append ``(key, value)`` pairs as one batch; returns the first offset."""
    records = [Record(ts, k, v) for k, v in pairs]
    info = log.append(encode_batch(records))
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset


def read_all(log: PartitionLog):
    """Every record of the log as ``(offset, key, value)``, read through ``log.read``."""
    if log.log_start_offset == log.log_end_offset:
        return []
    data = log.read(log.log_start_offset, 1 << 30).read_bytes()
    return [
        (r.offset, r.key, r.value)
        for b in decode_batches(data)
        for r in b.records
        if r.offset >= log.log_start_offset
    ]


def latest(records):
    """key -> (offset, value) of the last record of each key."""
    out = {}
    for offset, key, value in records:
        out[key] = (offset, value)
    return out


def compacted_model(records, end, *, drop_tombstones=False):
    """What compaction of everything below ``end`` must leave."""
    last = latest([r for r in records if r[0] < end])
    out = []
    for offset, key, value in records:
        if offset >= end:
            out.append((offset, key, value))
        elif key is not None and last[key][0] == offset:
            if value is None and drop_tombstones:
                continue
            out.append((offset, key, value))
    return out
