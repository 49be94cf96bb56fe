"""``GET /sluice/v1/ws/groups/{group}``: group consumption over one WebSocket.

The socket authenticates as every stream does (header, or ``{"auth"}`` first frame; READ on
the group), then the client sends ``{"subscribe": ["topic", ...], "from": "earliest" |
"latest"}`` (optional ``"instance_id"`` for static membership). The broker joins the group
for the socket (the SDK's ``AsyncGroupConsumer``, acting with the socket's key) and pushes:

- ``{"type": "assigned", "partitions": [...], "member_id", "member_epoch"}`` when partitions
  are assigned;
- ``{"type": "revoke", "partitions": [...]}`` when partitions must go: the client commits
  what it processed (on this socket) and answers ``{"revoked": true}``; the broker waits for
  that (up to ``REVOKE_WAIT_S``) before giving them up, so at-least-once holds across the
  rebalance;
- ``{"type": "records", "records": [{topic, partition, offset, timestamp, key, value,
  headers}]}`` (key, value and header values base64) within the byte credit the client
  grants with ``{"credit": BYTES}`` (as on ``/ws/consume``: sent key + value bytes are
  subtracted, no records are taken while credit is zero, though assignments and revocations
  still are);
- ``{"type": "committed", "offsets": [...]}`` answering ``{"commit": [{topic, partition,
  offset}]}`` (offset = the next one to consume, as in Kafka), or an ``{"type": "error",
  "error_code", "message"}`` frame for a refused commit (the stream goes on).

Closing the socket leaves the group. The stream shares the broker's socket shell
(``server/ws/socket.py``: authentication, the stream registry, error closes); its consumer
reaches the cluster through this broker's own URL, as any SDK client would.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from brokernodes.client import AsyncGroupConsumer
from brokernodes.errors import SluiceError
from brokernodes.server.protocol.ws_frames import ProtocolViolation, load_frame
from brokernodes.server.ws.socket import PeerGone, StreamSocket, close_after_error
from brokernodes.server.ws_registry import CLOSE_INTERNAL_ERROR, CLOSE_NORMAL

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker

logger = logging.getLogger("sluice.broker.ws")

CLIENT_MAX_MSG_BYTES = 1024 * 1024
REVOKE_WAIT_S = 10.0
MAX_CREDIT = 2**40


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _tps(tps) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p} for t, p in sorted(tps)]


class GroupStream:
    def __init__(self, broker: Broker, sock: StreamSocket, group: str) -> None:
        self.broker = broker
        self.sock = sock
        self.group = group
        self.credit = 0
        self.granted = asyncio.Event()
        self.revoked_ack = asyncio.Event()
        self.consumer: AsyncGroupConsumer | None = None
        self.send_lock = asyncio.Lock()

    async def send(self, body: dict) -> None:
        async with self.send_lock:
            await self.sock.send_json(body)

    async def on_assigned(self, tps) -> None:
        c = self.consumer
        assert c is not None
        await self.send(
            {
                "type": "assigned",
                "partitions": _tps(tps),
                "member_id": c.member_id,
                "member_epoch": c.member_epoch,
            }
        )

    async def on_revoked(self, tps) -> None:
        self.revoked_ack.clear()
        await self.send({"type": "revoke", "partitions": _tps(tps)})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.revoked_ack.wait(), REVOKE_WAIT_S)

    async def start(self, doc: Any) -> None:
        if not isinstance(doc, dict) or not isinstance(doc.get("subscribe"), list):
            raise ProtocolViolation('the first message must be {"subscribe": ["topic", ...]}')
        topics = doc["subscribe"]
        if not topics or not all(isinstance(t, str) for t in topics):
            raise ProtocolViolation("subscribe: a non-empty list of topic names")
        for t in topics:
            self.broker.authorize(self.sock.authorization, "READ", "topic", t)
            self.broker.image.topic(t)
        start = doc.get("from", "latest")
        if start not in ("earliest", "latest"):
            raise ProtocolViolation('from: "earliest" or "latest"')
        instance_id = doc.get("instance_id")
        if instance_id is not None and not isinstance(instance_id, str):
            raise ProtocolViolation("instance_id: a string")
        config = self.broker.config
        url = (config.advertised_url or f"http://127.0.0.1:{config.port}").rstrip("/")
        key = (self.sock.authorization or "").partition(" ")[2].strip()
        self.consumer = AsyncGroupConsumer(
            url,
            key,
            group_id=self.group,
            topics=topics,
            group_instance_id=instance_id,
            client_id="ws-group-stream",
            auto_offset_reset=start,
            enable_auto_commit=False,
            heartbeat_interval_ms=doc.get("heartbeat_interval_ms"),
            session_timeout_ms=doc.get("session_timeout_ms"),
            on_partitions_assigned=self.on_assigned,
            on_partitions_revoked=self.on_revoked,
            fetch_max_wait_ms=200,
        )
        await self.consumer.start()

    async def reader(self) -> None:
        """Credit grants, commits and revocation acks from the client."""
        ws = self.sock.ws
        while True:
            msg = await ws.receive()
            if msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED):
                raise PeerGone
            if msg.type is not WSMsgType.TEXT:
                raise ProtocolViolation("the group stream takes JSON text frames")
            doc = load_frame(msg.data)
            if isinstance(doc, dict) and set(doc) == {"credit"}:
                credit = doc["credit"]
                if not isinstance(credit, int) or isinstance(credit, bool) or credit < 0:
                    raise ProtocolViolation("credit: expected a number of bytes >= 0")
                self.credit = min(self.credit + credit, MAX_CREDIT)
                self.granted.set()
            elif isinstance(doc, dict) and set(doc) == {"revoked"}:
                self.revoked_ack.set()
            elif isinstance(doc, dict) and set(doc) == {"commit"}:
                await self.commit(doc["commit"])
            else:
                raise ProtocolViolation(
                    'expected {"credit": n}, {"commit": [...]} or {"revoked": true}'
                )

    async def commit(self, rows: Any) -> None:
        assert self.consumer is not None
        try:
            if not isinstance(rows, list):
                raise ProtocolViolation("commit: a list of {topic, partition, offset}")
            offsets = {}
            for r in rows:
                if (
                    not isinstance(r, dict)
                    or not isinstance(r.get("topic"), str)
                    or not isinstance(r.get("partition"), int)
                    or not isinstance(r.get("offset"), int)
                ):
                    raise ProtocolViolation("commit: a list of {topic, partition, offset}")
                offsets[(r["topic"], r["partition"])] = r["offset"]
            await self.consumer.commit(offsets)
        except ProtocolViolation:
            raise
        except SluiceError as e:
            await self.send({"type": "error", "error_code": e.error_code, "message": e.message})
            return
        await self.send({"type": "committed", "offsets": rows})

    async def sender(self) -> None:
        c = self.consumer
        assert c is not None
        while True:
            if self.credit <= 0:
                # no records without credit, but rebalances go on (revocations must not
                # wait for the client to grant more)
                self.granted.clear()
                await c.maintain(1.0, wake=self.granted)
                continue
            records = await c.poll(0.5)
            if not records:
                continue
            size = 0
            out = []
            for r in records:
                size += len(r.key or b"") + len(r.value or b"")
                out.append(
                    {
                        "topic": r.topic,
                        "partition": r.partition,
                        "offset": r.offset,
                        "timestamp": r.timestamp,
                        "key": _b64(r.key),
                        "value": _b64(r.value),
                        "headers": [{"name": n, "value": _b64(v)} for n, v in r.headers],
                    }
                )
            await self.send({"type": "records", "records": out})
            self.credit -= size

    async def run(self) -> None:
        tasks = [asyncio.create_task(self.reader()), asyncio.create_task(self.sender())]
        ending = self.sock.session.ending
        try:
            done, _ = await asyncio.wait((*tasks, ending), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            if self.consumer is not None:
                with contextlib.suppress(SluiceError):
                    await self.consumer.close()
        if ending in done:
            code, error = ending.result()
            await self.sock.close(code, error)
            return
        for t in tasks:
            if t in done and t.exception() is not None:
                e = t.exception()
                if isinstance(e, PeerGone):
                    return
                if isinstance(e, SluiceError):
                    await close_after_error(self.sock, e)
                    return
                raise e
        await self.sock.close(CLOSE_NORMAL)


def add_routes(app: web.Application, broker: Broker) -> None:
    async def group_stream(request: web.Request) -> web.StreamResponse:
        group = request.match_info["group"]
        sock = StreamSocket(
            broker,
            "groups",
            max_msg_size=CLIENT_MAX_MSG_BYTES,
            connect_check=lambda header: broker.authorize(header, "READ", "group", group),
        )
        sock.check_upgrade(request)
        has_header = sock.authenticate_header(request)
        await sock.accept(request)
        stream = GroupStream(broker, sock, group)
        try:
            try:
                if not has_header:
                    await sock.authenticate_first_frame()
                msg = await sock.ws.receive(timeout=30)
                if msg.type is not WSMsgType.TEXT:
                    raise PeerGone
                await stream.start(load_frame(msg.data))
            except PeerGone:
                return sock.ws
            except (SluiceError, TimeoutError) as e:
                if isinstance(e, TimeoutError):
                    e = ProtocolViolation('no {"subscribe": [...]} message within 30 s')
                await close_after_error(sock, e)
                return sock.ws
            await stream.run()
        except Exception:
            logger.exception("ws group stream failed")
            await sock.close(CLOSE_INTERNAL_ERROR)
        finally:
            sock.release()
        return sock.ws

    app.router.add_get("/sluice/v1/ws/groups/{group}", group_stream, name="ws_groups")
