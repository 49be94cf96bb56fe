"""``StreamSocket``: what the WebSocket streams (``ws.produce``, ``ws.consume``, the
proxy's ``group_streams``) share, in one module they import and that imports none of them:

- Authentication through the broker's single ``authorize()``: an ``Authorization: Bearer``
  header on the upgrade request (refused with a plain ``401`` before the upgrade), or, for
  browsers, which cannot set headers on a WebSocket, ``{"auth": "<api key>"}`` as the first
  text frame within ``AUTH_TIMEOUT_S`` (refused with an error message and close code 4401).
  The key is kept in the handler to authorize each request and is never logged.
- Every open socket is a ``WebSocketSession`` in ``broker.websockets`` (by API key), so the
  broker can close them: 1001 on shutdown, 4401 when a key is revoked.
- Errors that end a stream: a text frame ``{"error_code", "message", ...}``, then a close
  whose code is 4000 + the error's HTTP status (1011 for the broker's own faults).
- Metrics: ``sluice_websocket_connections{stream}``; bytes and records through the same
  counters as HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import WSMsgType, web

from brokernodes.errors import InvalidRequestError, SluiceError, UnauthenticatedError
from brokernodes.server.auth import Principal
from brokernodes.server.http.util import auth_header
from brokernodes.server.protocol.responses import error_body
from brokernodes.server.protocol.ws_frames import ProtocolViolation, auth_token, load_frame
from brokernodes.server.ws_registry import (
    CLOSE_POLICY_VIOLATION,
    CLOSE_UNSUPPORTED_DATA,
    WebSocketSession,
    close_code_for,
)

if TYPE_CHECKING:
    from brokernodes.server.broker import Broker

logger = logging.getLogger("sluice.broker.ws")

AUTH_TIMEOUT_S = 10.0
# ping every 20 s; a peer that does not answer within half of that is dropped
HEARTBEAT_S = float(os.environ.get("SLUICE_WS_HEARTBEAT_S", "20"))
CLOSE_TIMEOUT_S = 5.0  # how long a close waits for the peer's close frame


class StreamSocket:
    """One accepted WebSocket and its session: authentication, JSON frames, closing."""

    def __init__(
        self,
        broker: Broker,
        stream: str,
        *,
        max_msg_size: int,
        connect_check: Callable[[str | None], Principal],
    ) -> None:
        """``connect_check(authorization)`` goes through ``broker.authorize``: READ on the
        topic for a consume stream; for produce only the key (each request is then
        authorized for WRITE on its topic)."""
        self.broker = broker
        self.connect_check = connect_check
        self.ws = web.WebSocketResponse(
            heartbeat=HEARTBEAT_S,
            max_msg_size=max_msg_size,
            compress=False,  # batches are compressed by producers; keep the CPU for serving
            timeout=CLOSE_TIMEOUT_S,
            decode_text=False,
        )
        self.session = WebSocketSession(stream)
        self.authorization: str | None = None  # the credential: never logged or echoed
        self.principal: Principal | None = None

    # --- opening -------------------------------------------------------------------------

    def check_upgrade(self, request: web.Request) -> None:
        if not self.ws.can_prepare(request).ok:
            raise InvalidRequestError(
                f"{request.path} is a WebSocket endpoint: connect with a WebSocket client "
                "(GET with 'Upgrade: websocket')"
            )

    def authenticate_header(self, request: web.Request) -> bool:
        """Check an ``Authorization`` header before the upgrade (raises 401); False when
        there is none and the key must come as the first frame."""
        header = auth_header(request)
        if header is None:
            return False
        self.principal = self.connect_check(header)
        self.authorization = header
        return True

    async def accept(self, request: web.Request) -> None:
        """Upgrade; a key from the header is held to its tenant's stream cap first, so a
        tenant at its cap gets a plain HTTP 429."""
        registry = self.broker.websockets
        registry.add(self.session)
        try:
            if self.principal is not None:
                self._bind()  # no await between the cap's check and the count
            await self.ws.prepare(request)
        except BaseException:
            registry.remove(self.session)
            raise

    def _bind(self) -> None:
        assert self.principal is not None
        p = self.principal
        self.broker.websockets.bind(
            self.session, p.key_id, p.name, p.tenant, self.broker.quotas.refresh()
        )

    async def authenticate_first_frame(self) -> None:
        """Wait for ``{"auth": "<api key>"}`` (bounded); raises ``UnauthenticatedError``,
        or ``PeerGone`` when the client went away or the broker closed the socket."""
        receiving = asyncio.ensure_future(self.ws.receive(timeout=AUTH_TIMEOUT_S))
        ending = self.session.ending
        await asyncio.wait((receiving, ending), return_when=asyncio.FIRST_COMPLETED)
        if not receiving.done():  # shutting down while waiting for the key
            receiving.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await receiving
            code, error = ending.result()
            await self.close(code, error)
            raise PeerGone
        try:
            msg = receiving.result()
        except TimeoutError:
            raise UnauthenticatedError(
                f"no API key: send an 'Authorization: Bearer <key>' header, or "
                f'{{"auth": "<key_id>.<secret>"}} as the first message within '
                f"{AUTH_TIMEOUT_S:g} s"
            ) from None
        if msg.type is not WSMsgType.TEXT:
            raise (
                PeerGone()
                if msg.type in _GONE
                else UnauthenticatedError(
                    'the first message must be the text frame {"auth": "<key_id>.<secret>"}'
                )
            )
        try:
            token = auth_token(load_frame(msg.data))
        except ProtocolViolation:
            token = None
        if token is None:
            raise UnauthenticatedError(
                'this socket has no API key yet: the first message must be {"auth": '
                '"<key_id>.<secret>"} (or connect with an Authorization header)'
            )
        header = f"Bearer {token}"
        self.principal = self.connect_check(header)
        self.authorization = header
        self._bind()

    def authorize(self, operation: str, topic: str) -> Principal:
        """The broker's choke point, with this socket's credential, for one topic."""
        return self.broker.authorize(self.authorization, operation, "topic", topic)

    # --- sending -------------------------------------------------------------------------

    async def send_json(self, body: Any) -> None:
        await self.ws.send_frame(orjson.dumps(body), WSMsgType.TEXT)

    async def close(self, code: int, error: SluiceError | None = None, *, reason: str = "") -> None:
        """Send ``error`` (if any), then close with ``code``; the reason is the error code."""
        ws = self.ws
        if not ws.prepared or ws.closed:
            return
        if error is not None:
            reason = error.error_code
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self.send_json(error_body(error))
        with contextlib.suppress(ConnectionError, RuntimeError, asyncio.TimeoutError):
            await ws.close(code=code, message=reason.encode()[:123])

    async def close_for(self, error: SluiceError) -> None:
        if isinstance(error, ProtocolViolation):
            await self.close(CLOSE_POLICY_VIOLATION, error)
        else:
            await self.close(close_code_for(error), error)

    def release(self) -> None:
        self.broker.websockets.remove(self.session)


class PeerGone(Exception):
    """The client closed or vanished; nothing more to send."""


_GONE = (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR)


def binary_not_accepted(stream: str) -> ProtocolViolation:
    err = ProtocolViolation(
        f"the {stream} stream takes JSON text frames from the client, not binary frames"
    )
    err.close_code = CLOSE_UNSUPPORTED_DATA  # type: ignore[attr-defined]
    return err


async def close_after_error(sock: StreamSocket, error: SluiceError) -> None:
    code = getattr(error, "close_code", None)
    if code is not None:
        await sock.close(code, error)
    else:
        await sock.close_for(error)
