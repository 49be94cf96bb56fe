"""Log offsets of partitions anywhere in the cluster, for lag, commit checks and resets.

A partition this broker leads is read directly; the others are asked of their leaders in one
``POST /internal/v1/log-offsets`` per broker (authenticated with ``cluster_token``). Each
answer carries the log start offset, the high watermark (the end a consumer sees, which lag
is measured against, as ``kafka-consumer-groups`` does), the last stable offset (the end a
read_committed reader sees: a cursor's ``latest`` for it) and optionally the timestamp of the
record at a given offset (time lag) or the first offset at a timestamp (``--to-datetime``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import orjson

from brokernodes.errors import SluiceError, UnauthenticatedError, UnknownTopicOrPartitionError
from brokernodes.records.batch import decode_batch
from brokernodes.records.header import HEADER_SIZE, read_header
from brokernodes.server.http.forward import forwarder
from brokernodes.server.protocol.log_offsets import LogOffsets, Query

if TYPE_CHECKING:
    from aiohttp import web

    from brokernodes.server.broker import Broker
    from brokernodes.server.metadata.cluster import ClusterMetadata

REMOTE_TIMEOUT_S = 5.0
LAG_INFLATE_BYTES = 1024 * 1024  # a lag refresh inflates no batch beyond this


def cluster_token(broker: Broker) -> str:
    """The brokers' shared secret: the cluster secret, or with static metadata (no secret) a
    digest of the cluster id and the API key hashes every broker of that cluster shares."""
    secret = broker.config.cluster_secret
    if secret:
        return secret
    image = broker.metadata.global_image()
    material = ",".join(sorted(k.secret_sha256 for k in image.api_keys.values()))
    return hashlib.sha256(f"sluice-static:{image.cluster_id}:{material}".encode()).hexdigest()


def internal_headers(broker: Broker, caller_auth: str | None = None) -> dict[str, str]:
    return {"Authorization": f"Cluster {cluster_token(broker)}"}


def check_internal(broker: Broker, request: web.Request) -> None:
    """Internal routes need ``Authorization: Cluster <secret>`` (see ``cluster_token``)."""
    header = request.headers.get("Authorization") or ""
    if not hmac.compare_digest(header.encode(), f"Cluster {cluster_token(broker)}".encode()):
        raise UnauthenticatedError("internal routes need Authorization: Cluster <secret>")


def local_offsets(
    broker: Broker, log_key: str, partition: int, timestamp_at: int | None, offset_at: int | None
) -> LogOffsets:
    p = broker.replicas.partitions.get((log_key, partition))
    if p is None or not p.is_leader:
        raise UnknownTopicOrPartitionError(f"partition {log_key}-{partition} is not led here")
    log = p.log
    ts = None
    if timestamp_at is not None and log.log_start_offset <= timestamp_at < log.high_watermark:
        ts = record_timestamp(log.read(timestamp_at, 64 * 1024).read_bytes(), timestamp_at)
    found = None
    if offset_at is not None:
        r = log.offset_for_timestamp(offset_at, max_offset=log.high_watermark)
        found = None if r is None else r.offset
    return LogOffsets(log.log_start_offset, log.high_watermark, ts, found, p.last_stable_offset)


def record_timestamp(raw: bytes, offset: int) -> int | None:
    """The timestamp of the record at (or first after) ``offset`` in whole batches ``raw``.

    It runs on the loop every lag refresh, so a compressed batch is inflated only up to
    ``LAG_INFLATE_BYTES``; one that is larger, or unreadable, answers its header's base
    timestamp (its first record's: close enough for a time lag, and never an error).
    """
    pos = 0
    while len(raw) - pos >= HEADER_SIZE:
        header = read_header(raw, pos)
        if header.next_offset > offset and pos + header.size <= len(raw):
            try:
                batch = decode_batch(
                    raw, pos, verify_crc=False, max_records_bytes=LAG_INFLATE_BYTES
                )
            except SluiceError:
                return header.base_timestamp if header.base_timestamp >= 0 else None
            hit = next((r for r in batch.records if r.offset >= offset), None)
            if hit is not None:
                return hit.timestamp
        pos += header.size
    return None


async def log_offsets(
    broker: Broker,
    view: ClusterMetadata,
    queries: Iterable[Query],
    caller_auth: str | None,
) -> dict[tuple[str, int], LogOffsets]:
    """Offsets for each query's partition (missing from the answer: unknown or unreachable)."""
    by_leader: dict[int, list[tuple[Query, str]]] = {}
    for q in queries:
        try:
            info = view.partition(q.topic, q.partition)
        except SluiceError:
            continue
        by_leader.setdefault(info.leader, []).append((q, info.log_key))
    out: dict[tuple[str, int], LogOffsets] = {}
    me = view.broker_id

    async def remote(leader: int, items: list[tuple[Query, str]]) -> None:
        url = view.broker_url(leader)
        if url is None:
            return
        body = {
            "partitions": [
                {
                    "log_key": key,
                    "partition": q.partition,
                    "timestamp_at": q.timestamp_at,
                    "offset_at": q.offset_at,
                }
                for q, key in items
            ]
        }
        # over the forwarder's pooled keep-alive connections (a lag refresh asks every 2 s)
        fwd = forwarder(broker)
        headers = {**internal_headers(broker, caller_auth), "Content-Type": "application/json"}
        try:
            async with asyncio.timeout(REMOTE_TIMEOUT_S):
                status, _, data = await fwd.exchange(
                    "POST",
                    "/internal/v1/log-offsets",
                    headers,
                    orjson.dumps(body),
                    idempotent=True,  # a read
                    target=lambda: fwd.broker_target(leader),
                    what=f"broker {leader}",
                )
            if status != 200:
                return
            doc = orjson.loads(data)
        except (SluiceError, OSError, TimeoutError, ValueError):
            return
        for (q, _), row in zip(items, doc.get("partitions", []), strict=False):
            if row.get("error_code"):
                continue
            out[(q.topic, q.partition)] = LogOffsets(
                int(row["log_start_offset"]),
                int(row["high_watermark"]),
                row.get("timestamp"),
                row.get("offset_for_time"),
                row.get("last_stable_offset"),
            )

    tasks = []
    for leader, items in by_leader.items():
        if leader == me:
            for q, key in items:
                with contextlib.suppress(SluiceError):
                    out[(q.topic, q.partition)] = local_offsets(
                        broker, key, q.partition, q.timestamp_at, q.offset_at
                    )
        elif leader >= 0:
            tasks.append(remote(leader, items))
    await asyncio.gather(*tasks)
    return out


def answer_internal(broker: Broker, doc: Mapping) -> dict:
    """The body of ``POST /internal/v1/log-offsets``."""
    rows = []
    for item in doc.get("partitions") or []:
        try:
            lo = local_offsets(
                broker,
                str(item["log_key"]),
                int(item["partition"]),
                item.get("timestamp_at"),
                item.get("offset_at"),
            )
            rows.append(
                {
                    "log_start_offset": lo.log_start_offset,
                    "high_watermark": lo.high_watermark,
                    "timestamp": lo.timestamp,
                    "offset_for_time": lo.offset_for_time,
                    "last_stable_offset": lo.last_stable_offset,
                }
            )
        except (SluiceError, KeyError, TypeError, ValueError) as e:
            rows.append({"error_code": getattr(e, "error_code", "INVALID_REQUEST")})
    return {"partitions": rows}
