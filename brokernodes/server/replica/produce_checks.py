"""Produce-time record checks for a leader's append (Kafka's ``LogValidator``).

``check_produce`` runs ``records.validator`` over every batch of a produce request before
anything is appended, with the topic's rules (KIP-937 timestamps, keys on compacted topics)
and the broker's inflation limit (``max.inflation.ratio`` x max.message.bytes). A bad batch
refuses the whole request and nothing is stored.

Inflating and walking a compressed batch, or a request of many records, runs in one of
``CHECK_THREADS`` worker threads of its own: zlib, lz4 and zstd release the GIL while they
inflate and the interpreter switches threads every few milliseconds, so the event loop keeps
answering other tenants meanwhile. A pool of its own keeps a flood of bombs from taking the
threads appends use, and few threads bound the memory inflation holds (each thread's malloc
arena keeps what it inflated, up to about twice the cap).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from brokernodes.errors import SluiceError
from brokernodes.records.compression import max_inflated_bytes
from brokernodes.records.header import BatchHeader
from brokernodes.records.validator import RecordRules, validate_records
from brokernodes.storage.config import MAX_LONG, LogConfig

T = TypeVar("T")
THREAD_RECORDS = 4096
"""A request holding more records than this (uncompressed) is checked off the loop."""
CHECK_THREADS = 2

_checkers = ThreadPoolExecutor(max_workers=CHECK_THREADS, thread_name_prefix="produce-checks")


def record_rules(config: LogConfig, inflation_ratio: int) -> RecordRules:
    """The rules a partition's produced records must meet. A LogAppendTime topic replaces
    the producer's timestamps with the append time, so the KIP-937 bounds do not apply
    (Kafka checks them for CreateTime topics only)."""
    append_time = config.log_append_time
    return RecordRules(
        max_inflated_bytes=max_inflated_bytes(config.max_message_bytes, inflation_ratio),
        timestamp_before_max_ms=MAX_LONG if append_time else config.message_timestamp_before_max_ms,
        timestamp_after_max_ms=MAX_LONG if append_time else config.message_timestamp_after_max_ms,
        require_keys=config.compact_enabled,
    )


def check_batches(
    buf: bytes | bytearray, headers: Sequence[BatchHeader], rules: RecordRules, now_ms: int
) -> None:
    """Validate every batch's records; the error names the batch and says nothing was stored."""
    for index, h in enumerate(headers):
        try:
            validate_records(buf, h, rules, now_ms)
        except SluiceError as e:
            raise type(e)(
                f"batch {index} of the request (byte {h.position}) is refused: {e.message}; "
                f"nothing was appended"
            ) from e


async def off_loop(fn: Callable[..., T], *args: object) -> T:
    """Run ``fn(*args)`` in the produce-check threads (inflating and deflating work)."""
    return await asyncio.get_running_loop().run_in_executor(_checkers, fn, *args)


_RULES: dict[int, tuple[LogConfig, int, RecordRules]] = {}
_RULES_MAX = 4096


def rules_of(config: LogConfig, inflation_ratio: int) -> RecordRules:
    """``record_rules``, built once per config object (configs are immutable and replaced
    whole when a topic's config changes, so identity is the key; bounded)."""
    cached = _RULES.get(id(config))
    if cached is not None and cached[0] is config and cached[1] == inflation_ratio:
        return cached[2]
    rules = record_rules(config, inflation_ratio)
    if len(_RULES) >= _RULES_MAX:
        _RULES.clear()
    _RULES[id(config)] = (config, inflation_ratio, rules)
    return rules


async def check_produce(
    buf: bytearray, headers: Sequence[BatchHeader], config: LogConfig, inflation_ratio: int
) -> None:
    """``check_batches`` with the partition's rules, off the loop when it may take long."""
    rules = rules_of(config, inflation_ratio)
    now_ms = int(time.time() * 1000)
    if any(h.compression for h in headers) or (
        sum(h.records_count for h in headers) > THREAD_RECORDS
    ):
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(_checkers, check_batches, buf, headers, rules, now_ms)
    else:
        check_batches(buf, headers, rules, now_ms)
