"""A lean HTTP/1.1 keep-alive client for a broker's calls to other brokers: forwarded calls
(``http/forward.py``) and replica fetches (``replica/fetcher.py``).

Why not aiohttp's client: a forwarded call costs the forwarding broker a whole client
exchange on top of serving the call, a follower makes one exchange per fetch, and the broker
has one event loop. aiohttp's client
(URL objects, cookie jar, tracing, a response object with its own parser) costs several
times what this does for the one shape a broker talks to another broker in: a request with
a known-length body, an answer with ``Content-Length`` (chunked and read-to-close answers are
read too). Connections are kept per peer and reused while idle for less than ``idle_s``.

Failures are split the way forwarding needs them (``http/forward.py``): ``NotSent`` when
the connection could not be opened (nothing reached the peer; safe to retry), anything else
(``ConnectionError``, ``TimeoutError``, ``IncompleteReadError``) once the request may have
been written.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from urllib.parse import urlsplit

MAX_HEAD = 64 * 1024


class NotSent(OSError):
    """No connection to the peer: nothing of the request was sent."""


class BadAnswer(ConnectionError):
    """The peer's answer is not HTTP/1.1 this client reads."""


_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def plain_http(url: str) -> tuple[str, int, str] | None:
    """(host, port, path) of an ``http://host[:port][/path]`` URL, the one kind this client
    speaks to; None for anything else (TLS), which callers send through aiohttp's client."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return None
    return parts.hostname, parts.port or 80, parts.path


class LeanClient:
    def __init__(
        self,
        *,
        idle_s: float,
        connect_timeout_s: float,
        max_idle: int = 64,
        max_per_peer: int = 256,
    ) -> None:
        self.idle_s = idle_s
        self.connect_timeout_s = connect_timeout_s
        self.max_idle = max_idle  # per peer
        self.max_per_peer = max_per_peer  # requests in flight (so connections) per peer
        self._idle: dict[tuple[str, int], list[tuple[_Conn, float]]] = {}
        self._slots: dict[tuple[str, int], asyncio.Semaphore] = {}

    async def _connection(self, host: str, port: int) -> _Conn:
        idle = self._idle.get((host, port))
        now = time.monotonic()
        while idle:
            conn, since = idle.pop()
            reader, writer = conn
            if now - since < self.idle_s and not reader.at_eof() and not writer.is_closing():
                return conn
            writer.close()
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                return await asyncio.open_connection(host, port, limit=MAX_HEAD)
        except (OSError, TimeoutError) as e:
            raise NotSent(f"cannot connect to {host}:{port}: {e}") from None

    def _release(self, host: str, port: int, conn: _Conn) -> None:
        idle = self._idle.setdefault((host, port), [])
        if len(idle) < self.max_idle:
            idle.append((conn, time.monotonic()))
        else:
            conn[1].close()

    async def request(
        self,
        method: str,
        host: str,
        port: int,
        target: str,
        headers: Iterable[tuple[str, str]],
        body: bytes | bytearray | None,
        *,
        read_timeout_s: float,
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """(status, headers, body) of one exchange with ``host:port`` (waits while
        ``max_per_peer`` exchanges with it are in flight)."""
        slots = self._slots.get((host, port))
        if slots is None:
            slots = self._slots[(host, port)] = asyncio.Semaphore(self.max_per_peer)
        async with slots:
            return await self._exchange(method, host, port, target, headers, body, read_timeout_s)

    async def _exchange(
        self,
        method: str,
        host: str,
        port: int,
        target: str,
        headers: Iterable[tuple[str, str]],
        body: bytes | bytearray | None,
        read_timeout_s: float,
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = await self._connection(host, port)
        reader, writer = conn
        lines = [f"{method} {target} HTTP/1.1", f"Host: {host}:{port}"]
        lines += [f"{k}: {v}" for k, v in headers]
        if body or method in ("POST", "PUT"):
            lines.append(f"Content-Length: {len(body or b'')}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        keep = False
        try:
            if body:
                writer.writelines((head, body))
            else:
                writer.write(head)
            async with asyncio.timeout(read_timeout_s):
                status, answer_headers, data, keep = await _read_answer(reader, method)
        finally:
            if keep:
                self._release(host, port, conn)
            else:
                writer.close()
        return status, answer_headers, data

    async def close(self) -> None:
        for idle in self._idle.values():
            for (_, writer), _ in idle:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
        self._idle.clear()


async def _read_answer(
    reader: asyncio.StreamReader, method: str
) -> tuple[int, list[tuple[str, str]], bytes, bool]:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        raise BadAnswer("an answer head over 64 KiB") from None
    head = raw.decode("latin-1").split("\r\n")
    parts = head[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise BadAnswer(f"not an HTTP/1.1 status line: {head[0][:80]!r}")
    status = int(parts[1])
    headers: list[tuple[str, str]] = []
    length: int | None = None
    chunked = False
    keep = parts[0] == "HTTP/1.1"
    for line in head[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        value = value.strip()
        lower = name.lower()
        if lower == "content-length":
            length = int(value)
        elif lower == "transfer-encoding":
            chunked = "chunked" in value.lower()
        elif lower == "connection":
            keep = value.lower() != "close" and (keep or value.lower() == "keep-alive")
        headers.append((name, value))
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return status, headers, b"", keep
    if chunked:
        data = bytearray()
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    pass
                return status, headers, bytes(data), keep
            data += await reader.readexactly(size)
            await reader.readexactly(2)
    if length is not None:
        return status, headers, await reader.readexactly(length), keep
    return status, headers, await reader.read(), False  # to the close
