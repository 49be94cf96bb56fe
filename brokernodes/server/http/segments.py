"""``GET /sluice/v1/topics/{topic}/partitions/{p}/segments``: a partition log's segments.

What the retention and lag reports need and the fetch API cannot tell: each segment's base
and end offsets, size and largest timestamp, with the log's offsets and the retention configs
that decide when segments go. Needs DESCRIBE on the topic (as list offsets does); answered by
the partition's leader (421 NOT_LEADER_OR_FOLLOWER elsewhere, as fetch).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiohttp import web

from brokernodes.server.http.util import auth_header, json_response, topic_partition

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker


def segments_body(topic: str, partition: int, log) -> dict:
    """The answer for one ``PartitionLog`` (blocking: reads segment tails under its lock)."""
    config = log.config
    return {
        "topic": topic,
        "partition": partition,
        "log_start_offset": log.log_start_offset,
        "log_end_offset": log.log_end_offset,
        "high_watermark": log.high_watermark,
        "size_bytes": log.size_in_bytes,
        "configs": {
            "retention.ms": config.retention_ms,
            "retention.bytes": config.retention_bytes,
            "cleanup.policy": config.cleanup_policy,
            "segment.bytes": config.segment_bytes,
            "segment.ms": config.segment_ms,
        },
        "segments": [
            {
                "base_offset": s.base_offset,
                "end_offset": s.end_offset,
                "size_bytes": s.size,
                "largest_timestamp": s.largest_timestamp,
            }
            for s in log.segment_stats()
        ],
    }


def add_routes(app: web.Application, broker: Broker) -> None:
    async def segments(request: web.Request) -> web.Response:
        topic, p = topic_partition(request)
        broker.authorize(auth_header(request), "DESCRIBE", "topic", topic)
        log = broker.replicas.get_partition(topic, p).log
        return json_response(await asyncio.to_thread(segments_body, topic, p, log))

    app.router.add_get(
        "/sluice/v1/topics/{topic}/partitions/{partition}/segments", segments, name="segments"
    )
