"""``WebSocketRegistry``: every open WebSocket stream of this broker, indexed by API key.

The broker uses it to close streams from outside their handlers: all of them with 1001 on
shutdown (``close_all``), or every stream opened with one API key when that key is revoked
(``close_key``; the control-plane issue calls it when the metadata log drops a key). A
handler registers its ``WebSocketSession`` when the socket opens, binds it to a key once the
client has authenticated, and waits on ``session.ending`` next to its own work: a close
request resolves that future with (close code, error), and the handler then closes the
socket itself, so only one task ever writes the close frame.

It also caps streams per tenant (``tenant_caps.streams_cap``): ``bind`` refuses to count one
more stream of a tenant at its cap (or of a broker at its ceiling) with ``TOO_MANY_STREAMS``
(before the upgrade for a key in the header: HTTP 429; after it for a first-frame key: the
error, then close 4429), so one tenant's streams never lock another out.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from brokernodes.errors import SluiceError
from brokernodes.server.protocol.responses import status_for
from brokernodes.server.tenant_caps import TenantCap, streams_cap

if TYPE_CHECKING:
    from brokernodes.security.quotas import QuotaManager

# RFC 6455 close codes, and the application range the broker uses (4000 + HTTP status)
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_UNSUPPORTED_DATA = 1003
CLOSE_POLICY_VIOLATION = 1008
CLOSE_MESSAGE_TOO_BIG = 1009
CLOSE_INTERNAL_ERROR = 1011
APPLICATION_CLOSE_BASE = 4000


@dataclass(eq=False, slots=True)
class WebSocketSession:
    """One open stream. ``key_id`` is set once authenticated; the credential itself is
    kept only by the handler (never here, never logged)."""

    stream: str  # "produce" or "consume"
    key_id: str | None = None
    principal: str | None = None
    tenant: str | None = None
    ending: asyncio.Future[tuple[int, SluiceError | None]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    def end(self, code: int, error: SluiceError | None = None) -> None:
        """Ask the handler to close with ``code`` (after sending ``error``, if any)."""
        if not self.ending.done():
            self.ending.set_result((code, error))

    @property
    def ended(self) -> bool:
        return self.ending.done()


class WebSocketRegistry:
    def __init__(self, cap: TenantCap | None = None) -> None:
        self._sessions: set[WebSocketSession] = set()
        self._by_key: dict[str, set[WebSocketSession]] = defaultdict(set)
        self._closed: dict[WebSocketSession, asyncio.Event] = {}
        self._bound: set[WebSocketSession] = set()  # authenticated: these count for caps
        self.cap = cap or streams_cap()

    # --- handler side ------------------------------------------------------------------

    def add(self, session: WebSocketSession) -> None:
        self._sessions.add(session)
        self._closed[session] = asyncio.Event()

    def admit(self, tenant: str | None, principal: str, quotas: QuotaManager | None = None) -> None:
        """Room for one more stream of ``principal`` (of ``tenant``), else raise
        ``TooManyStreamsError``; unauthenticated sockets count toward the broker's total."""
        mine = [s for s in self._bound if s.tenant == tenant]
        self.cap.check(
            quotas,
            tenant,
            principal,
            tenant_used=len(mine),
            principal_used=sum(1 for s in mine if s.principal == principal),
            total_used=len(self._sessions),
        )

    def bind(
        self,
        session: WebSocketSession,
        key_id: str,
        principal: str,
        tenant: str | None = None,
        quotas: QuotaManager | None = None,
    ) -> None:
        """The session authenticated with ``key_id``: counted for ``tenant``'s cap, or
        ``TooManyStreamsError`` when it is full (the handler then closes with 4429)."""
        if session not in self._bound:
            self._sessions.discard(session)  # not counting itself against the total
            try:
                self.admit(tenant, principal, quotas)
            finally:
                self._sessions.add(session)
        session.key_id = key_id
        session.principal = principal
        session.tenant = tenant
        self._by_key[key_id].add(session)
        self._bound.add(session)

    def remove(self, session: WebSocketSession) -> None:
        """The handler is done with the socket (closed, or the peer went away)."""
        self._sessions.discard(session)
        self._bound.discard(session)
        if session.key_id is not None:
            keyed = self._by_key.get(session.key_id)
            if keyed is not None:
                keyed.discard(session)
                if not keyed:
                    del self._by_key[session.key_id]
        event = self._closed.pop(session, None)
        if event is not None:
            event.set()

    # --- broker side -------------------------------------------------------------------

    def count(self, stream: str | None = None) -> int:
        if stream is None:
            return len(self._sessions)
        return sum(1 for s in self._sessions if s.stream == stream)

    def sessions_for_key(self, key_id: str) -> list[WebSocketSession]:
        return list(self._by_key.get(key_id, ()))

    def close_key(self, key_id: str, error: SluiceError, code: int | None = None) -> int:
        """Close every stream opened with ``key_id`` (revocation); returns how many."""
        sessions = self.sessions_for_key(key_id)
        for s in sessions:
            s.end(code if code is not None else close_code_for(error), error)
        return len(sessions)

    def close_all(self, code: int = CLOSE_GOING_AWAY, error: SluiceError | None = None) -> int:
        sessions = list(self._sessions)
        for s in sessions:
            s.end(code, error)
        return len(sessions)

    async def wait_closed(self, timeout: float) -> None:
        """Wait (bounded) until every session registered now has been removed."""
        waiters = [asyncio.ensure_future(e.wait()) for e in self._closed.values()]
        if not waiters:
            return
        try:
            await asyncio.wait(waiters, timeout=timeout)
        finally:
            for w in waiters:
                w.cancel()


def close_code_for(error: SluiceError) -> int:
    """The close code a stream-ending error gets: 4000 + its HTTP status (4401, 4404,
    4416, 4421, ...), or 1011 for the broker's own faults (5xx)."""
    status = status_for(error.error_code)
    return CLOSE_INTERNAL_ERROR if status >= 500 else APPLICATION_CLOSE_BASE + status
