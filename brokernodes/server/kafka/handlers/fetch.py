"""Fetch (v4-17) for consumers: whole batches below the high watermark, sent with
``sendfile`` straight from the segment files.

isolation_level=1 (read_committed) reads stop at the last stable offset (below it every
transaction is decided), and each partition's answer lists the aborted transactions
(producer id, first offset) overlapping the range read, from the segments' ``.txnindex``;
the client drops those producers' batches from that offset until their ABORT marker, as
Kafka's consumers do. Every answer carries the partition's LSO.

Each partition is read through ``ReplicaManager.fetch`` as the binary HTTP fetch reads it;
the long poll spans every requested partition: the answer goes out once ``min_bytes`` are
readable, a partition answers an error, or ``max_wait_ms`` passed (capped by the broker's
``max_wait_ms``). ``max_bytes`` bounds the whole answer and ``partition_max_bytes`` each
partition, except that the first partition with data returns at least one whole batch
(KIP-74). Records are ``FileRecords`` (open segment slices) the connection sends with
``sendfile`` and then closes.

Not supported: fetch sessions (KIP-227; every answer has session id 0, which clients take
as "sessionless": they keep sending full fetches; an incremental fetch of a session answers
FETCH_SESSION_ID_NOT_FOUND), replica fetches over the Kafka protocol (brokers replicate over
HTTP) and reading from followers (KIP-392: the preferred read replica is always -1).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from time import monotonic
from typing import TYPE_CHECKING

from brokernodes.errors import OffsetOutOfRangeError, SluiceError
from brokernodes.server.http.sendfile import close_slices, open_slices
from brokernodes.server.kafka.context import EncodedAnswer, FileRecords, Handler, KafkaContext
from brokernodes.server.kafka.handlers.metadata import INTERNAL_TOPICS, leader_hint, topics_by_id
from brokernodes.server.protocol.kafka import apis, fetch_answer
from brokernodes.server.protocol.kafka import errors as kerr
from brokernodes.storage.log import FetchData

if TYPE_CHECKING:
    from brokernodes.server.protocol.kafka.frames import RequestHeader
    from brokernodes.server.replica.partition import Partition

logger = logging.getLogger("sluice.kafka")

READ_COMMITTED = 1
MOVED = frozenset({kerr.NOT_LEADER_OR_FOLLOWER, kerr.FENCED_LEADER_EPOCH})


def epoch_error(current_leader_epoch: int, leader_epoch: int) -> int:
    """KIP-320 fencing of a client's view of the leader epoch (-1: not checked)."""
    if current_leader_epoch < 0 or current_leader_epoch == leader_epoch:
        return kerr.NONE
    if current_leader_epoch < leader_epoch:
        return kerr.FENCED_LEADER_EPOCH
    return kerr.UNKNOWN_LEADER_EPOCH


@dataclass(slots=True)
class PartitionRead:
    """One requested partition through the fetch: its request, then what was read."""

    topic: str | None
    index: int
    offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    partition: Partition | None = None
    error: int = kerr.NONE
    data: FetchData | None = None  # batches to send from the segment files
    tail: bytes | None = None  # or the batches just appended, from memory (the live tail)
    diverging: tuple[int, int] | None = None  # (epoch, end offset) of a diverged log
    bounds: tuple[int, int] = (-1, -1)  # (high watermark, log start) for an error answer
    files: list = field(default_factory=list)
    last_stable_offset: int = -1
    aborted: list[dict] | None = None  # read_committed: the aborted transactions in range


def diverging_epoch(p: Partition, last_fetched_epoch: int, offset: int) -> tuple[int, int] | None:
    """KIP-320 for a fetcher naming the epoch of its last batch (v12+): where its log
    diverged from this one, or None when it did not."""
    if last_fetched_epoch < 0:
        return None
    log = p.log
    epoch, end = log.leader_epoch_cache.end_offset_for(last_fetched_epoch, log.log_end_offset)
    if epoch != last_fetched_epoch or end < offset:
        return epoch, end
    return None


class FetchPlan:
    """The partitions of one Fetch request and the reads that answer it."""

    def __init__(
        self,
        ctx: KafkaContext,
        reads: list[PartitionRead],
        max_bytes: int,
        read_committed: bool = False,
    ) -> None:
        self.ctx = ctx
        self.reads = reads
        self.max_bytes = max_bytes
        self.read_committed = read_committed
        # a partition answered an error while being found or read: answer at once (as
        # Kafka does; authorization and unknown topic ids do not end the long poll)
        self.failed = False

    def resolve(self) -> None:
        """Find each partition's leader replica here and check the client's epoch."""
        replicas = self.ctx.broker.replicas
        for r in self.reads:
            if r.error != kerr.NONE:
                continue
            try:
                p = replicas.get_partition(r.topic, r.index)  # type: ignore[arg-type]
            except SluiceError as e:
                r.error = kerr.kafka_code(e)
                self.failed = True
                continue
            r.partition = p
            r.error = epoch_error(r.current_leader_epoch, p.leader_epoch)
            if r.error == kerr.NONE:
                r.diverging = diverging_epoch(p, r.last_fetched_epoch, r.offset)
            self.failed |= r.error != kerr.NONE or r.diverging is not None

    async def read_all(self) -> int:
        """Read every readable partition within the byte limits; the bytes read."""
        replicas = self.ctx.broker.replicas
        failed_dir = replicas.log_dir_failed.is_set()
        remaining = self.max_bytes
        first = True
        total = 0
        for r in self.reads:
            if r.error != kerr.NONE or r.diverging is not None:
                continue
            r.data = r.tail = r.aborted = None
            limit = max(0, min(r.max_bytes, remaining))
            p = r.partition
            committed = self.read_committed
            tail = (
                p.read_tail(r.offset, limit, read_committed=committed)
                if p is not None and limit
                else None
            )
            if tail is not None:  # a consumer at the end: no file to open, no sendfile
                log = p.log  # type: ignore[union-attr]
                r.tail, r.bounds = tail, (log.high_watermark, log.log_start_offset)
                self._stable(r)
                first = False
                remaining -= len(tail)
                total += len(tail)
                continue
            if p is not None and limit and not failed_dir and _caught_up(p, r.offset, committed):
                # the long poll's usual first pass: nothing readable yet, no segment lookup
                log = p.log
                r.data = FetchData(
                    [],
                    r.offset,
                    log.high_watermark,
                    log.log_start_offset,
                    log.log_end_offset,
                    next_offset=r.offset,
                )
                self._stable(r)
                continue
            try:
                data = await replicas.fetch(
                    r.topic,  # type: ignore[arg-type]
                    r.index,
                    r.offset,
                    max_bytes=limit,
                    min_bytes=0,
                    min_one_batch=first,
                    read_committed=committed,
                )
            except OffsetOutOfRangeError:
                r.error = kerr.OFFSET_OUT_OF_RANGE
                self.failed = True
                if r.partition is not None:  # the bounds tell the client where to reset
                    log = r.partition.log
                    r.bounds = (log.high_watermark, log.log_start_offset)
                continue
            except SluiceError as e:
                r.error = kerr.kafka_code(e)
                self.failed = True
                continue
            r.data = data
            self._stable(r)
            size = data.size
            if size:
                first = False
                remaining -= size
                total += size
        return total

    def _stable(self, r: PartitionRead) -> None:
        """The partition's LSO and, for read_committed, the aborted transactions between
        the fetch offset and it (read after the data: the LSO only grows, so they cover
        what was read)."""
        p = r.partition
        if p is None:
            return
        r.last_stable_offset = lso = p.last_stable_offset
        has_data = r.tail is not None or (r.data is not None and r.data.size > 0)
        if self.read_committed and has_data:
            r.aborted = [
                {"producer_id": a.producer_id, "first_offset": a.first_offset}
                for a in p.aborted_transactions(r.offset, lso)
            ]

    @property
    def waitable(self) -> list[Partition]:
        """The partitions whose new data could complete the long poll."""
        return [
            r.partition
            for r in self.reads
            if r.partition is not None and r.error == kerr.NONE and r.diverging is None
        ]

    async def wait(self, timeout: float) -> None:
        """Until new data is readable in any partition read, or ``timeout``."""
        waiting = self.waitable
        if len(waiting) == 1:
            await waiting[0].wait_for_data(timeout)
            return
        tasks = [asyncio.ensure_future(p.wait_for_data(timeout)) for p in waiting]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()

    async def open_files(self) -> None:
        """Open each partition's slices (a file that vanished under retention or
        compaction means one more read of that partition)."""
        replicas = self.ctx.broker.replicas
        for r in self.reads:
            data = r.data
            if data is None or not data.size:
                continue
            opened = open_slices(data.slices)
            if opened is None:
                try:
                    data = r.data = await replicas.fetch(
                        r.topic,  # type: ignore[arg-type]
                        r.index,
                        r.offset,
                        max_bytes=data.size,
                        min_bytes=0,
                        min_one_batch=False,
                    )
                except SluiceError as e:
                    r.error, r.data = kerr.kafka_code(e), None
                    continue
                opened = open_slices(data.slices)
            if opened is None:
                r.error, r.data = kerr.KAFKA_STORAGE_ERROR, None
                continue
            records = FileRecords(opened, sum(s.length for s in opened))
            self.ctx.open_files.append(records)  # the connection closes them
            r.files.append(records)


def _lso(r: PartitionRead, high_watermark: int) -> int:
    """The LSO read with the data (the high watermark when none was read)."""
    lso = r.last_stable_offset
    return high_watermark if lso < 0 else min(lso, high_watermark)


def _caught_up(p: Partition, offset: int, read_committed: bool) -> bool:
    """Whether a consumer at ``offset`` has read everything readable (the HW, or for
    read_committed the LSO) within the log's bounds, on a partition this broker still leads:
    ``read`` would return nothing."""
    if p.closed or not p.is_leader:
        return False  # the read finds out what happened (moved, deleted) and answers it
    log = p.log
    end = p.last_stable_offset if read_committed else log.high_watermark
    return offset == end and log.log_start_offset <= offset


# the fields a partition's answer may have for the direct encoding (no diverging epoch,
# leader hint or anything else)
_PLAIN = frozenset(
    {
        "partition_index",
        "error_code",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "aborted_transactions",
        "preferred_read_replica",
        "records",
    }
)


def partition_answer(r: PartitionRead, read_committed: bool) -> dict:
    answer: dict = {
        "partition_index": r.index,
        "error_code": r.error,
        "aborted_transactions": [] if read_committed else None,
        "preferred_read_replica": -1,
        "records": b"",
    }
    if read_committed and r.aborted and r.error == kerr.NONE:
        answer["aborted_transactions"] = r.aborted
    if r.tail is not None and r.error == kerr.NONE:
        answer["high_watermark"] = r.bounds[0]
        answer["last_stable_offset"] = _lso(r, r.bounds[0])
        answer["log_start_offset"] = r.bounds[1]
        answer["records"] = r.tail
        return answer
    data = r.data
    if data is not None and r.error == kerr.NONE:
        answer["high_watermark"] = data.high_watermark
        answer["last_stable_offset"] = _lso(r, data.high_watermark)
        answer["log_start_offset"] = data.log_start_offset
        if r.files:
            answer["records"] = r.files[0]
        return answer
    hw, start = r.bounds
    if r.diverging is not None and r.partition is not None:
        log = r.partition.log
        hw, start = log.high_watermark, log.log_start_offset
        answer["diverging_epoch"] = {"epoch": r.diverging[0], "end_offset": r.diverging[1]}
    answer["high_watermark"] = answer["last_stable_offset"] = hw
    answer["log_start_offset"] = start
    return answer


def plan_reads(ctx: KafkaContext, version: int, request: dict) -> tuple[list, list]:
    """(per topic (answer, its reads), every read) with authorization and topic-id errors."""
    image = ctx.broker.image
    by_id = topics_by_id(image) if version >= 13 else {}
    topics, reads = [], []
    authorized: dict[str, int] = {}
    for t in request["topics"]:
        error, name = kerr.NONE, t.get("topic")
        if version >= 13:
            info = by_id.get(t["topic_id"])
            name = info.name if info is not None else None
            if name is None or name in INTERNAL_TOPICS:
                error = kerr.UNKNOWN_TOPIC_ID
        if error == kerr.NONE:
            error = authorized.get(name)  # type: ignore[arg-type]
            if error is None:
                try:
                    ctx.authorize("READ", "topic", name)  # type: ignore[arg-type]
                    error = kerr.NONE
                except SluiceError as e:
                    error = kerr.kafka_code(e)
                authorized[name] = error  # type: ignore[index]
        if error == kerr.NONE and name in INTERNAL_TOPICS:
            error = kerr.UNKNOWN_TOPIC_OR_PARTITION
        own = [
            PartitionRead(
                name,
                p["partition"],
                p["fetch_offset"],
                max(0, p["partition_max_bytes"]),
                p["current_leader_epoch"],
                p["last_fetched_epoch"],
                error=error,
            )
            for p in t["partitions"]
        ]
        topics.append((t, own))
        reads.extend(own)
    return topics, reads


async def fetch(ctx: KafkaContext, header: RequestHeader, request: dict) -> dict:
    version = header.api_version
    broker = ctx.broker
    config = broker.config
    answer = {"throttle_time_ms": 0, "error_code": kerr.NONE, "session_id": 0, "responses": []}
    # the tenant was set when the connection authenticated; each topic is authorized below
    # (one authorization per topic, as HTTP does per request: usage counts requests by it)
    principal = ctx.principal
    replica = request["replica_state"]["replica_id"] if version >= 15 else request["replica_id"]
    if replica >= 0:
        return {**answer, "error_code": kerr.CLUSTER_AUTHORIZATION_FAILED}
    if request["session_epoch"] > 0:  # an incremental fetch in a session never created
        return {**answer, "error_code": kerr.FETCH_SESSION_ID_NOT_FOUND}
    read_committed = request["isolation_level"] == READ_COMMITTED
    topics, reads = plan_reads(ctx, version, request)
    max_bytes = max(0, min(request["max_bytes"], config.max_fetch_bytes))
    plan = FetchPlan(ctx, reads, max_bytes, read_committed)
    plan.resolve()
    min_bytes = request["min_bytes"]
    # time.monotonic, not the loop's clock: asyncio.get_running_loop costs a system call
    deadline = monotonic() + max(0, min(request["max_wait_ms"], config.max_wait_ms)) / 1000
    while True:
        total = await plan.read_all()
        remaining = deadline - monotonic()
        if (
            total >= min_bytes
            or remaining <= 0
            or plan.failed
            or broker.stopping
            or not plan.waitable  # nothing to wait for (e.g. every topic refused)
        ):
            break
        await plan.wait(remaining)
    try:
        await plan.open_files()
        if len(reads) == 1 and version >= fetch_answer.FIRST_VERSION:
            direct = _single_answer(ctx, version, topics[0][0], reads[0], read_committed)
            if direct is not None:
                return direct
        responses, sent, endpoints = topic_answers(ctx, version, topics, read_committed)
        throttle = broker.quotas.fetch(principal, sent)  # KIP-219: the connection mutes
    except BaseException:  # the connection closes open files only once it has an answer
        for f in ctx.open_files:
            close_slices(s.fd for s in f.slices)
        ctx.open_files.clear()
        raise
    if version >= fetch_answer.FIRST_VERSION and not endpoints and len(responses) == 1:
        direct = _direct_answer(version, responses[0], throttle)
        if direct is not None:
            return direct
    return {
        **answer,
        "throttle_time_ms": throttle,
        "responses": responses,
        "node_endpoints": endpoints,
    }


def _single_answer(
    ctx: KafkaContext, version: int, t: dict, r: PartitionRead, read_committed: bool
) -> EncodedAnswer | None:
    """The usual answer (one partition read without an error, a diverging epoch or
    aborted transactions) encoded straight from its read, as ``topic_answers`` and
    ``_direct_answer`` would answer it without building its dicts; None for anything else
    (those build them)."""
    if r.error != kerr.NONE or r.diverging is not None or (read_committed and r.aborted):
        return None
    if r.tail is not None:
        records = r.tail
        sent = len(records)
        hw, start = r.bounds
    elif r.data is not None:
        data = r.data
        hw, start = data.high_watermark, data.log_start_offset
        files = r.files
        records = files[0] if files else b""
        sent = sum(f.length for f in files)
    else:
        return None
    broker = ctx.broker
    if sent and r.topic is not None:
        broker.metrics.record_out(r.topic, sent)
    throttle = broker.quotas.fetch(ctx.principal, sent)  # KIP-219: the connection mutes
    chunks, size = fetch_answer.encode_single_answer(
        version,
        t.get("topic"),
        t.get("topic_id") if version >= 13 else None,
        r.index,
        hw,
        _lso(r, hw),
        start,
        not read_committed,
        records,
        throttle,
    )
    return EncodedAnswer(chunks, size, throttle)


def _direct_answer(version: int, entry: dict, throttle: int) -> EncodedAnswer | None:
    """The usual answer (one partition, no error, nothing aborted, no hint) encoded
    directly (``protocol.kafka.fetch_answer``); None for anything else."""
    parts = entry["partitions"]
    if len(parts) != 1:
        return None
    a = parts[0]
    if (
        a["error_code"] != kerr.NONE
        or a["aborted_transactions"]
        or a["preferred_read_replica"] != -1
        or not a.keys() <= _PLAIN  # a diverging epoch or a leader hint is another key
    ):
        return None
    chunks, size = fetch_answer.encode_single_answer(
        version,
        entry.get("topic"),
        entry.get("topic_id"),
        a["partition_index"],
        a["high_watermark"],
        a["last_stable_offset"],
        a["log_start_offset"],
        a["aborted_transactions"] is None,
        a["records"],
        throttle,
    )
    return EncodedAnswer(chunks, size, throttle)


def topic_answers(
    ctx: KafkaContext, version: int, topics: list, read_committed: bool
) -> tuple[list[dict], int, list[dict]]:
    """Each topic's answer, the record bytes they carry (counted as bytes out), and the
    endpoints of the new leaders of partitions that moved (KIP-951)."""
    broker = ctx.broker
    responses = []
    endpoints: dict[int, dict] = {}
    sent = 0
    for t, own in topics:
        topic_bytes = sum(f.length for r in own for f in r.files) + sum(
            len(r.tail) for r in own if r.tail is not None
        )
        sent += topic_bytes
        if topic_bytes and own[0].topic is not None:
            broker.metrics.record_out(own[0].topic, topic_bytes)
        entry: dict = {"partitions": [partition_answer(r, read_committed) for r in own]}
        if version >= 12:  # KIP-951: partitions that moved name their new leader
            for r, a in zip(own, entry["partitions"], strict=True):
                if r.error in MOVED and r.topic is not None:
                    a["current_leader"], endpoint = leader_hint(broker.image, r.topic, r.index)
                    if endpoint is not None:
                        endpoints[endpoint["node_id"]] = endpoint
        if version >= 13:
            entry["topic_id"] = t["topic_id"]
        else:
            entry["topic"] = t["topic"]
        responses.append(entry)
    return responses, sent, list(endpoints.values())


HANDLERS: dict[int, Handler] = {apis.FETCH: fetch}
