"""One front door for the WebSocket streams: streams for partitions led elsewhere go on to
the leader's streams (docs/data-plane-api.md, "One front door").

- **Consume**: a consume stream for a partition this broker does not lead is a proxy: the
  broker opens the same stream on the leader (same query, the caller's key, marked
  ``Sluice-Forwarded``) and copies frames both ways as they are, the close code and reason
  included. The leader applies the credit, ACLs and quotas.
- **Produce**: a produce stream keeps, per leader it needed, one produce stream to that
  leader (opened on first use with the caller's key and the mark). A binary frame for a
  partition led there is sent on unchanged; the JSON records of a text frame that belong to
  partitions led there are sent as one text request naming their partitions. The leader
  answers in the order sent, so answers are matched first in, first out, and the client's
  answers stay in its order. An upstream that breaks fails what it had in flight with
  ``NETWORK_EXCEPTION`` (sent, outcome unknown; never resent); one that cannot be opened
  fails the request with ``LEADER_NOT_AVAILABLE`` (nothing sent).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import aiohttp
import orjson
from aiohttp import WSMsgType, web

from brokernodes.errors import (
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    SluiceError,
    UnauthenticatedError,
    UnknownTopicOrPartitionError,
)
from brokernodes.server.http.forward import apply_outcome, forwarder, moved_results
from brokernodes.server.protocol.forwarding import (
    FORWARDED_HEADER,
    ForwardOutcomeUnknownError,
    LeaderNotAvailableError,
    Outcome,
    binary_produce_frame,
    entry_json,
    error_from,
    stream_outcomes,
)
from brokernodes.server.protocol.responses import error_body
from brokernodes.server.ws.socket import HEARTBEAT_S, StreamSocket, close_after_error
from brokernodes.server.ws_registry import CLOSE_NORMAL

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker, EntryResult
    from brokernodes.server.protocol.ws_frames import BinaryProduceRequest, ProduceRequest

logger = logging.getLogger("sluice.broker.ws")

CONNECT_TIMEOUT_S = 5.0
MAX_UPSTREAM_MSG = 256 * 1024 * 1024


def _ws_url(broker: Broker, leader: int, path: str, query: Sequence[tuple[str, str]]) -> str:
    url = broker.image.broker_url(leader) if leader >= 0 else None
    if url is None or leader == broker.image.broker_id:
        raise LeaderNotAvailableError(
            "the partition has no other leader right now (an election is under way); retry"
        )
    url = url.replace("https://", "wss://", 1).replace("http://", "ws://", 1)
    return url + path + ("?" + urlencode(list(query)) if query else "")


def _handshake_error(status: int, leader: int) -> SluiceError:
    """A refused upgrade on the leader as the error the caller gets (the leader's body is
    not readable from a failed handshake; its status names the error)."""
    where = f"the leader (broker {leader}) refused the stream with HTTP {status}"
    err: SluiceError
    if status == 401:
        err = UnauthenticatedError(where)
    elif status == 404:
        err = UnknownTopicOrPartitionError(where)
    elif status == 416:
        err = OffsetOutOfRangeError(where + "; start from earliest or latest")
    elif status == 421:
        err = NotLeaderOrFollowerError(where + "; leadership moved: reconnect")
    elif 400 <= status < 500:
        err = SluiceError(where)
        err.error_code = {403: "TOPIC_AUTHORIZATION_FAILED", 429: "TOO_MANY_STREAMS"}.get(
            status, "INVALID_REQUEST"
        )
    else:
        err = LeaderNotAvailableError(where + "; retry")
    return err


async def _connect(
    broker: Broker, leader: int, path: str, query, authorization: str | None
) -> aiohttp.ClientWebSocketResponse:
    headers = {FORWARDED_HEADER: str(broker.image.broker_id)}
    if authorization is not None:
        headers["Authorization"] = authorization
    url = _ws_url(broker, leader, path, query)
    try:
        return (
            await forwarder(broker)
            .ws_session()
            .ws_connect(
                url,
                headers=headers,
                heartbeat=HEARTBEAT_S,
                max_msg_size=MAX_UPSTREAM_MSG,
                autoping=True,
                timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=5.0),
            )
        )
    except aiohttp.WSServerHandshakeError as e:
        raise _handshake_error(e.status, leader) from None
    except (aiohttp.ClientError, OSError, TimeoutError):
        raise LeaderNotAvailableError(
            f"the leader (broker {leader}) cannot be reached; nothing was sent: retry shortly"
        ) from None


# --- consume: a proxy -------------------------------------------------------------------


async def proxy_consume(
    broker: Broker, request: web.Request, sock: StreamSocket, leader: int, *, accepted: bool
) -> None:
    """Serve the consume stream from the leader's: frames copied both ways until either side
    closes (the leader's close code and reason reach the client)."""
    query = [(k, v) for k, v in request.query.items()]
    # refused: a plain HTTP error before the upgrade, else an error frame and close (caller)
    upstream = await _connect(broker, leader, "/sluice/v1/ws/consume", query, sock.authorization)
    try:
        if not accepted:
            await sock.accept(request)
        await _pipe(sock, upstream)
    finally:
        with contextlib.suppress(Exception):
            await upstream.close()


async def _pipe(sock: StreamSocket, upstream: aiohttp.ClientWebSocketResponse) -> None:
    down = sock.ws

    async def client_to_leader() -> None:
        while True:
            msg = await down.receive()
            if msg.type is WSMsgType.TEXT:
                data = msg.data.encode() if isinstance(msg.data, str) else msg.data
                await upstream.send_frame(data, WSMsgType.TEXT)
            elif msg.type is WSMsgType.BINARY:
                await upstream.send_bytes(msg.data)
            else:
                return

    async def leader_to_client() -> tuple[int, str] | None:
        while True:
            msg = await upstream.receive()
            if msg.type is WSMsgType.TEXT:
                data = msg.data.encode() if isinstance(msg.data, str) else msg.data
                await down.send_frame(data, WSMsgType.TEXT)
            elif msg.type is WSMsgType.BINARY:
                await down.send_frame(msg.data, WSMsgType.BINARY)
            elif msg.type is WSMsgType.CLOSE:  # the leader's own close frame
                code = msg.data if isinstance(msg.data, int) else upstream.close_code
                if not code or code == 1006:
                    return None
                return code, str(msg.extra or "")
            else:  # closed without a close frame, or an error: the leader went away
                return None

    reading = asyncio.create_task(client_to_leader())
    writing = asyncio.create_task(leader_to_client())
    ending = sock.session.ending
    try:
        done, _ = await asyncio.wait(
            (reading, writing, ending), return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        for t in (reading, writing):
            t.cancel()
        for t in (reading, writing):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
    if ending in done:
        code, error = ending.result()
        await sock.close(code, error)
    elif writing in done and not writing.cancelled() and writing.exception() is None:
        closed = writing.result()
        if closed is None:  # no close frame: the leader died or the link broke
            await close_after_error(
                sock,
                LeaderNotAvailableError(
                    "the partition's leader went away; reconnect from next_offset"
                ),
            )
        else:  # the leader's own close (its error frame went before it)
            await sock.close(closed[0], reason=closed[1])
    else:
        await sock.close(CLOSE_NORMAL)


# --- produce: per-leader upstream streams -----------------------------------------------


def relay(source: asyncio.Future, target: asyncio.Future) -> None:
    """``target`` gets ``source``'s outcome when it has one."""

    def done(f: asyncio.Future) -> None:
        if target.done():
            return
        if f.cancelled():
            target.cancel()
        elif f.exception() is not None:
            target.set_exception(f.exception())  # type: ignore[arg-type]
        else:
            target.set_result(f.result())

    source.add_done_callback(done)


class _Upstream:
    """One produce stream to a leader; answers are matched to requests in order."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, leader: int) -> None:
        self.ws = ws
        self.leader = leader
        self.pending: deque[asyncio.Future[dict[str, Any]]] = deque()
        self.broken: SluiceError | None = None
        self.reader = asyncio.create_task(self._read())

    async def send(self, data: bytes, binary: bool) -> asyncio.Future[dict[str, Any]]:
        if self.broken is not None:
            raise self.broken
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending.append(fut)
        try:
            await self.ws.send_frame(data, WSMsgType.BINARY if binary else WSMsgType.TEXT)
        except (ConnectionError, RuntimeError, aiohttp.ClientError):
            # may have gone out in part: the outcome is unknown
            self._fail(self._lost())
        return fut

    def _lost(self) -> SluiceError:
        return ForwardOutcomeUnknownError(
            f"the stream to the partition's leader (broker {self.leader}) broke after the "
            "request was sent; it may or may not have been appended: retry (an idempotent "
            "producer's retry is never stored twice)"
        )

    async def _read(self) -> None:
        ending: SluiceError | None = None
        try:
            while True:
                msg = await self.ws.receive()
                if msg.type is WSMsgType.TEXT:
                    doc = orjson.loads(msg.data)
                    if isinstance(doc, dict) and "id" not in doc and "error_code" in doc:
                        ending = error_from(doc, 500, f"broker {self.leader}")  # ends the stream
                        continue
                    if self.pending:
                        fut = self.pending.popleft()
                        if not fut.done():
                            fut.set_result(doc)
                else:
                    break
        except (orjson.JSONDecodeError, ConnectionError, aiohttp.ClientError):
            pass
        finally:
            self._fail(ending or self._lost())

    def _fail(self, error: SluiceError) -> None:
        self.broken = self.broken or error
        while self.pending:
            fut = self.pending.popleft()
            if not fut.done():
                fut.set_exception(error)

    async def close(self) -> None:
        self.reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.reader
        with contextlib.suppress(Exception):
            await self.ws.close()


class UpstreamProduce:
    """A produce stream's upstream streams, one per leader (module docstring)."""

    def __init__(
        self, broker: Broker, sock: StreamSocket, acks: int, transactional_id: str | None = None
    ) -> None:
        self.broker = broker
        self.sock = sock
        self.acks = "all" if acks == -1 else str(acks)
        self.query = [("acks", self.acks)]
        if transactional_id is not None:  # the leader verifies the batches with it
            self.query.append(("transactional_id", transactional_id))
        self.streams: dict[int, _Upstream] = {}
        self._opening: dict[int, asyncio.Lock] = {}

    async def _stream(self, leader: int) -> _Upstream:
        up = self.streams.get(leader)
        if up is not None and up.broken is None:
            return up
        lock = self._opening.setdefault(leader, asyncio.Lock())
        async with lock:
            up = self.streams.get(leader)
            if up is not None and up.broken is None:
                return up
            if up is not None:
                await up.close()
            ws = await _connect(
                self.broker,
                leader,
                "/sluice/v1/ws/produce",
                self.query,
                self.sock.authorization,
            )
            up = self.streams[leader] = _Upstream(ws, leader)
            return up

    def _leader(self, topic: str, partition: int) -> int:
        return self.broker.image.partition(topic, partition).leader

    async def send_frame(self, request: BinaryProduceRequest) -> asyncio.Future[dict[str, Any]]:
        """Send a binary frame on to its partition's leader, unchanged: the future of its
        answer (an error answer under the request's id if the upstream breaks)."""
        up = await self._stream(self._leader(request.topic, request.partition))
        sent = await up.send(binary_produce_frame(request), True)
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

        def done(f: asyncio.Future) -> None:
            if answer.done():
                return
            if f.cancelled():
                answer.cancel()
                return
            e = f.exception()
            if isinstance(e, SluiceError):
                answer.set_result({"id": request.id, **error_body(e)})
            elif e is not None:
                answer.set_exception(e)
            else:
                answer.set_result(f.result())

        sent.add_done_callback(done)
        return answer

    async def produce_entries(
        self, request: ProduceRequest, results: Sequence[EntryResult]
    ) -> None:
        """The records of a text request whose partitions are led elsewhere: one text
        request per leader; each result gets the leader's outcome."""
        moved = moved_results(results)
        if not moved:
            return
        by_leader: dict[int, list[EntryResult]] = {}
        for r in moved:
            by_leader.setdefault(self._leader(request.topic, r.partition), []).append(r)  # type: ignore[arg-type]
        waits = []
        for leader, rs in by_leader.items():
            doc = {
                "id": request.id,
                "topic": request.topic,
                "records": [entry_json(r.entry, r.partition) for r in rs],  # type: ignore[arg-type]
            }
            try:
                up = await self._stream(leader)
                waits.append((rs, await up.send(orjson.dumps(doc), False)))
            except SluiceError as e:
                for r in rs:
                    r.error = e
        for rs, fut in waits:
            try:
                answer = await fut
                outcomes = stream_outcomes(answer, len(rs), "the partition's leader")
            except SluiceError as e:
                outcomes = [Outcome(error=e) for _ in rs]
            for r, o in zip(rs, outcomes, strict=True):
                apply_outcome(r, o)

    async def close(self) -> None:
        for up in list(self.streams.values()):
            await up.close()
        self.streams.clear()
