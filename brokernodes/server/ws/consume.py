"""``GET /sluice/v1/ws/consume``: a consume stream with credit-based flow control in bytes.

The client grants credit with ``{"credit": BYTES}`` (additive). While credit is above zero
the broker reads at most ``min(credit, max_bytes)`` batch bytes from the partition (whole
batches; the first batch whole even if larger, as a fetch does: Kafka's KIP-74) and sends
them as one message, then subtracts the stored batch bytes it sent. Credit can therefore go
below zero by less than one batch; nothing more is read or sent until grants bring it above
zero again. With credit and no new data the stream waits on the partition's long-poll
wake-up (the live tail); with no credit it waits for a grant. It never reads ahead of the
credit, so a slow consumer costs the broker one message at most.

With ``isolation=read_committed`` the stream stops at the last stable offset (``from=latest``
starts there) and never sends an aborted transaction's batches: JSON frames leave their
records out, binary frames leave the batches out (``protocol/isolation.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from aiohttp import WSMsgType, web

from brokernodes.errors import (
    KafkaStorageError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    SluiceError,
)
from brokernodes.records.compression import max_inflated_bytes
from brokernodes.records.header import iter_batches
from brokernodes.server.http.forward import forwardable
from brokernodes.server.http.sendfile import OpenSlice, close_slices, open_slices
from brokernodes.server.protocol.isolation import aborted_skip, drop_aborted, stable_aborted
from brokernodes.server.protocol.json_records import render_batches
from brokernodes.server.protocol.ws_frames import (
    MAX_OUTSTANDING_CREDIT,
    ConsumeParams,
    load_frame,
    parse_consume_query,
    parse_credit,
)
from brokernodes.server.ws.socket import (
    PeerGone,
    StreamSocket,
    binary_not_accepted,
    close_after_error,
)
from brokernodes.server.ws.upstream import proxy_consume
from brokernodes.server.ws_registry import CLOSE_GOING_AWAY, CLOSE_INTERNAL_ERROR, CLOSE_NORMAL
from brokernodes.storage.files import pread_exactly

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker
    from brokernodes.server.replica.partition import Partition

logger = logging.getLogger("sluice.broker.ws")

DEFAULT_MESSAGE_BYTES = 1024 * 1024
CLIENT_MAX_MSG_BYTES = 64 * 1024  # the client only sends auth and credit messages
TAIL_WAIT_S = 30.0
THREAD_READ_BYTES = 1024 * 1024


def _read_and_close(opened: list[OpenSlice]) -> bytes:
    """The slices' bytes; closes their files (in the thread that read them, so a cancelled
    stream never closes a file under a read)."""
    try:
        return b"".join(pread_exactly(s.fd, s.length, s.position) for s in opened)
    finally:
        close_slices(s.fd for s in opened)


class _GoingAway(Exception):
    """The partition was released (broker shutting down)."""


class ConsumeStream:
    def __init__(self, broker: Broker, sock: StreamSocket, params: ConsumeParams) -> None:
        self.broker = broker
        self.sock = sock
        self.params = params
        self.credit = 0
        self._granted = asyncio.Event()

    # --- start position ----------------------------------------------------------------

    def resolve_start(self) -> int:
        """The first offset to send (404 / 421 / 416 errors raise here)."""
        params = self.params
        replicas = self.broker.replicas
        p = replicas.get_partition(params.topic, params.partition)
        log = p.log
        if params.start == "earliest":
            return log.log_start_offset
        if params.start == "latest":
            return p.last_stable_offset if params.read_committed else log.high_watermark
        if params.start == "timestamp":
            return replicas.list_offsets(
                params.topic, params.partition, params.value, read_committed=params.read_committed
            ).offset
        start, end = log.log_start_offset, log.log_end_offset
        if not start <= params.value <= end:
            err = OffsetOutOfRangeError(
                f"offset {params.value} is out of range for {params.topic}-{params.partition}: "
                f"the log holds offsets [{start}, {end}); start from earliest or latest"
            )
            err.details = {"log_start_offset": start, "log_end_offset": end}  # type: ignore[attr-defined]
            raise err
        return params.value

    # --- the stream --------------------------------------------------------------------

    async def run(self, offset: int) -> None:
        sock = self.sock
        reader = asyncio.create_task(self._read())
        sender = asyncio.create_task(self._send(offset))
        ending = sock.session.ending
        try:
            done, _ = await asyncio.wait(
                (reader, sender, ending), return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for t in (reader, sender):
                t.cancel()
            for t in (reader, sender):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
        if ending in done:
            code, error = ending.result()
            await sock.close(code, error)
            return
        task = reader if reader in done else sender
        exc = task.exception()
        if exc is None or isinstance(exc, PeerGone | ConnectionError):
            await sock.close(CLOSE_NORMAL)  # no-op when the client closed it
        elif isinstance(exc, _GoingAway):
            await sock.close(CLOSE_GOING_AWAY)
        elif isinstance(exc, SluiceError):
            await close_after_error(sock, exc)
        else:
            logger.error(
                "ws consume %s-%d failed",
                self.params.topic,
                self.params.partition,
                exc_info=exc,
            )
            await sock.close(CLOSE_INTERNAL_ERROR)

    async def _read(self) -> None:
        """Credit grants from the client; returns when the client closes."""
        ws = self.sock.ws
        while True:
            msg = await ws.receive()
            if msg.type is WSMsgType.TEXT:
                grant = parse_credit(load_frame(msg.data))
                self.credit = min(self.credit + grant, MAX_OUTSTANDING_CREDIT)
                if self.credit > 0:
                    self._granted.set()
            elif msg.type is WSMsgType.BINARY:
                raise binary_not_accepted("consume")
            else:
                return

    async def _send(self, offset: int) -> None:
        params = self.params
        topic, partition = params.topic, params.partition
        sock, broker = self.sock, self.broker
        binary = params.format == "binary"
        min_timestamp = params.value if params.start == "timestamp" and not binary else None
        while True:
            if self.credit <= 0:
                self._granted.clear()
                await self._granted.wait()
                continue
            principal = sock.authorize("READ", topic)
            p = broker.replicas.get_partition(topic, partition)
            raw, high_watermark = await self._read_batches(
                p, offset, min(self.credit, params.max_bytes)
            )
            if not raw:
                if p.closed:
                    # shutting down, or the partition left this broker: look it up again
                    # (a deleted topic or a moved leader raises its own error here)
                    if broker.stopping or broker.replicas.get_partition(topic, partition) is p:
                        raise _GoingAway
                    continue
                await p.wait_for_data(TAIL_WAIT_S)
                continue
            aborted = self._aborted(p, offset) if params.read_committed else []
            if binary and aborted:
                *_, last = iter_batches(raw, verify_crc=False)
                raw = drop_aborted(raw, aborted)
                if not raw:  # only aborted batches: nothing to send, read on past them
                    offset = last.next_offset
                    continue
            size = len(raw)
            # the fetch quota delays this message (only this stream waits)
            throttle = await broker.quotas.throttle_fetch(principal, size)
            if binary:
                if not aborted:
                    *_, last = iter_batches(raw, verify_crc=False)
                next_offset = last.next_offset
                records = 0
                await sock.ws.send_frame(raw, WSMsgType.BINARY)
            else:
                rendered, next_offset = render_batches(
                    raw,
                    offset,
                    params.format,
                    max_records_bytes=max_inflated_bytes(
                        p.log.config.max_message_bytes, p.inflation_ratio
                    ),
                    min_timestamp=min_timestamp,
                    skip=aborted_skip(aborted),
                )
                min_timestamp = None
                records = len(rendered)
                await sock.send_json(
                    {
                        "records": rendered,
                        "next_offset": next_offset,
                        "high_watermark": high_watermark,
                        **(
                            {"last_stable_offset": p.last_stable_offset}
                            if params.read_committed
                            else {}
                        ),
                        "batch_bytes": size,
                        **({"throttle_time_ms": throttle} if throttle else {}),
                    }
                )
            self.credit -= size
            broker.metrics.record_out(topic, size, records)
            offset = next_offset

    @staticmethod
    def _aborted(p: Partition, offset: int) -> list[tuple[int, int, int]]:
        """The aborted transactions from ``offset`` below the LSO (read after the data)."""
        return stable_aborted(p, offset)[1]

    async def _read_batches(self, p: Partition, offset: int, max_bytes: int) -> tuple[bytes, int]:
        """Whole batches from ``offset`` (at most ``max_bytes`` but the first batch whole),
        and the high watermark: from memory when they are the batches just appended (the
        live tail), else from the segment files. Retries once if retention or compaction
        removed a segment between the read and the open."""
        params = self.params
        committed = params.read_committed
        high_watermark = p.log.high_watermark
        if offset == (p.last_stable_offset if committed else high_watermark):
            return b"", high_watermark  # caught up: nothing to read
        tail = p.read_tail(offset, max_bytes, read_committed=committed)
        if tail is not None:
            return tail, high_watermark
        for _ in range(2):
            data = await self.broker.replicas.fetch(
                params.topic,
                params.partition,
                offset,
                max_bytes=max_bytes,
                max_wait_ms=0,
                read_committed=committed,
            )
            if not data.slices:
                return b"", data.high_watermark
            opened = open_slices(data.slices)
            if opened is None:
                continue
            if data.size > THREAD_READ_BYTES:  # keep the loop free of long disk reads
                raw = await asyncio.to_thread(_read_and_close, opened)
            else:
                raw = _read_and_close(opened)
            return raw, data.high_watermark
        raise KafkaStorageError(
            f"the segments of {params.topic}-{params.partition} changed twice during a read; "
            "reconnect from next_offset"
        )


def add_routes(app: web.Application, broker: Broker) -> None:
    config = broker.config

    async def consume_stream(request: web.Request) -> web.StreamResponse:
        params = parse_consume_query(
            request.query,
            default_max_bytes=min(DEFAULT_MESSAGE_BYTES, config.max_fetch_bytes),
            max_fetch_bytes=config.max_fetch_bytes,
        )
        sock = StreamSocket(
            broker,
            "consume",
            max_msg_size=CLIENT_MAX_MSG_BYTES,
            connect_check=lambda header: broker.authorize(header, "READ", "topic", params.topic),
        )
        stream = ConsumeStream(broker, sock, params)
        sock.check_upgrade(request)
        offset = None
        if sock.authenticate_header(request):
            try:
                offset = stream.resolve_start()  # plain HTTP errors before the upgrade
            except NotLeaderOrFollowerError as e:
                if not forwardable(request):
                    raise
                # one front door: the leader's stream, through this broker (ws/upstream.py)
                leader = e.details.get("leader_id", -1)
                try:
                    await proxy_consume(broker, request, sock, leader, accepted=False)  # type: ignore[arg-type]
                finally:
                    sock.release()
                return sock.ws
        await sock.accept(request)
        try:
            if offset is None:
                try:
                    await sock.authenticate_first_frame()
                    offset = stream.resolve_start()
                except PeerGone:
                    return sock.ws
                except NotLeaderOrFollowerError as e:
                    if not forwardable(request):
                        await close_after_error(sock, e)
                        return sock.ws
                    leader = e.details.get("leader_id", -1)
                    try:
                        await proxy_consume(broker, request, sock, leader, accepted=True)  # type: ignore[arg-type]
                    except SluiceError as e2:
                        await close_after_error(sock, e2)
                    return sock.ws
                except SluiceError as e:
                    await close_after_error(sock, e)
                    return sock.ws
            await stream.run(offset)
        except Exception:
            logger.exception("ws consume stream failed")
            await sock.close(CLOSE_INTERNAL_ERROR)
        finally:
            sock.release()
        return sock.ws

    app.router.add_get("/sluice/v1/ws/consume", consume_stream, name="ws_consume")
