"""Connection limits on a real broker (both HTTP fronts): slow and idle sockets are closed at
their deadlines, and thousands of them cannot take the file descriptors an authenticated
tenant's produce and fetch need (docs/data-plane-api.md, "Connection limits")."""

from __future__ import annotations

import contextlib
import json
import resource
import selectors
import socket
import subprocess
import time
from collections.abc import Iterator
from http.client import HTTPConnection
from unittest import mock

import pytest

from tests.integration.broker.util import BINARY, batch

FRONTS = ("fast", "aiohttp")
AUTH = "Bearer sk_test.s3cret-test-value"
PRODUCE = "/sluice/v1/topics/events/partitions/0/batches"
HEAD_S, BODY_S, IDLE_S = 1.0, 1.0, 3.0
SLACK_S = 0.7
LINGER_S = 2.0  # aiohttp reads what is left of an unread body this long before closing

SLOW_HEAD = b"POST " + PRODUCE.encode() + b" HTTP/1.1\r\nHost: x\r\nAuthorization: "
SLOW_BODY = (
    f"POST {PRODUCE} HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH}\r\n"
    f"Content-Type: {BINARY}\r\nContent-Length: 4096\r\n\r\n"
).encode() + b"x"
# ... without credentials: it stays unauthenticated however its body arrives
SLOW_BODY_NO_KEY = (
    f"POST {PRODUCE} HTTP/1.1\r\nHost: x\r\nContent-Type: {BINARY}\r\nContent-Length: 4096\r\n\r\n"
).encode() + b"x"
# a WebSocket upgrade that never finishes its head, and one that upgrades without a key (a
# browser's way: the key comes in the first frame) and then sends nothing
WS_UPGRADE = (
    b"GET /sluice/v1/ws/consume?topic=events HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
    b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
)
SLOW_WS_HEAD = WS_UPGRADE
WS_WITHOUT_KEY = WS_UPGRADE + b"\r\n"
# a route only aiohttp serves: its handler reads the body (body.read_body's deadline)
SLOW_AIOHTTP_BODY = (
    f"POST /sluice/v1/groups/g1/heartbeat HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH}\r\n"
    "Content-Type: application/json\r\nContent-Length: 4096\r\n\r\n{"
).encode()


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.setblocking(False)
    return s


class Watch:
    """Sockets being watched for what the broker sends them and when it closes them."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()  # epoll: fds past FD_SETSIZE are fine
        self.kind: dict[socket.socket, str] = {}
        self.data: dict[socket.socket, bytes] = {}
        self.first_data: dict[socket.socket, float] = {}
        self.closed: dict[socket.socket, float] = {}
        self.started = time.monotonic()

    def add(self, s: socket.socket, kind: str, first: bytes = b"") -> None:
        if first:
            s.send(first)
        self.kind[s] = kind
        self.data[s] = b""
        self.selector.register(s, selectors.EVENT_READ)

    def open(self, kind: str | None = None) -> list[socket.socket]:
        return [s for s, k in self.kind.items() if s not in self.closed and k == (kind or k)]

    def poll(self, seconds: float, trickle: tuple[str, ...] = (), every: float = 0.2) -> None:
        """Watch for ``seconds``; every ``every`` s send one byte to each open socket of the
        ``trickle`` kinds (a slowloris keeping its request alive)."""
        end = time.monotonic() + seconds
        next_trickle = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= end:
                return
            if trickle and now >= next_trickle:
                next_trickle = now + every
                for s in self.open():
                    if self.kind[s] in trickle:
                        with contextlib.suppress(OSError):
                            s.send(b"a")
            for key, _ in self.selector.select(timeout=min(0.05, end - now)):
                self._read(key.fileobj)  # type: ignore[arg-type]

    def _read(self, s: socket.socket) -> None:
        try:
            chunk = s.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        now = time.monotonic() - self.started
        if chunk:
            self.first_data.setdefault(s, now)
            self.data[s] += chunk
            return
        self.closed[s] = now
        self.selector.unregister(s)

    def close(self) -> None:
        for s in self.kind:
            with contextlib.suppress(OSError, KeyError, ValueError):
                self.selector.unregister(s)
            s.close()
        self.selector.close()


def _status(raw: bytes) -> int | None:
    return int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/1.1 ") else None


def _error_code(raw: bytes) -> str | None:
    try:
        return json.loads(raw.split(b"\r\n\r\n", 1)[1])["error_code"]
    except (IndexError, ValueError, KeyError):
        return None


def _produce_and_fetch(conn: HTTPConnection, value: bytes) -> float:
    """One binary produce and a fetch of what it wrote on ``conn``; the seconds it took."""
    started = time.monotonic()
    conn.request(
        "POST",
        PRODUCE,
        body=batch([value]),
        headers={"Authorization": AUTH, "Content-Type": BINARY},
    )
    resp = conn.getresponse()
    answer = json.loads(resp.read())
    assert resp.status == 200, answer
    offset = answer["base_offset"]
    conn.request("GET", f"{PRODUCE}?offset={offset}", headers={"Authorization": AUTH})
    resp = conn.getresponse()
    body = resp.read()
    assert resp.status == 200 and value in body, (resp.status, body[:200])
    return time.monotonic() - started


@pytest.mark.parametrize("front", FRONTS)
def test_slow_and_idle_connections_are_closed_at_their_deadlines(broker_factory, front):
    b = broker_factory(
        extra_args=[
            f"--http-front={front}",
            f"--request-head-timeout-ms={int(HEAD_S * 1000)}",
            f"--body-timeout-ms={int(BODY_S * 1000)}",
            f"--connections-max-idle-ms={int(IDLE_S * 1000)}",
        ]
    )
    watch = Watch()
    try:
        kept = HTTPConnection("127.0.0.1", b.port, timeout=5)  # used once, then left idle
        _produce_and_fetch(kept, b"before")
        kept_idle_since = time.monotonic() - watch.started
        kept.sock.setblocking(False)
        watch.add(kept.sock, "kept")
        for _ in range(60):
            watch.add(_connect(b.port), "head", SLOW_HEAD)
            watch.add(_connect(b.port), "body", SLOW_BODY)
        for _ in range(30):
            watch.add(_connect(b.port), "aiohttp_body", SLOW_AIOHTTP_BODY)
            watch.add(_connect(b.port), "idle")
            watch.add(_connect(b.port), "ws_head", SLOW_WS_HEAD)
        opened = time.monotonic() - watch.started
        slow = ("head", "body", "aiohttp_body", "ws_head")
        watch.poll(0.3, trickle=slow)
        # meanwhile a tenant is served promptly
        with contextlib.closing(HTTPConnection("127.0.0.1", b.port, timeout=5)) as conn:
            assert _produce_and_fetch(conn, b"during") < 1.0
        watch.poll(IDLE_S + LINGER_S + 2 * SLACK_S, trickle=slow)  # the trickle never stops

        assert not watch.open(), {watch.kind[s] for s in watch.open()}
        for s, kind in watch.kind.items():
            closed, data = watch.closed[s], watch.data[s]
            if kind in ("head", "ws_head"):
                # the trickle did not keep it alive: 408 at the head deadline, then closed
                assert _status(data) == 408 and _error_code(data) == "REQUEST_TIMED_OUT", data
                assert closed <= opened + HEAD_S + SLACK_S, (closed, opened)
            elif kind in ("body", "aiohttp_body"):
                assert _status(data) == 408 and _error_code(data) == "REQUEST_TIMED_OUT", data
                assert watch.first_data[s] <= opened + BODY_S + SLACK_S
                assert closed <= opened + BODY_S + LINGER_S + SLACK_S, (closed, opened)
            elif kind == "idle":
                assert data == b"" and opened + IDLE_S - 0.2 <= closed <= opened + IDLE_S + SLACK_S
            else:  # the keep-alive connection: closed once idle for the idle timeout
                assert kept_idle_since + IDLE_S - 0.2 <= closed <= opened + IDLE_S + SLACK_S
    finally:
        watch.close()


@contextlib.contextmanager
def _open_files_limit(n: int) -> Iterator[None]:
    """Brokers started inside get RLIMIT_NOFILE ``n`` (soft and hard): they cannot raise it."""
    popen = subprocess.Popen

    def limited(*args, **kwargs):
        def preexec() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

        return popen(*args, preexec_fn=preexec, **kwargs)

    with mock.patch.object(subprocess, "Popen", limited):
        yield


FLOOD = 2000
BROKER_NOFILE = 1024


@pytest.mark.parametrize("front", FRONTS)
def test_two_thousand_idle_and_slow_sockets_leave_produce_and_fetch_working(broker_factory, front):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = FLOOD + 200
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            pytest.skip(f"this process may open only {hard} files; the test needs {need}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    with _open_files_limit(BROKER_NOFILE):
        b = broker_factory(extra_args=[f"--http-front={front}"])
    watch = Watch()
    try:
        early = HTTPConnection("127.0.0.1", b.port, timeout=5)  # a tenant connected before
        _produce_and_fetch(early, b"early")
        kinds = (
            ("idle", b""),
            ("head", SLOW_HEAD),
            ("body", SLOW_BODY_NO_KEY),
            ("ws", WS_WITHOUT_KEY),
        )
        for i in range(FLOOD):
            kind, first = kinds[i % len(kinds)]
            watch.add(_connect(b.port), kind, first)
            if i % 200 == 199:
                watch.poll(0.01)
        watch.poll(0.5)
        # a tenant's new connection and its existing one are both served promptly
        with contextlib.closing(HTTPConnection("127.0.0.1", b.port, timeout=5)) as conn:
            assert _produce_and_fetch(conn, b"new connection") < 2.0
        assert _produce_and_fetch(early, b"early connection") < 2.0
        watch.poll(0.5)
        refused = [s for s in watch.kind if _error_code(watch.data[s]) == "TOO_MANY_CONNECTIONS"]
        # the broker kept its unauthenticated sockets under its caps by evicting the oldest
        assert len(watch.open()) < BROKER_NOFILE // 2
        # (aiohttp answers the keyless bodies 401 at once; upgraded WebSockets are just closed)
        assert len(refused) >= FLOOD // 3
        ws = [s for s, kind in watch.kind.items() if kind == "ws"]
        assert all(watch.data[s].startswith(b"HTTP/1.1 101 ") for s in ws)
        assert sum(s in watch.closed for s in ws) >= len(ws) // 2
        sample = watch.data[refused[0]]
        assert _status(sample) == 503 and b"\r\nRetry-After: " in sample
        early.close()
    finally:
        watch.close()
    assert "Too many open files" not in b.output()
