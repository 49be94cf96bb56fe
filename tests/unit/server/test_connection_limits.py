"""Connection limits in-process: the unauthenticated-connection caps (eviction of the
oldest), caps derived from the open-file limit, the fast front's head deadline and idle
timeout, int64 query parameters, and the rate-limited malformed-request log line."""

from __future__ import annotations

import asyncio
import logging
import resource
import subprocess
import sys

import pytest
from aiohttp import web

from brokernodes.errors import InvalidRequestError
from brokernodes.security.quotas import ClientQuotas, QuotaManager
from brokernodes.server.auth import Principal
from brokernodes.server.connections import ConnectionQuotas
from brokernodes.server.http.connection_limits import (
    PENDING_BYTES_PER_CONNECTION,
    UNAUTHENTICATED_MEMORY_BUDGET,
    ConnectionLimits,
    UnauthenticatedConnections,
    limits_for,
    unauthenticated_caps,
)
from brokernodes.server.http.fast import MAX_FAST_BODY, MAX_HEAD, FastRoutes, FastServer
from brokernodes.server.http.handler import MalformedRequestLog
from brokernodes.server.protocol.params import int_param, partition_param
from brokernodes.server.throttle import DataPlaneQuotaExceededError


class Conn:
    def __init__(self, name: str, evicted: list[str]) -> None:
        self.name = name
        self.closed = False
        self._evicted = evicted

    def is_closing(self) -> bool:
        return self.closed

    def evict(self) -> None:
        self.closed = True
        self._evicted.append(self.name)


def _track(pool: UnauthenticatedConnections, evicted: list[str], name: str, ip: str) -> Conn:
    conn = Conn(name, evicted)
    pool.track(conn, ip, conn.evict)
    return conn


def test_over_the_per_address_cap_the_oldest_of_that_address_is_evicted():
    evicted: list[str] = []
    pool = UnauthenticatedConnections(max_total=100, max_per_ip=2)
    _track(pool, evicted, "a1", "10.0.0.1")
    _track(pool, evicted, "b1", "10.0.0.2")
    _track(pool, evicted, "a2", "10.0.0.1")
    newest = _track(pool, evicted, "a3", "10.0.0.1")
    assert evicted == ["a1"]  # not b1 (another address), not the newest
    assert pool.count("10.0.0.1") == 2 and len(pool) == 3 and not newest.closed
    assert pool.evicted == 1


def test_over_the_total_cap_the_oldest_overall_is_evicted_and_closed_ones_first_forgotten():
    evicted: list[str] = []
    pool = UnauthenticatedConnections(max_total=3, max_per_ip=3)
    first = _track(pool, evicted, "x", "10.0.0.1")
    _track(pool, evicted, "y", "10.0.0.2")
    _track(pool, evicted, "z", "10.0.0.3")
    first.closed = True  # the client went away; its entry is still there
    _track(pool, evicted, "w", "10.0.0.4")
    assert evicted == [] and len(pool) == 3  # dropping the closed one was enough
    _track(pool, evicted, "v", "10.0.0.5")
    assert evicted == ["y"] and len(pool) == 3


def test_authenticated_connections_leave_the_pool_and_are_never_evicted():
    evicted: list[str] = []
    pool = UnauthenticatedConnections(max_total=2, max_per_ip=2)
    tenant = _track(pool, evicted, "tenant", "10.0.0.1")
    pool.authenticated(tenant)
    for i in range(5):
        _track(pool, evicted, f"idle{i}", "10.0.0.1")
    assert "tenant" not in evicted and not tenant.closed
    assert evicted == ["idle0", "idle1", "idle2"] and pool.count("10.0.0.1") == 2


def test_a_handed_over_connection_is_counted_once_and_evicted_by_its_new_protocol():
    evicted: list[str] = []
    pool = UnauthenticatedConnections(max_total=1, max_per_ip=1)
    conn = _track(pool, evicted, "c", "10.0.0.1")
    calls: list[str] = []
    pool.track(conn, "10.0.0.1", lambda: calls.append("aiohttp"))  # the hand-off
    assert len(pool) == 1 and evicted == []
    _track(pool, evicted, "d", "10.0.0.1")
    assert calls == ["aiohttp"]
    pool.forget(conn)  # closing twice is harmless
    assert len(pool) == 1


def test_admitted_connections_are_reported_for_static_and_tenant_keys_not_over_quota():
    manager = QuotaManager()
    manager.set_quotas("org-a", ClientQuotas(connections=1))
    quotas = ConnectionQuotas(lambda: manager)
    admitted: list[object] = []
    quotas.on_admitted = admitted.append
    evicted: list[str] = []
    static, tenant, over = Conn("s", evicted), Conn("t", evicted), Conn("o", evicted)
    quotas.admit(static, Principal("User:test", "k0"))
    quotas.admit(tenant, Principal("User:app", "k1", "org-a"))
    with pytest.raises(DataPlaneQuotaExceededError):
        quotas.admit(over, Principal("User:app", "k1", "org-a"))
    assert admitted == [static, tenant]


def test_caps_stay_below_the_open_file_limit():
    for nofile in (256, 1024, 20_000, 1_048_576):
        total, per_ip = unauthenticated_caps(nofile)
        assert 0 < per_ip <= total < nofile - 128
    assert unauthenticated_caps(1024) == (384, 96)
    limits = limits_for(
        1024,
        request_head_timeout_s=1,
        body_timeout_s=2,
        idle_timeout_s=3,
        max_unauthenticated=100_000,  # configured above what the fds allow: derived cap
        max_unauthenticated_per_ip=50,
    )
    assert (limits.max_unauthenticated, limits.max_unauthenticated_per_ip) == (384, 50)


def test_by_default_the_total_is_also_bounded_by_what_pending_requests_may_buffer():
    assert PENDING_BYTES_PER_CONNECTION == MAX_FAST_BODY + MAX_HEAD
    timeouts = {"request_head_timeout_s": 1, "body_timeout_s": 2, "idle_timeout_s": 3}
    limits = limits_for(1_048_576, **timeouts)
    assert limits.max_unauthenticated == 2016 and limits.max_unauthenticated_per_ip == 504
    assert (
        limits.max_unauthenticated * PENDING_BYTES_PER_CONNECTION <= UNAUTHENTICATED_MEMORY_BUDGET
    )
    # an operator with the memory may raise it, up to the file-descriptor bound
    raised = limits_for(1_048_576, max_unauthenticated=10_000_000, **timeouts)
    assert raised.max_unauthenticated == unauthenticated_caps(1_048_576)[0]


def test_the_soft_open_file_limit_is_raised_to_the_hard_one():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 256:
        pytest.skip("needs a finite hard limit above 256")
    code = (
        "import resource; from brokernodes.server.http.connection_limits import raise_nofile_limit;"
        "print(raise_nofile_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)),
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.split()
    assert out == [str(hard), str(hard)]


def test_integer_parameters_must_fit_int64_and_partitions_int32():
    assert int_param({"offset": str(2**63 - 1)}, "offset") == 2**63 - 1
    assert int_param({"t": str(-(2**63))}, "t") == -(2**63)
    for raw in (str(2**63), str(-(2**63) - 1), "9" * 30, "1" * 5000):
        with pytest.raises(InvalidRequestError, match="'offset'"):
            int_param({"offset": raw}, "offset")
    assert partition_param(str(2**31 - 1)) == 2**31 - 1
    for raw in (str(2**31), "-1", "9" * 5000, "x"):
        with pytest.raises(InvalidRequestError, match="partition"):
            partition_param(raw)


def test_malformed_request_lines_are_rate_limited(caplog):
    log = MalformedRequestLog(interval_s=60)
    with caplog.at_level(logging.WARNING, "sluice.broker.http"):
        for _ in range(50):
            log.note("10.0.0.9", 400, ValueError("secret-looking \x00 bytes"))
    assert len(caplog.records) == 1
    assert "ValueError" in caplog.text and "secret-looking" not in caplog.text


# --- the fast front's deadlines on a real event loop with a recording transport ----------


class RecordingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closed = False

    def write(self, data) -> None:
        self.written += bytes(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def get_extra_info(self, name, default=None):
        return ("10.0.0.7", 5555) if name == "peername" else default

    def pause_reading(self) -> None:
        """Read flow control is not under test."""

    def resume_reading(self) -> None:
        """See ``pause_reading``."""


async def _ok(request) -> web.Response:
    return web.Response(body=b"ok")


async def _passthrough(request, handler):
    return await handler(request)


def _front(pool: UnauthenticatedConnections | None = None) -> FastServer:
    app = web.Application()
    app.router.add_post("/p", _ok, name="produce_binary")
    routes = FastRoutes(app, _passthrough, methods={"produce_binary": "POST"})
    limits = ConnectionLimits(request_head_timeout_s=0.2, body_timeout_s=0.2, idle_timeout_s=0.4)

    def no_fallback():
        raise AssertionError("every request here is the fast front's")

    return FastServer(
        routes, no_fallback, body_timeout_s=0.2, max_request_bytes=1 << 20, limits=limits, pool=pool
    )


def test_fast_front_cuts_a_trickled_head_at_its_deadline():
    async def main() -> tuple[RecordingTransport, float]:
        server = _front()
        transport = RecordingTransport()
        protocol = server()
        protocol.connection_made(transport)
        loop = asyncio.get_running_loop()
        started = loop.time()
        for byte in b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n":  # never ends
            if transport.closed:
                break
            protocol.data_received(bytes([byte]))
            await asyncio.sleep(0.01)
        return transport, loop.time() - started

    transport, took = asyncio.run(main())
    assert transport.closed and took < 0.4  # the 0.2 s deadline, not 47 bytes x 10 ms
    assert (
        transport.written.startswith(b"HTTP/1.1 408 ") and b"REQUEST_TIMED_OUT" in transport.written
    )


def test_fast_front_closes_an_idle_connection_after_its_answer():
    async def main() -> RecordingTransport:
        server = _front()
        transport = RecordingTransport()
        protocol = server()
        protocol.connection_made(transport)
        protocol.data_received(b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
        await asyncio.sleep(0.2)
        assert b" 200 OK" in transport.written and not transport.closed
        await asyncio.sleep(0.5)
        return transport

    assert asyncio.run(main()).closed


def test_fast_front_answers_an_evicted_idle_connection_503_with_retry_after():
    async def main() -> tuple[RecordingTransport, RecordingTransport]:
        pool = UnauthenticatedConnections(max_total=10, max_per_ip=1)
        server = _front(pool)
        old, new = RecordingTransport(), RecordingTransport()
        server().connection_made(old)
        server().connection_made(new)  # same address: over the cap of 1
        return old, new

    old, new = asyncio.run(main())
    assert old.closed and not new.closed
    assert old.written.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1\r\n" in old.written
    assert b'"error_code":"TOO_MANY_CONNECTIONS"' in old.written
