"""A leader's rewrite of a produce request for its topic's configs, before the append.

``compression.type`` other than ``producer`` recompresses every batch sent in another codec
(``records.rewrite.recompress_batch``); ``message.timestamp.type=LogAppendTime`` stamps every
batch with one append time (``records.rewrite.set_log_append_time``). Followers copy the
leader's bytes, so both happen once, here. A topic with Kafka's defaults (CreateTime,
``producer``) never comes here: ``LogConfig.rewrites_batches`` is checked once per append.

A stored batch must still fit ``max.message.bytes`` (Kafka re-checks sizes after
recompressing): a batch that grows past it when decompressed for ``uncompressed`` is refused
with MESSAGE_TOO_LARGE and nothing is appended.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from brokernodes.errors import MessageTooLargeError
from brokernodes.records.compression import max_inflated_bytes
from brokernodes.records.header import BatchHeader, iter_batches
from brokernodes.records.rewrite import recompress_batch, set_log_append_time
from brokernodes.server.replica.produce_checks import off_loop
from brokernodes.storage.config import LogConfig

NO_TIMESTAMP = -1


@dataclass(slots=True)
class Rewritten:
    """The request as it will be stored: its bytes, their headers, and the append time
    (-1 unless the topic is LogAppendTime)."""

    buf: bytearray
    headers: list[BatchHeader]
    log_append_time: int = NO_TIMESTAMP


def rewrite_batches(
    buf: bytearray,
    headers: Sequence[BatchHeader],
    config: LogConfig,
    max_inflated: int,
    now_ms: int,
) -> Rewritten:
    """Recompress and stamp the batches of a validated request (pure: bytes in, bytes out)."""
    codec = config.compression_codec
    if codec is not None and any(h.compression != codec for h in headers):
        parts: list[bytes | bytearray | memoryview] = []
        for index, h in enumerate(headers):
            if h.compression == codec:
                parts.append(memoryview(buf)[h.position : h.position + h.size])
                continue
            batch = recompress_batch(buf, h, codec, max_inflated)
            if len(batch) > config.max_message_bytes:
                raise MessageTooLargeError(
                    f"batch {index} of the request is {len(batch)} bytes once stored with "
                    f"compression.type={config.compression_type}, over max.message.bytes="
                    f"{config.max_message_bytes}; send smaller batches (nothing was appended)"
                )
            parts.append(batch)
        buf = bytearray().join(parts)
        headers = list(iter_batches(buf, verify_crc=False))
    append_time = NO_TIMESTAMP
    if config.log_append_time:
        append_time = now_ms
        for h in headers:
            set_log_append_time(buf, h.position, now_ms)
        headers = list(iter_batches(buf, verify_crc=False))
    return Rewritten(buf, list(headers), append_time)


async def rewrite_produce(
    buf: bytearray, headers: Sequence[BatchHeader], config: LogConfig, inflation_ratio: int
) -> Rewritten:
    """``rewrite_batches`` with the broker's clock; recompression runs off the event loop."""
    max_inflated = max_inflated_bytes(config.max_message_bytes, inflation_ratio)
    now_ms = int(time.time() * 1000)
    codec = config.compression_codec
    if codec is not None and any(h.compression != codec for h in headers):
        return await off_loop(rewrite_batches, buf, headers, config, max_inflated, now_ms)
    return rewrite_batches(buf, headers, config, max_inflated, now_ms)
