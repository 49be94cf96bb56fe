"""A lean HTTP/1.1 front for the routes clients send all the time, in front of aiohttp on
the same port.

Why: in a one-request-in-flight exchange aiohttp's own request/response machinery costs
~90 us of loop time per request on this class of machine (a bare asyncio protocol ~40 us,
a trivial aiohttp handler ~130 us), which was a third of a JSON produce, most of what one
tenant's requests cost another, and the larger part of a 1 MiB fetch's overhead
(docs/acls-and-quotas.md, docs/data-plane-api.md).

What: every connection starts here. This module is the I/O shell around the sans-IO core
``protocol.http1``: it feeds the core's ``RequestParser`` what the socket reads, acts on its
events, and writes what the core's serializer makes of the handler's answer. Which requests
this front serves itself (plain HTTP/1.1 to a route in ``FAST_ROUTES`` with that route's
method: produce, fetch, list offsets, metadata, producer ids; bodies of at most
``MAX_FAST_BODY`` bytes) and which it hands off is the core's rule. A served request runs
the *same* aiohttp handler through the *same* middleware (auth, ACLs, quotas, error bodies,
metrics), given the ``SluiceRequest`` both fronts hand handlers, and its answer is written
here: a ``web.Response`` serialised whole, or a fetch's ``SliceResponse`` as its head
followed by its segment file slices (``sendfile``, or copied with flow control). On a
``HandOff`` the connection, with every byte read so far, goes to a fresh aiohttp
``RequestHandler``, which then owns it for good (once the requests in flight are answered).
The shell keeps the timers.

Pipelining: answers go out strictly in request order, and the answers to requests read
together are written together (``_flush_out``). A request runs alone, after every earlier
one is answered, except a binary produce (``PIPELINED_ROUTES``) following another: it starts
as soon as the one before has appended (``append_order``: the partition signals when its
append lock is released) or has been answered, so appends keep the order sent while the
waits after them (the group commit's fsync, an acks=all wait) overlap, and one fsync covers
several requests of one connection. At most ``MAX_PIPELINED`` requests and
``MAX_PIPELINED_BYTES`` of their bodies are in flight; beyond that, and while more than two
bodies' worth of bytes wait in the parser, the socket is not read (TCP pushes back). A
request that fails to be served closes the connection after the answers before it; one
forwarded to the leader appends there, so the next request waits for its answer. Each
request's middleware applies auth and quotas as for any other: a throttled answer is held
back by its own throttle time, counted from when that request was recorded (the last
request's throttle covers the bytes of every request before it), as WebSocket produce does.
A client that closes mid-pipeline gets nothing more; requests already started still finish
(and append), requests not started are dropped.

Limits (``connection_limits``): a request head must arrive whole within the head timeout of
its first byte and its body within the body timeout of the head's end (``408
REQUEST_TIMED_OUT``, then the connection is closed; a trickle of bytes does not extend
either), a connection with no request for the idle timeout is closed, and each connection
counts among the unauthenticated ones until a request on it is authorized. A request without
``Host`` goes to aiohttp, whose middleware refuses it (HTTP/1.1 requires the header).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from brokernodes.errors import RequestTimedOutError
from brokernodes.server.auth import client_host
from brokernodes.server.http.connection_limits import (
    TOO_MANY_CONNECTIONS,
    ConnectionLimits,
    UnauthenticatedConnections,
    head_timed_out,
)
from brokernodes.server.http.sendfile import SEND_STALL_TIMEOUT_S, SliceResponse
from brokernodes.server.protocol import http1
from brokernodes.server.protocol.append_order import on_appended
from brokernodes.server.protocol.http1 import (
    BODY,
    END_OF_MESSAGE,
    HEAD,
    MAX_HEAD,
    NEED_DATA,
    Answer,
    Data,
    HandOff,
    Request,
    RequestParser,
)
from brokernodes.server.protocol.request import BufferedBody, MatchInfo, SluiceRequest

logger = logging.getLogger("sluice.broker.http")

# route name -> method: what the SDK and the REST clients send all the time (a connection
# keeps to the fast front while it sends only these)
FAST_ROUTES = {
    "metadata": "GET",
    "producer_ids": "POST",
    "produce_binary": "POST",
    "produce_json": "POST",
    "produce_json_batch": "POST",
    "fetch_binary": "GET",
    "fetch_json": "GET",
    "list_offsets": "GET",
}
MAX_FAST_BODY = 1024 * 1024  # larger bodies stream through aiohttp (its body deadline)
# routes whose pipelined requests on one connection run concurrently once the one before has
# appended (module docstring, "Pipelining"); one partition per request, so the order of
# appends is the order sent
PIPELINED_ROUTES = frozenset({"produce_binary"})
MAX_PIPELINED = 16  # requests of one connection in flight at once
MAX_PIPELINED_BYTES = 8 * 1024 * 1024  # ... and their bodies (one request always starts)
__all__ = ["FAST_ROUTES", "MAX_FAST_BODY", "MAX_HEAD", "FastRoutes", "FastServer"]

Handler = Callable[[Any], Awaitable[web.StreamResponse]]
Middleware = Callable[[Any, Handler], Awaitable[web.StreamResponse]]


class _Route:
    __slots__ = ("handler", "method", "name", "pattern")

    def __init__(self, name: str, method: str, pattern: re.Pattern[str], handler: Handler):
        self.name = name
        self.method = method
        self.pattern = pattern
        self.handler = handler


class FastRoutes:
    """The fast routes, taken from the built aiohttp app (same handlers, same patterns)."""

    def __init__(
        self,
        app: web.Application,
        middleware: Middleware,
        methods: Mapping[str, str] = FAST_ROUTES,
    ) -> None:
        self.middleware = middleware
        self.routes: list[_Route] = []
        for route in app.router.routes():
            if route.name is not None and methods.get(route.name) == route.method:
                info = route.resource.get_info()  # type: ignore[union-attr]
                pattern = info.get("pattern")
                if pattern is None and "path" in info:  # a path without variables
                    pattern = re.compile(re.escape(info["path"]))
                if pattern is not None:
                    self.routes.append(_Route(route.name, route.method, pattern, route.handler))
        missing = set(methods) - {r.name for r in self.routes}
        if missing:
            raise RuntimeError(f"fast HTTP routes not in the app: {sorted(missing)}")

    def match(self, method: str, path: str) -> tuple[_Route, MatchInfo] | None:
        """The parser's route function: (route, match info), or None (not served here)."""
        for route in self.routes:
            if route.method != method:
                continue
            m = route.pattern.fullmatch(path)
            if m is not None:
                info = MatchInfo(m.groupdict())
                info.route = route
                return route, info
        return None


def serialize(resp: web.StreamResponse | Answer, close: bool) -> bytes:
    """A handler's ``Answer`` or ``web.Response`` as HTTP/1.1 bytes."""
    if resp.__class__ is Answer:
        return http1.answer(resp, not close)  # type: ignore[arg-type]
    if not isinstance(resp, web.Response) or resp.prepared:
        raise TypeError(f"the fast HTTP path writes only plain responses, got {resp!r}")
    body = resp.body
    if body is None:
        body = b""
    elif not isinstance(body, bytes | bytearray):
        raise TypeError("the fast HTTP path writes only bytes bodies")
    return http1.response(resp.status, resp.reason, resp.headers.items(), body, not close)


def serialize_head(resp: SliceResponse, close: bool) -> bytes:
    """A ``SliceResponse``'s status line and headers (its body is sent from the files)."""
    if resp.prepared:
        raise TypeError("the fast HTTP path sends only unsent responses")
    return http1.response_head(
        resp.status, resp.reason, resp.headers.items(), resp.content_length or 0, not close
    )


class _InFlight:
    """One request being served, in the order read, with its answer once it is ready."""

    __slots__ = ("close", "done", "nbytes", "pipelined", "released", "resp", "started")

    def __init__(self, close: bool, nbytes: int, pipelined: bool) -> None:
        self.close = close  # Connection: close, or the connection ends after it
        self.nbytes = nbytes
        self.pipelined = pipelined
        self.started = False  # its task has begun running
        self.released = False  # appended or answered: the next request may start
        self.done = False
        self.resp: web.StreamResponse | object | None = None  # None: close the connection


_SENT = object()  # a fetch's answer, written already


class FastServer:
    """Protocol factory for the listening socket: fast protocols, aiohttp for the rest."""

    def __init__(
        self,
        routes: FastRoutes,
        fallback: Callable[[], asyncio.Protocol],
        *,
        body_timeout_s: float,
        max_request_bytes: int,
        limits: ConnectionLimits | None = None,
        pool: UnauthenticatedConnections | None = None,
    ) -> None:
        self.routes = routes
        self.fallback = fallback
        self.body_timeout_s = body_timeout_s
        self.limits = limits or ConnectionLimits(body_timeout_s=body_timeout_s)
        self.idle_timeout_s = self.limits.idle_timeout_s
        self.pool = pool  # None: unauthenticated connections are not counted
        self.max_body = min(MAX_FAST_BODY, max_request_bytes)
        self.connections: set[FastHttpProtocol] = set()
        self.closing = False

    def __call__(self) -> FastHttpProtocol:
        return FastHttpProtocol(self)

    async def shutdown(self, timeout: float) -> None:
        """Close idle fast connections now and busy ones once their answer is written."""
        self.closing = True
        for conn in list(self.connections):
            conn.close_when_idle()
        deadline = time.monotonic() + timeout
        while self.connections and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            conn.abort()


class FastHttpProtocol(asyncio.Protocol):
    """One client connection while it sends only fast requests (module docstring)."""

    def __init__(self, server: FastServer) -> None:
        self.server = server
        # the loop, kept: Python 3.11's get_running_loop makes a getpid syscall per call
        # (three per request here, 3 % of the broker's pre-built produce profile)
        self._loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.remote: str | None = None
        self.parser = RequestParser(server.routes.match, server.max_body)
        self._head: Request | None = None  # the request being read or served
        self._body: bytes | bytearray = b""
        self.busy = False
        self.closing = False
        self.paused = False
        self._writable: asyncio.Future[None] | None = None  # set while writing is paused
        self._timer: asyncio.TimerHandle | None = None  # the idle timeout
        self._head_deadline: asyncio.TimerHandle | None = None
        self._body_deadline: asyncio.TimerHandle | None = None
        self._evicted = False  # over the unauthenticated caps: close after this answer
        self._last_active = 0.0
        self._out: list[bytes] = []  # answers held back while pipelined requests follow
        self._flush_scheduled = False
        self._queue: deque[_InFlight] = deque()  # requests being served, in request order
        self._in_flight_bytes = 0  # their bodies
        self._pending: tuple[Request, bytes | bytearray] | None = None  # read, not started

    # --- asyncio.Protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        self.remote = peer[0] if isinstance(peer, tuple | list) and peer else None
        self.server.connections.add(self)
        self._last_active = self._loop.time()
        self._arm_idle_timer()
        if self.server.pool is not None:
            self.server.pool.track(transport, client_host(self.remote), self.evict)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        if self.server.pool is not None and self.transport is not None:
            self.server.pool.forget(self.transport)
        self.closing = True
        self._cancel_timers()
        self.resume_writing()  # a body being copied sees the transport closing

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        waiter, self._writable = self._writable, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _write(self, data: bytes) -> None:
        """Write part of a body, waiting (up to the stall timeout) while the transport's
        buffer is over its high-water mark: the copying fetch path's flow control."""
        transport = self.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("client went away")
        transport.write(data)
        if self._writable is not None:
            try:
                async with asyncio.timeout(SEND_STALL_TIMEOUT_S):
                    await asyncio.shield(self._writable)
            except TimeoutError:
                raise ConnectionResetError("client stopped reading") from None
            if transport.is_closing():
                raise ConnectionResetError("client went away")

    def _cancel_timers(self) -> None:
        for timer in (self._timer, self._head_deadline, self._body_deadline):
            if timer is not None:
                timer.cancel()
        self._timer = self._head_deadline = self._body_deadline = None

    def data_received(self, data: bytes) -> None:
        parser = self.parser
        parser.receive_data(data)
        if self.busy and len(parser.buf) > 2 * MAX_FAST_BODY and not self.paused:
            self.paused = True
            self.transport.pause_reading()  # type: ignore[union-attr]
        self._next()

    # --- request loop ------------------------------------------------------------------

    def _next(self) -> None:
        """Feed the parser and start what may start (module docstring, "Pipelining"): the
        next whole request, or a hand-off, or wait for bytes (arming the head or body
        deadline) or for the requests in flight."""
        if self.closing or self._evicted or self.server.closing:
            return
        parser = self.parser
        queue = self._queue
        while True:
            pending = self._pending
            if pending is None:
                if queue and not queue[-1].released:
                    return  # the newest request has not appended yet: keep the order
                while True:
                    event = parser.next_event()
                    kind = type(event)
                    if kind is Request:
                        self._head = event  # type: ignore[assignment]
                        if self._head_deadline is not None:
                            self._head_deadline.cancel()
                            self._head_deadline = None
                    elif kind is Data:
                        self._body = event.data  # type: ignore[union-attr]
                    elif event is END_OF_MESSAGE:
                        break
                    elif event is NEED_DATA:
                        if queue:  # the deadlines start once the requests in flight end
                            return
                        state = parser.state
                        if state is HEAD and self._head_deadline is None:
                            # from the head's first byte, never extended
                            self._head_deadline = self._loop.call_later(
                                self.server.limits.request_head_timeout_s, self._head_timed_out
                            )
                        elif state is BODY and self._body_deadline is None:
                            self._body_deadline = self._loop.call_later(
                                self.server.body_timeout_s, self._body_timed_out, self._head
                            )
                        return
                    elif kind is HandOff:
                        if not queue:  # else once the requests in flight are answered
                            self._hand_off()
                        return
                    else:  # PAUSED: after Connection: close
                        return
                if self._body_deadline is not None:
                    self._body_deadline.cancel()
                    self._body_deadline = None
                body, self._body = self._body, b""
                pending = self._pending = (self._head, body)  # type: ignore[assignment]
            head, body = pending  # type: ignore[misc]
            route = head.route[0]
            pipelined = route.name in PIPELINED_ROUTES
            if queue and not (
                pipelined
                and queue[-1].pipelined
                and len(queue) < MAX_PIPELINED
                and self._in_flight_bytes + len(body) <= MAX_PIPELINED_BYTES
            ):
                return  # it starts when the requests in flight allow
            self._pending = None
            self._start(head, body, not head.keep_alive, route.handler, pipelined)
            if not head.keep_alive:
                return  # the parser stays paused for good
            parser.start_next_cycle()
            if self.paused and len(parser.buf) <= 2 * MAX_FAST_BODY:
                self.paused = False
                self.transport.resume_reading()  # type: ignore[union-attr]

    def _start(
        self, head: Request, body: bytes | bytearray, close: bool, handler: Handler, pipelined: bool
    ) -> None:
        entry = _InFlight(close, len(body), pipelined)
        self._queue.append(entry)
        self._in_flight_bytes += entry.nbytes
        self.busy = True
        self._loop.create_task(self._serve(entry, head, body, handler))

    async def _serve(
        self, entry: _InFlight, head: Request, body: bytes | bytearray, handler: Handler
    ) -> None:
        entry.started = True
        if entry.pipelined:  # this task's context only: the partition calls it after the append
            on_appended.set(lambda: self._released(entry))
        route, match_info = head.route
        path = head.path
        request = SluiceRequest(
            route.method,
            path,
            head,  # its ``query``, parsed once per distinct head
            match_info,
            head.headers,
            BufferedBody(body),
            len(body),
            self.remote,
            self.transport,
        )
        resp: web.StreamResponse | None
        try:
            resp = await self.server.routes.middleware(request, handler)
        except Exception:
            logger.exception("fast HTTP path failed on %s; closing the connection", path)
            resp = None
        entry.resp = resp
        if resp.__class__ is SliceResponse and not self.closing:  # (isinstance: an ABC's)
            # a fetch runs alone (never pipelined): its head and body go out at once
            entry.resp = await self._send_slices(entry, resp, path)
        entry.done = True
        self._in_flight_bytes -= entry.nbytes
        newly = not entry.released
        entry.released = True
        if self.closing:
            return
        if self._queue[0] is entry:
            self._answer_ready()
        elif newly:
            self._next()

    async def _send_slices(
        self, entry: _InFlight, resp: SliceResponse, path: str
    ) -> web.StreamResponse | None:
        """A fetch's head then its file slices; None if the connection must close."""
        close = entry.close or self.server.closing or self._evicted or resp.keep_alive is False
        try:
            data = serialize_head(resp, close)
        except Exception:
            logger.exception("fast HTTP path failed on %s; closing the connection", path)
            return None
        self._flush_out()
        try:
            whole = await resp.send_over(self.transport, data, self._write)  # type: ignore[arg-type]
        except ConnectionError:
            whole = False
        except Exception:
            logger.exception("fast HTTP path failed sending %s; closing the connection", path)
            whole = False
        if not whole or close:
            return None
        return _SENT

    def _released(self, entry: _InFlight) -> None:
        """The request appended (``append_order``): the next pipelined one may start."""
        if not entry.released:
            entry.released = True
            if not self.closing:
                self._next()

    def _answer_ready(self) -> None:
        """Serialise the answers ready at the head of the queue, in request order, then
        start what may start; the answers are written now, or held for the next request's
        (``_flush_soon``) while one runs."""
        queue = self._queue
        out = self._out
        while queue and queue[0].done:
            entry = queue.popleft()
            resp = entry.resp
            if resp is None:  # failed, or a fetch that closes the connection
                self._close()
                return
            if resp is _SENT:
                continue
            draining = (self.server.closing or self._evicted) and not queue
            close = entry.close or draining or resp.keep_alive is False
            try:
                out.append(serialize(resp, close))
            except Exception:
                logger.exception("fast HTTP path cannot write an answer; closing the connection")
                self._close()
                return
            if close:
                self._close()
                return
        self.busy = bool(queue)
        self._last_active = self._loop.time()
        if not queue and (self.server.closing or self._evicted):
            self._close()
            return
        if self.paused and len(self.parser.buf) <= 2 * MAX_FAST_BODY:
            self.paused = False
            self.transport.resume_reading()  # type: ignore[union-attr]
        self._next()
        if not out or self.closing:
            return
        if self._queue:
            if not self._flush_scheduled:
                self._flush_scheduled = True
                self._loop.call_soon(self._flush_soon)
        else:
            self._flush_out()

    def _flush_soon(self) -> None:
        """Held answers go out once the requests after them have run as far as they can at
        once: if they wait (a long poll, an fsync), the answers are not held behind them."""
        queue = self._queue
        if queue and not queue[-1].started:
            self._loop.call_soon(self._flush_soon)  # its task runs first
            return
        self._flush_scheduled = False
        self._flush_out()

    def _flush_out(self, data: bytes = b"") -> None:
        """Write the held-back answers (and ``data``) in one write.

        Answers to pipelined requests (several in one read, as a pipelining client sends
        them) are held while the next request is served and go out together: one write, one
        TCP push and one wake-up of the client for the lot, as Redis answers a pipeline."""
        out = self._out
        if out:
            out.append(data)
            data = b"".join(out)
            out.clear()
        transport = self.transport
        if data and transport is not None and not transport.is_closing():
            transport.write(data)

    # --- handing off, timers, closing --------------------------------------------------

    def _hand_off(self) -> None:
        """aiohttp takes the connection, with everything read so far."""
        if self.closing or self.transport is None:
            return
        self._flush_out()
        self.closing = True
        self.server.connections.discard(self)
        self._cancel_timers()
        transport = self.transport
        handler = self.server.fallback()
        transport.set_protocol(handler)
        handler.connection_made(transport)
        data = self.parser.trailing_data
        self.parser.discard()
        if data:
            handler.data_received(data)
        if self.paused:
            self.paused = False
            transport.resume_reading()

    def _body_timed_out(self, head: Request) -> None:
        """The body did not arrive within ``body_timeout_s``: REQUEST_TIMED_OUT (through the
        middleware, as aiohttp's path answers it) and the connection is closed."""
        self._body_deadline = None
        if self.closing or self.busy:
            return
        self.parser.discard()
        timeout = self.server.body_timeout_s

        async def timed_out(request: Any) -> web.StreamResponse:
            raise RequestTimedOutError(
                f"the request body did not arrive within {timeout:g} s; the connection is closed"
            )

        self._start(head, b"", True, timed_out, False)

    def _head_timed_out(self) -> None:
        """A head did not arrive whole within the head timeout of its first byte:
        REQUEST_TIMED_OUT and the connection is closed."""
        self._head_deadline = None
        if self.closing or self.busy:
            return
        self.parser.discard()
        self._flush_out(head_timed_out(self.server.limits.request_head_timeout_s))
        self._close()

    def _arm_idle_timer(self) -> None:
        loop = self._loop
        self._timer = loop.call_at(self._last_active + self.server.idle_timeout_s, self._idle_check)

    def _idle_check(self) -> None:
        """The idle timeout (Kafka's connections.max.idle.ms): a connection that has not
        sent a request since its last answer (or since it opened) for that long is closed.
        A partial head is not activity: the head deadline bounds it."""
        self._timer = None
        if self.closing:
            return
        loop = self._loop
        if self.busy:
            self._last_active = loop.time()
        elif loop.time() >= self._last_active + self.server.idle_timeout_s:
            self._close()
            return
        self._arm_idle_timer()

    def evict(self) -> None:
        """Over the unauthenticated-connection caps: ``503 TOO_MANY_CONNECTIONS`` now if no
        request is being served, else close once its answer is written."""
        if self.busy:
            self._evicted = True
            return
        self.parser.discard()
        self._flush_out(TOO_MANY_CONNECTIONS)
        self._close()

    def close_when_idle(self) -> None:
        if not self.busy:
            self._close()

    def _close(self) -> None:
        self._flush_out()  # answers already made still go out
        self.closing = True
        self.server.connections.discard(self)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def abort(self) -> None:
        self.closing = True
        self.server.connections.discard(self)
        if self.transport is not None:
            self.transport.abort()
