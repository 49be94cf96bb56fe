"""The producer's WebSocket path (``produce_mode="websocket"``): binary produce frames on one
open ``/sluice/v1/ws/produce`` stream per broker.

Each request is one binary frame (``encode_binary_produce_header`` + the RecordBatch v2
bytes the HTTP path would POST) and one JSON text frame back, matched by request id, so a send
costs no HTTP request parsing or response building on either side. Failures surface as the
HTTP transport's errors, so the producer's retry logic is the same for both paths:

- an error answer -> ``BrokerError`` with the broker's ``error_code`` and details (a
  ``leader_url`` with NOT_LEADER_OR_FOLLOWER);
- the stream closing or breaking -> ``BrokerConnectionError`` (retriable) for every request
  still waiting, unless the broker said why it ends (e.g. UNAUTHENTICATED: that error);
- no answer within the request timeout -> ``ClientTimeoutError``, and the stream is closed
  (a late answer could not be told apart), so the next request opens a new one. One timer
  watches the oldest request's deadline (answers come in order), not one per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import struct
from typing import Any

import aiohttp
import orjson

from brokernodes.client.http import HttpTransport
from brokernodes.errors import BrokerConnectionError, BrokerError, ClientTimeoutError

__all__ = ["WS_PRODUCE_PATH", "ProduceStream", "ProduceStreams", "encode_binary_produce_header"]

WS_PRODUCE_PATH = "/sluice/v1/ws/produce"
# The binary produce frame's header (docs/data-plane-api.md; the broker parses it in
# brokernodes.server.protocol.ws_frames): version, request id, partition, topic length, then the
# topic name in UTF-8 and the batches.
_FRAME_VERSION = 1
_FRAME_HEADER = struct.Struct(">BQiH")
CLOSE_MESSAGE_TOO_BIG = 1009
# Codes the stream sends that HTTP would answer with a 5xx (so: retriable).
_SERVER_ERRORS = frozenset({"UNKNOWN_SERVER_ERROR", "KAFKA_STORAGE_ERROR"})


def encode_binary_produce_header(request_id: int, topic: str, partition: int) -> bytes:
    """The bytes before a binary produce frame's batches."""
    name = topic.encode()
    return _FRAME_HEADER.pack(_FRAME_VERSION, request_id, partition, len(name)) + name


def answer_error(doc: dict[str, Any], url: str) -> BrokerError:
    """An error answer ``{"id", "error_code", "message", ...}`` -> ``BrokerError``."""
    code = str(doc["error_code"])
    details = {k: v for k, v in doc.items() if k not in ("id", "error_code", "message")}
    return BrokerError(
        code,
        str(doc.get("message") or code),
        status=500 if code in _SERVER_ERRORS else None,
        url=url,
        details=details,
    )


class ProduceStream:
    """One open produce stream to one broker; requests pipelined, answers matched by id."""

    def __init__(self, url: str, ws: aiohttp.ClientWebSocketResponse, timeout_s: float) -> None:
        self.url = url
        self.ws = ws
        self.timeout_s = timeout_s
        self._loop = asyncio.get_running_loop()
        self._ids = itertools.count(1)
        # request id -> (answer future, frame size, answer deadline), in the order sent
        self._pending: dict[int, tuple[asyncio.Future, int, float]] = {}
        self._sweep: asyncio.TimerHandle | None = None  # checks the oldest request's deadline
        self._end_error: BaseException | None = None  # why the stream ended, once it has
        self._closing: asyncio.Task | None = None
        self._reader = self._loop.create_task(self._read())

    @property
    def open(self) -> bool:
        return self._end_error is None and not self.ws.closed

    async def send(self, topic: str, partition: int, batches: bytes) -> dict[str, Any]:
        """Send one request's batches; its answer (``base_offset``, ``last_offset``, ...)."""
        return await (await self.write(topic, partition, batches))

    async def write(self, topic: str, partition: int, batches: bytes) -> asyncio.Future:
        """Write one request's frame (it does not wait unless the socket pushes back) and
        return the future of its answer, which fails as ``send`` raises."""
        if not self.open:
            raise self._end_error or self._closed_error()
        request_id = next(self._ids)
        frame = encode_binary_produce_header(request_id, topic, partition) + batches
        future = self._loop.create_future()
        deadline = self._loop.time() + self.timeout_s
        self._pending[request_id] = (future, len(frame), deadline)
        try:
            await self.ws.send_bytes(frame)
        except (ConnectionError, RuntimeError, aiohttp.ClientError) as exc:
            self._pending.pop(request_id, None)
            self._end(BrokerConnectionError(f"produce stream to {self.url} broke: {exc}"))
            raise self._end_error from None
        if self._sweep is None:
            self._sweep = self._loop.call_at(deadline, self._check_deadline)
        return future

    def _check_deadline(self) -> None:
        """One timer for all requests, not one each: answers come in order, so only the
        oldest request's deadline matters. Past it, the stream ends with a timeout (a late
        answer could not be told apart) and the next request opens a new one."""
        self._sweep = None
        oldest = next(iter(self._pending.values()), None)
        if oldest is None:
            return
        deadline = oldest[2]
        if deadline > self._loop.time():
            self._sweep = self._loop.call_at(deadline, self._check_deadline)
            return
        self._end(
            ClientTimeoutError(
                f"no answer from {self.url} within {self.timeout_s:g}s; the broker may be "
                f"overloaded or unreachable"
            )
        )
        self._closing = self._loop.create_task(self.close())

    async def close(self) -> None:
        self._end(BrokerConnectionError(f"produce stream to {self.url} closed by the client"))
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader
        if not self.ws.closed:
            with contextlib.suppress(Exception):
                await self.ws.close()

    async def _read(self) -> None:
        ws = self.ws
        try:
            while True:
                msg = await ws.receive()
                if msg.type is aiohttp.WSMsgType.TEXT:
                    self._on_answer(msg.data)
                elif msg.type is aiohttp.WSMsgType.BINARY:
                    self._end(
                        BrokerError(
                            "UNKNOWN_SERVER_ERROR",
                            f"{self.url} sent a binary frame on a produce stream",
                            status=500,
                            url=self.url,
                        )
                    )
                    await ws.close()
                    return
                else:  # CLOSE, CLOSING, CLOSED, ERROR
                    self._end(self._closed_error())
                    return
        finally:
            self._end(self._closed_error())

    def _on_answer(self, text: str) -> None:
        try:
            doc = orjson.loads(text)
        except orjson.JSONDecodeError:
            doc = None
        if not isinstance(doc, dict):
            return
        request_id = doc.get("id")
        entry = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
        if entry is None:
            if isinstance(doc.get("error_code"), str):
                # an error for the whole stream (shutdown, revoked key, broker fault): the
                # close follows, and it is why every waiting request fails
                self._end_error = self._end_error or answer_error(doc, self.url)
            return
        future = entry[0]
        if future.done():
            return
        if "error_code" in doc:
            future.set_exception(answer_error(doc, self.url))
        else:
            future.set_result(doc)

    def _closed_error(self) -> BaseException:
        code = self.ws.close_code
        return BrokerConnectionError(
            f"the produce stream to {self.url} closed"
            + (f" (close code {code})" if code is not None else ""),
            url=self.url,
        )

    def _end(self, error: BaseException) -> None:
        """Fail every waiting request: with ``error``, or with the reason the broker gave.
        A frame over the broker's size limit closes the stream with 1009: the largest
        waiting request gets REQUEST_TOO_LARGE (so the producer splits or fails it)."""
        if self._end_error is None:
            self._end_error = error
        error = self._end_error
        pending, self._pending = self._pending, {}
        too_big = None
        if self.ws.close_code == CLOSE_MESSAGE_TOO_BIG and pending:
            too_big = max(pending, key=lambda i: pending[i][1])
        for request_id, (future, _, _) in pending.items():
            if future.done():
                continue
            if request_id == too_big:
                future.set_exception(
                    BrokerError(
                        "REQUEST_TOO_LARGE",
                        f"a produce frame of {pending[request_id][1]} bytes is over the "
                        f"broker's request size limit; lower max_request_size",
                        status=413,
                        url=self.url,
                    )
                )
            else:
                future.set_exception(error)


class ProduceStreams:
    """The producer's streams, one per broker URL, opened on first use and reopened when
    one has ended."""

    def __init__(self, transport: HttpTransport, acks: str, timeout_s: float) -> None:
        self._transport = transport
        self._params = {"acks": acks}
        self._timeout_s = timeout_s
        self._streams: dict[str, ProduceStream] = {}
        self._opening: dict[str, asyncio.Future] = {}

    def get(self, url: str) -> ProduceStream | None:
        """The open stream to ``url``, if there is one."""
        stream = self._streams.get(url)
        return stream if stream is not None and stream.open else None

    async def send(self, url: str, topic: str, partition: int, batches: bytes) -> dict[str, Any]:
        stream = self._streams.get(url)
        if stream is None or not stream.open:
            stream = await self._open(url)
        return await stream.send(topic, partition, batches)

    async def _open(self, url: str) -> ProduceStream:
        """One open at a time per broker; concurrent senders share it."""
        opening = self._opening.get(url)
        if opening is not None:
            return await asyncio.shield(opening)
        future = self._opening[url] = asyncio.get_running_loop().create_future()
        try:
            old = self._streams.pop(url, None)
            if old is not None:
                await old.close()
            ws = await self._transport.websocket(url + WS_PRODUCE_PATH, self._params)
            stream = self._streams[url] = ProduceStream(url, ws, self._timeout_s)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: the waiters re-raise it
            raise
        finally:
            del self._opening[url]
        future.set_result(stream)
        return stream

    async def close(self) -> None:
        streams, self._streams = list(self._streams.values()), {}
        for stream in streams:
            await stream.close()
