"""ListOffsets (v1-10) and OffsetForLeaderEpoch (v2-4) for consumers.

ListOffsets answers from the partition leader's log as the HTTP list-offsets route does
(``PartitionLog.offset_for_timestamp`` bounded by the high watermark), then narrows a
timestamp lookup from the batch to the record as Kafka does (the first record with a
timestamp >= the one asked; -3: the record holding the largest timestamp): -2 earliest and
-4 earliest-local (no tiered storage: the same) are the log start offset, -1 latest is the
high watermark (for isolation_level=1, read_committed, the last stable offset, and timestamp
lookups stop there too), -5 latest-tiered is -1 (nothing is tiered). A timestamp with no
record at or after it answers offset -1 and timestamp -1, as Kafka does.

OffsetForLeaderEpoch answers from the leader-epoch cache: the end offset of the requested
epoch (-1/-1 when unknown), fenced by the client's current leader epoch (KIP-320).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from brokernodes.errors import SluiceError
from brokernodes.records.batch import decode_batch
from brokernodes.server.kafka.context import Handler, KafkaContext
from brokernodes.server.kafka.handlers.fetch import epoch_error
from brokernodes.server.kafka.handlers.metadata import INTERNAL_TOPICS
from brokernodes.server.protocol.kafka import apis
from brokernodes.server.protocol.kafka import errors as kerr
from brokernodes.storage.leader_epoch import end_offset_for

if TYPE_CHECKING:
    from brokernodes.server.protocol.kafka.frames import RequestHeader
    from brokernodes.server.replica.partition import Partition

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
# a timestamp lookup inflates at most this much of one batch to find the record; a bigger
# batch answers its base offset (a consumer starting there sees a few earlier records)
INFLATE_LIMIT = 8 * 1024 * 1024


def record_in_batch(raw: bytes, offset: int, timestamp: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the record of the batch at the start of ``raw`` (at or after
    ``offset``) with the first timestamp >= ``timestamp``, or for MAX_TIMESTAMP the first
    holding the batch's largest timestamp; None when the batch cannot be read."""
    try:
        batch = decode_batch(raw, 0, verify_crc=False, max_records_bytes=INFLATE_LIMIT)
    except (SluiceError, ValueError):
        return None
    records = [r for r in batch.records if r.offset >= offset]
    if timestamp == MAX_TIMESTAMP:
        best = max((r.timestamp for r in records), default=None)
        hit = next((r for r in records if r.timestamp == best), None)
    else:
        hit = next((r for r in records if r.timestamp >= timestamp), None)
    return None if hit is None else (hit.offset, hit.timestamp)


def lookup(p: Partition, timestamp: int, read_committed: bool = False) -> tuple[int, int, int]:
    """(timestamp, offset, leader epoch) ListOffsets answers for ``timestamp``."""
    log = p.log
    cache = log.leader_epoch_cache
    hw = p.last_stable_offset if read_committed else log.high_watermark
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        start = log.log_start_offset
        first = cache.earliest_entry
        return -1, start, first.epoch if first is not None and first.start_offset <= start else -1
    if timestamp == LATEST:
        return -1, hw, p.leader_epoch
    if timestamp == LATEST_TIERED:
        return -1, -1, -1
    found = log.offset_for_timestamp(timestamp, max_offset=hw)
    if found is None:
        return -1, -1, -1
    offset, ts = found.offset, found.timestamp
    data = log.read(offset, 1, max_offset=hw)  # the one batch holding it
    raw = data.read_bytes() if data.slices else b""
    exact = record_in_batch(raw, offset, timestamp) if raw else None
    if exact is not None:
        offset, ts = exact
    epoch = cache.epoch_for_offset(offset)
    return ts, offset, -1 if epoch is None else epoch


def _authorized(ctx: KafkaContext, cache: dict[str, int], name: str) -> int:
    error = cache.get(name)
    if error is None:
        try:
            ctx.authorize("DESCRIBE", "topic", name)
            error = kerr.UNKNOWN_TOPIC_OR_PARTITION if name in INTERNAL_TOPICS else kerr.NONE
        except SluiceError as e:
            error = kerr.kafka_code(e)
        cache[name] = error
    return error


async def list_offsets(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    replicas = ctx.broker.replicas
    authorized: dict[str, int] = {}
    topics = []
    read_committed = request.get("isolation_level", 0) == 1
    for t in request["topics"]:
        name = t["name"]
        error = _authorized(ctx, authorized, name)
        answers = []
        for q in t["partitions"]:
            answer = {"partition_index": q["partition_index"], "error_code": error}
            answers.append(answer)
            if error != kerr.NONE:
                continue
            try:
                p = replicas.get_partition(name, q["partition_index"])
                code = epoch_error(q["current_leader_epoch"], p.leader_epoch)
                if code == kerr.NONE and q["timestamp"] < LATEST_TIERED:
                    code = kerr.INVALID_REQUEST  # no such special timestamp
                if code != kerr.NONE:
                    answer["error_code"] = code
                    continue
                ts, offset, epoch = lookup(p, q["timestamp"], read_committed)
            except SluiceError as e:
                answer["error_code"] = kerr.kafka_code(e)
                continue
            answer.update(timestamp=ts, offset=offset, leader_epoch=epoch)
        topics.append({"name": name, "partitions": answers})
    return {"throttle_time_ms": 0, "topics": topics}


async def offset_for_leader_epoch(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    replicas = ctx.broker.replicas
    authorized: dict[str, int] = {}
    topics = []
    for t in request["topics"]:
        name = t["topic"]
        error = _authorized(ctx, authorized, name)
        answers = []
        for q in t["partitions"]:
            answer = {"partition": q["partition"], "error_code": error}
            answers.append(answer)
            if error != kerr.NONE:
                continue
            try:
                p = replicas.get_partition(name, q["partition"])
            except SluiceError as e:
                answer["error_code"] = kerr.kafka_code(e)
                continue
            code = epoch_error(q["current_leader_epoch"], p.leader_epoch)
            if code != kerr.NONE:
                answer["error_code"] = code
                continue
            log = p.log
            with log.lock:
                entries = log.leader_epoch_cache.entries
                leo = log.log_end_offset
            epoch, end = end_offset_for(entries, q["leader_epoch"], leo)
            answer.update(leader_epoch=epoch, end_offset=end)
        topics.append({"topic": name, "partitions": answers})
    return {"throttle_time_ms": 0, "topics": topics}


HANDLERS: dict[int, Handler] = {
    apis.LIST_OFFSETS: list_offsets,
    apis.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch,
}
