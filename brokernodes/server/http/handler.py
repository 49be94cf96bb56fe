"""aiohttp's per-connection protocol with the broker's connection limits
(``connection_limits``), for connections aiohttp serves: all of them with ``--http-front
aiohttp``, and those the fast front hands over.

aiohttp already closes a connection that waits for its next request longer than its
keep-alive timeout (set to the idle timeout), counted from the end of the last answer; it
has no deadline for a request head that trickles in. ``GuardedRequestHandler`` adds one:
once the first byte of a head arrives, the whole head must follow within the head timeout,
or ``408 REQUEST_TIMED_OUT`` is written and the connection closed. It also counts the
connection among the unauthenticated ones until a request on it is authorized, and answers
a malformed request with a JSON ``400 INVALID_REQUEST`` and one rate-limited log line
instead of aiohttp's traceback per request (a client's garbage is no server error).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web, web_response
from aiohttp.web_protocol import RequestHandler

from brokernodes.server.auth import client_host
from brokernodes.server.http.connection_limits import (
    TOO_MANY_CONNECTIONS,
    ConnectionLimits,
    UnauthenticatedConnections,
    head_timed_out,
)

logger = logging.getLogger("sluice.broker.http")

# aiohttp sends "Server: Python/3.x aiohttp/3.y" unless a response sets its own; a broker
# does not announce the versions it runs (an attacker's shopping list).
web_response.SERVER_SOFTWARE = "Sluice"  # type: ignore[attr-defined]

MALFORMED_LOG_INTERVAL_S = 10.0


class MalformedRequestLog:
    """At most one log line per interval about malformed requests, with how many there
    were: a client sending garbage must not fill the log (or be able to write into it)."""

    def __init__(self, interval_s: float = MALFORMED_LOG_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._next = 0.0
        self._suppressed = 0

    def note(self, remote: str | None, status: int, exc: BaseException | None) -> None:
        now = time.monotonic()
        if now < self._next:
            self._suppressed += 1
            return
        self._next = now + self.interval_s
        more = f" (and {self._suppressed} more since the last line)" if self._suppressed else ""
        self._suppressed = 0
        logger.warning(
            "malformed HTTP request from %s answered %d: %s%s",
            remote,
            status,
            type(exc).__name__ if exc is not None else "bad request",
            more,
        )


MALFORMED = MalformedRequestLog()


class GuardedRequestHandler(RequestHandler):
    """aiohttp's ``RequestHandler`` with a head deadline, the unauthenticated-connection
    count and quiet malformed-request answers (module docstring)."""

    __slots__ = ("_conn", "_head_timer", "_limits", "_pool")

    def __init__(
        self,
        manager: web.Server,
        *,
        limits: ConnectionLimits,
        pool: UnauthenticatedConnections | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(manager, **kwargs)
        self._limits = limits
        self._pool = pool
        self._conn: asyncio.Transport | None = None
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._conn = transport  # type: ignore[assignment]
        if self._pool is not None:
            peer = transport.get_extra_info("peername")
            remote = peer[0] if isinstance(peer, tuple | list) and peer else None
            self._pool.track(transport, client_host(remote), self.evict)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_head_timer()
        if self._pool is not None and self._conn is not None:
            self._pool.forget(self._conn)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._between_requests():
            if self._head_timer is None and not self._force_close and not self._close:
                self._head_timer = self._loop.call_later(
                    self._limits.request_head_timeout_s, self._head_timed_out
                )
        else:
            self._cancel_head_timer()

    def _between_requests(self) -> bool:
        """No request is parsed, queued or being served (a head may be arriving), and the
        connection is to stay open (not lingering after a closing answer)."""
        return self._keepalive and not (
            self._messages
            or self._request_in_progress
            or self._upgraded
            or self._payload_parser is not None
        )

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._between_requests():
            self._refuse(head_timed_out(self._limits.request_head_timeout_s))

    def _refuse(self, answer: bytes) -> None:
        transport = self._conn
        if transport is not None and not transport.is_closing():
            transport.write(answer)
        self.force_close()  # closes the transport once the answer is written

    def evict(self) -> None:
        """Over the unauthenticated-connection caps: ``503 TOO_MANY_CONNECTIONS`` now if no
        request is being served, else close once its answer is written (a WebSocket still
        waiting for its key in the first frame is closed at once)."""
        if self._between_requests():
            self._refuse(TOO_MANY_CONNECTIONS)
        elif self._upgraded:
            self.force_close()
        else:
            self.close()

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status >= 500:
            return super().handle_error(request, status, exc, message)
        MALFORMED.note(request.remote, status, exc)
        if request.writer.output_size > 0:
            raise ConnectionError("an answer is partly sent; the connection is closed")
        reason = str(getattr(exc, "message", None) or message or "").strip()
        reason = reason.splitlines()[0][:100] if reason else "cannot be parsed"
        body = {"error_code": "INVALID_REQUEST", "message": f"malformed HTTP request: {reason}"}
        resp = web.Response(status=status, body=orjson.dumps(body), content_type="application/json")
        resp.force_close()
        return resp


def guarded_factory(
    server: web.Server, limits: ConnectionLimits, pool: UnauthenticatedConnections | None
) -> Callable[[], GuardedRequestHandler]:
    """A protocol factory like ``server`` (the ``AppRunner``'s), making guarded handlers
    with the same settings."""
    kwargs = dict(server._kwargs)  # the AppRunner's handler settings (keep-alive, buffers)
    kwargs["keepalive_timeout"] = limits.idle_timeout_s

    def make() -> GuardedRequestHandler:
        return GuardedRequestHandler(server, loop=server._loop, limits=limits, pool=pool, **kwargs)

    return make
