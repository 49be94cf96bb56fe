"""Limits on client connections that have not authenticated, so that idle or slow sockets
cannot use up the broker's file descriptors (docs/data-plane-api.md, "Connection limits").

A connection counts as *unauthenticated* from the moment it is accepted until one of its
requests passes ``Broker.authorize`` (``ConnectionQuotas.admit`` reports it here); after that
it counts against its tenant's ``max_connections`` quota instead. Unauthenticated connections
are capped per client address and in total. The cap is enforced when a connection is
accepted, by evicting the *oldest* unauthenticated connection (of that address, or overall)
rather than refusing the new one: a client that opens a connection and sends its request at
once is served even while another client holds thousands of idle sockets from the same
address, and the eviction costs the hoarder its longest-held socket. An evicted connection
between requests is answered ``503 TOO_MANY_CONNECTIONS`` with ``Retry-After`` and closed; one
in the middle of a request is closed once that request is answered.

The caps are kept below the process's ``RLIMIT_NOFILE`` (``raise_nofile_limit`` lifts the
soft limit to the hard one at start): a quarter of it (at least 256) is left for partition
logs, segment slices and outgoing connections, and unauthenticated connections may hold
half of the rest. By default the total is also bounded by memory: the fast front buffers up
to ``PENDING_BYTES_PER_CONNECTION`` of a request before it can be authorized, and all
unauthenticated connections together may hold at most ``UNAUTHENTICATED_MEMORY_BUDGET`` so
(a configured cap may go past the memory bound, never past the file-descriptor one).
"""

from __future__ import annotations

import logging
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

logger = logging.getLogger("sluice.broker.connections")

RETRY_AFTER_S = 1
EVICTION_LOG_INTERVAL_S = 10.0
MIN_RESERVED_FDS = 256
# what the fast front may buffer for one request before it runs (fast.MAX_FAST_BODY +
# MAX_HEAD): a body is whole before its handler authorizes it
PENDING_BYTES_PER_CONNECTION = 1024 * 1024 + 16 * 1024
UNAUTHENTICATED_MEMORY_BUDGET = 2 * 1024**3
DEFAULT_NOFILE_TARGET = 65536  # when the hard limit is unlimited


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The connection deadlines and unauthenticated caps the HTTP fronts enforce."""

    request_head_timeout_s: float = 20.0  # from a head's first byte to its blank line
    body_timeout_s: float = 30.0  # from the end of the head to the body's last byte
    idle_timeout_s: float = 600.0  # Kafka's connections.max.idle.ms
    max_unauthenticated: int = 4096
    max_unauthenticated_per_ip: int = 1024


def raise_nofile_limit() -> int:
    """Lift ``RLIMIT_NOFILE``'s soft limit to its hard limit; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, DEFAULT_NOFILE_TARGET)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft if soft != resource.RLIM_INFINITY else target
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as e:
        logger.warning("could not raise the open-file limit from %d to %d: %s", soft, target, e)
        return soft
    return target


def unauthenticated_caps(nofile: int) -> tuple[int, int]:
    """(total, per client address) unauthenticated connections for an open-file limit."""
    reserved = max(MIN_RESERVED_FDS, nofile // 4)
    total = max(16, (nofile - reserved) // 2)
    return total, _per_ip(total)


def _per_ip(total: int) -> int:
    return max(8, total // 4)


def limits_for(
    nofile: int,
    *,
    request_head_timeout_s: float,
    body_timeout_s: float,
    idle_timeout_s: float,
    max_unauthenticated: int = 0,
    max_unauthenticated_per_ip: int = 0,
) -> ConnectionLimits:
    """The limits for this process: the caps derived from the open-file limit and the memory
    budget, or configured ones (0: derived), never above the file-descriptor bound, so that
    unauthenticated sockets can never take the last file descriptors."""
    fd_total, _ = unauthenticated_caps(nofile)
    by_memory = UNAUTHENTICATED_MEMORY_BUDGET // PENDING_BYTES_PER_CONNECTION
    total = min(fd_total, max_unauthenticated or by_memory)
    per_ip = min(total, max_unauthenticated_per_ip or _per_ip(total))
    return ConnectionLimits(
        request_head_timeout_s=request_head_timeout_s,
        body_timeout_s=body_timeout_s,
        idle_timeout_s=idle_timeout_s,
        max_unauthenticated=total,
        max_unauthenticated_per_ip=per_ip,
    )


def error_bytes(status: int, reason: str, code: str, message: str, *extra: str) -> bytes:
    """A whole HTTP/1.1 error answer that closes the connection (written by a front that
    has no request object to answer through the middleware)."""
    body = orjson.dumps({"error_code": code, "message": message})
    head = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json", *extra]
    head.append(f"Content-Length: {len(body)}")
    head.append("Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


TOO_MANY_CONNECTIONS = error_bytes(
    503,
    "Service Unavailable",
    "TOO_MANY_CONNECTIONS",
    "this broker closed the connection: too many unauthenticated connections from your "
    "address (or in total); send a request with an API key as soon as a connection opens, "
    "and close connections you do not use",
    f"Retry-After: {RETRY_AFTER_S}",
)


def head_timed_out(timeout_s: float) -> bytes:
    return error_bytes(
        408,
        "Request Timeout",
        "REQUEST_TIMED_OUT",
        f"the request head did not arrive within {timeout_s:g} s; the connection is closed",
    )


class UnauthenticatedConnections:
    """The unauthenticated connections, oldest first, with the caps enforced on ``track``.

    A connection is any object with ``is_closing()`` (its transport); ``evict`` is how its
    current protocol closes it (``TOO_MANY_CONNECTIONS``). Closed connections are forgotten
    on ``forget`` or when they are met while evicting."""

    def __init__(self, max_total: int, max_per_ip: int) -> None:
        self.max_total = max_total
        self.max_per_ip = max_per_ip
        self._all: dict[Any, tuple[str | None, Callable[[], None]]] = {}  # insertion order
        self._by_ip: dict[str | None, dict[Any, None]] = {}
        self.evicted = 0
        self._logged_evicted = 0
        self._next_log = 0.0

    def __len__(self) -> int:
        return len(self._all)

    def count(self, ip: str | None) -> int:
        return len(self._by_ip.get(ip, ()))

    def track(self, conn: Any, ip: str | None, evict: Callable[[], None]) -> None:
        """Count a newly accepted connection (or, if it is counted already, route its
        eviction to ``evict``: a connection handed from one front to the other)."""
        if conn in self._all:
            self._all[conn] = (self._all[conn][0], evict)
            return
        self._all[conn] = (ip, evict)
        self._by_ip.setdefault(ip, {})[conn] = None
        self._evict_over(self._by_ip[ip], self.max_per_ip, conn)
        self._evict_over(self._all, self.max_total, conn)

    def authenticated(self, conn: Any) -> None:
        """A request on ``conn`` passed authorization: it no longer counts here."""
        self.forget(conn)

    def forget(self, conn: Any) -> None:
        entry = self._all.pop(conn, None)
        if entry is None:
            return
        ip = entry[0]
        same_ip = self._by_ip.get(ip)
        if same_ip is not None:
            same_ip.pop(conn, None)
            if not same_ip:
                del self._by_ip[ip]

    def _evict_over(self, conns: dict[Any, Any], cap: int, newest: Any) -> None:
        """Drop closed connections, then evict the oldest live ones, until ``conns`` (all
        of them, or one address's) is within ``cap``; never ``newest``."""
        while len(conns) > cap:
            conn = next(iter(conns))
            if conn is newest:
                return
            ip, evict = self._all[conn]
            self.forget(conn)
            if not conn.is_closing():
                self.evicted += 1
                evict()
                self._log_eviction(ip)

    def _log_eviction(self, ip: str | None) -> None:
        """One warning line per interval at most: operators learn of a flood, and the flood
        cannot fill the log."""
        now = time.monotonic()
        if now < self._next_log:
            return
        self._next_log = now + EVICTION_LOG_INTERVAL_S
        logger.warning(
            "closed %d unauthenticated connections over the caps (%d in total, %d per "
            "address) since the last such line; the latest from %s",
            self.evicted - self._logged_evicted,
            self.max_total,
            self.max_per_ip,
            ip,
        )
        self._logged_evicted = self.evicted
