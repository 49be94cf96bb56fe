"""Fetch (binary, zero-copy; JSON, decoded) and list offsets.

The binary fetch is also the replica fetch: with ``replica_id`` (plus
``current_leader_epoch`` and ``broker_epoch``) it is another broker's follower, admitted by
the cluster secret instead of an API key, reading past the high watermark and not counted
against tenant quotas (docs/replication.md).

Consumers may ask ``isolation=read_committed``: reads stop at the last stable offset; the
JSON answer leaves aborted transactions' records out, the binary one names them in the
``Sluice-Aborted-Transactions`` header for the client to drop (``protocol/isolation.py``,
docs/transactions.md). ``/offsets?timestamp=latest&isolation=read_committed`` is the LSO."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from aiohttp import web

from brokernodes.errors import KafkaStorageError, NotLeaderOrFollowerError
from brokernodes.records.compression import max_inflated_bytes
from brokernodes.server.http.forward import forwardable, forwarder
from brokernodes.server.http.replication import authenticate_broker
from brokernodes.server.http.sendfile import SliceResponse, close_slices, open_slices
from brokernodes.server.http.util import auth_header, json_response, topic_partition
from brokernodes.server.protocol.isolation import (
    ABORTED_HEADER,
    LSO_HEADER,
    AbortedRange,
    aborted_header,
    aborted_skip,
    read_committed_param,
    stable_aborted,
)
from brokernodes.server.protocol.json_records import render_batches
from brokernodes.server.protocol.params import choice_param, int_param, timestamp_param
from brokernodes.server.protocol.request import SluiceRequest
from brokernodes.server.throttle import THROTTLE_HEADER
from brokernodes.storage.files import pread_exactly

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker
    from brokernodes.server.http.sendfile import OpenSlice
    from brokernodes.storage.log import FetchData


BINARY = "application/vnd.kafka.recordbatch.v2"
DEFAULT_MAX_BYTES = 1024 * 1024
DEFAULT_MAX_RECORDS = 500
MAX_RECORDS = 10_000


def add_routes(app: web.Application, broker: Broker) -> None:
    config = broker.config
    zero_copy = config.fetch_path == "sendfile"

    async def fetch_and_open(
        topic: str,
        p: int,
        query,
        *,
        min_bytes: int,
        max_wait_ms: int,
        max_bytes: int,
        replica: bool = False,
        read_committed: bool = False,
    ) -> tuple[FetchData, list[OpenSlice]]:
        """Fetch, then open the slices' files; a file that vanished (retention or
        compaction raced the read) means one more read of the log."""
        offset = int_param(query, "offset", minimum=0)
        # only an authenticated broker is a replica (it reads past the high watermark)
        replica_id = int_param(query, "replica_id", minimum=0) if replica else None
        epoch = int_param(query, "current_leader_epoch", -1, minimum=-1)
        broker_epoch = int_param(query, "broker_epoch", -1, minimum=-1)
        for attempt in range(2):
            data = await broker.replicas.fetch(
                topic,
                p,
                offset,
                max_bytes=max_bytes,
                max_wait_ms=max_wait_ms if attempt == 0 else 0,
                min_bytes=min_bytes,
                replica_id=replica_id,
                current_leader_epoch=epoch,
                broker_epoch=broker_epoch,
                read_committed=read_committed,
            )
            opened = open_slices(data.slices)
            if opened is not None:
                return data, opened
        raise KafkaStorageError(
            f"the segments of {topic}-{p} changed twice during this fetch; retry it"
        )

    def stable(topic: str, p: int, offset: int) -> tuple[int, list[AbortedRange]]:
        """The LSO and the aborted transactions from ``offset`` below it."""
        return stable_aborted(broker.replicas.get_partition(topic, p), offset)

    def limits(query) -> tuple[int, int]:
        max_bytes = int_param(
            query, "max_bytes", DEFAULT_MAX_BYTES, minimum=1, maximum=config.max_fetch_bytes
        )
        max_wait_ms = int_param(query, "max_wait_ms", 0, minimum=0, maximum=config.max_wait_ms)
        return max_bytes, max_wait_ms

    async def fetch_batches(request: SluiceRequest) -> SliceResponse | web.Response:
        topic, p = topic_partition(request)
        q = request.query
        replica = "replica_id" in q
        if replica:
            authenticate_broker(broker, request)
            principal = None
        else:
            principal = broker.authorize(auth_header(request), "READ", "topic", topic)
        max_bytes, max_wait_ms = limits(q)
        min_bytes = int_param(q, "min_bytes", 1, minimum=0)
        read_committed = not replica and read_committed_param(q)
        try:
            data, opened = await fetch_and_open(
                topic,
                p,
                q,
                min_bytes=min_bytes,
                max_wait_ms=max_wait_ms,
                max_bytes=max_bytes,
                replica=replica,
                read_committed=read_committed,
            )
        except NotLeaderOrFollowerError:
            if replica or not forwardable(request):
                raise
            return await forwarder(broker).forward(request, topic, p)  # one front door
        isolation_headers = {}
        if read_committed:
            lso, aborted = stable(topic, p, data.fetch_offset)
            isolation_headers[LSO_HEADER] = str(lso)
            if aborted and opened:
                isolation_headers[ABORTED_HEADER] = aborted_header(aborted)
        try:
            total = sum(s.length for s in opened)
            # KIP-219: record, then answer after the throttle time
            throttle = (
                0 if principal is None else await broker.quotas.throttle_fetch(principal, total)
            )
        except BaseException:
            close_slices(s.fd for s in opened)
            raise
        return SliceResponse(
            opened,
            zero_copy=zero_copy,
            headers={
                "Content-Type": BINARY,
                THROTTLE_HEADER: str(throttle),
                "Sluice-High-Watermark": str(data.high_watermark),
                "Sluice-Log-Start-Offset": str(data.log_start_offset),
                "Sluice-Log-End-Offset": str(data.log_end_offset),
                "Sluice-Next-Offset": str(data.next_offset),
                **isolation_headers,
            },
            on_sent=None if replica else partial(broker.metrics.record_out, topic),
            label=f"{topic}-{p}",
        )

    async def fetch_records(request: SluiceRequest) -> web.Response:
        topic, p = topic_partition(request)
        principal = broker.authorize(auth_header(request), "READ", "topic", topic)
        q = request.query
        max_bytes, max_wait_ms = limits(q)
        max_records = int_param(
            q, "max_records", DEFAULT_MAX_RECORDS, minimum=1, maximum=MAX_RECORDS
        )
        fmt = choice_param(q, "format", ("json", "text", "base64"), "json")
        offset = int_param(q, "offset", minimum=0)
        read_committed = read_committed_param(q)
        try:
            data, opened = await fetch_and_open(
                topic,
                p,
                q,
                min_bytes=1,
                max_wait_ms=max_wait_ms,
                max_bytes=max_bytes,
                read_committed=read_committed,
            )
        except NotLeaderOrFollowerError:
            if not forwardable(request):
                raise
            return await forwarder(broker).forward(request, topic, p)  # one front door
        try:
            raw = b"".join(pread_exactly(s.fd, s.length, s.position) for s in opened)
        finally:
            close_slices(s.fd for s in opened)
        part = broker.replicas.get_partition(topic, p)
        cap = max_inflated_bytes(part.log.config.max_message_bytes, part.inflation_ratio)
        extra = {}
        skip = None
        if read_committed:
            lso, aborted = stable(topic, p, offset)
            extra["last_stable_offset"] = lso
            skip = aborted_skip(aborted) if raw else None
        records_out, next_offset = render_batches(
            raw, offset, fmt, max_records=max_records, max_records_bytes=cap, skip=skip
        )
        broker.metrics.record_out(topic, len(raw), len(records_out))
        throttle = await broker.quotas.throttle_fetch(principal, len(raw))
        resp = json_response(
            {
                "records": records_out,
                "next_offset": next_offset,
                "high_watermark": data.high_watermark,
                "log_start_offset": data.log_start_offset,
                **extra,
                "throttle_time_ms": throttle,
            }
        )
        resp.headers[THROTTLE_HEADER] = str(throttle)
        return resp

    async def list_offsets(request: SluiceRequest) -> web.Response:
        topic, p = topic_partition(request)
        broker.authorize(auth_header(request), "DESCRIBE", "topic", topic)
        timestamp = timestamp_param(request.query)
        read_committed = read_committed_param(request.query)
        try:
            found = broker.replicas.list_offsets(topic, p, timestamp, read_committed=read_committed)
        except NotLeaderOrFollowerError:
            if not forwardable(request):
                raise
            return await forwarder(broker).forward(request, topic, p)  # one front door
        return json_response({"offset": found.offset, "timestamp": found.timestamp})

    base = "/sluice/v1/topics/{topic}/partitions/{partition}"
    # No HEAD: the zero-copy path writes the body past aiohttp, which would not skip it.
    app.router.add_get(base + "/batches", fetch_batches, name="fetch_binary", allow_head=False)
    app.router.add_get(base + "/records", fetch_records, name="fetch_json")
    app.router.add_get(base + "/offsets", list_offsets, name="list_offsets")
