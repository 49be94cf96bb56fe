"""The pipelined raw-socket HTTP/1.1 produce client every binary produce benchmark drives.

Each connection sends ``depth`` produce requests in one write, reads their ``depth`` answers
(status line and Content-Length only) and repeats until the deadline: redis-benchmark's
``-P`` pipelining, for HTTP requests. The client is a few lines of uvloop protocol code so
that the broker, not the client, is the side measured; ``run`` reports the client's own CPU
so a reader can check that (``PipelinedRun.client_busy``).

Requests come from a ``RequestSource``: the same bytes every time (``fixed``), or a fresh
set per write (idempotent producers, whose batches carry a new sequence each time).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

BINARY = "application/vnd.kafka.recordbatch.v2"

# depth -> the bytes of ``depth`` requests, written as one chunk
RequestSource = Callable[[int], bytes]


def request_head(port: int, path: str, authorization: str, length: int) -> bytes:
    """The head of one binary produce POST of ``length`` body bytes to ``path``."""
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: {authorization}\r\n"
        f"Content-Type: {BINARY}\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def fixed(request: bytes) -> RequestSource:
    """A source that sends the same request every time (no producer id: the ingest
    ceiling)."""
    return lambda depth: request * depth


@dataclass
class PipelinedRun:
    """One run of ``run``: answered requests, wall seconds, this process's CPU seconds."""

    requests: int
    seconds: float
    client_cpu_s: float

    @property
    def client_busy(self) -> float:
        """The client's CPU as a share of one core over the run (1.0: a core saturated)."""
        return self.client_cpu_s / self.seconds if self.seconds else 0.0


class _Connection(asyncio.Protocol):
    """One keep-alive connection: writes ``depth`` requests, reads as many answers."""

    def __init__(
        self,
        source: RequestSource,
        depth: int,
        deadline: float,
        done: asyncio.Future,
        latencies: list[float] | None,
    ):
        self.source = source
        self.latencies = latencies
        self.sent_at = 0.0
        self.depth = depth
        self.deadline = deadline
        self.done = done
        self.buffer = bytearray()
        self.waiting = 0
        self.answered = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        self._send()

    def _send(self) -> None:
        self.waiting = self.depth
        self.sent_at = time.perf_counter()
        self.transport.write(self.source(self.depth))

    def data_received(self, data: bytes) -> None:
        buf = self.buffer
        buf += data
        while self.waiting:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(buf[: end + 2])  # each header line with its CRLF
            start = head.find(b"Content-Length: ") + 16
            length = int(head[start : head.find(b"\r\n", start)])
            if len(buf) < end + 4 + length:
                return
            if not head.startswith(b"HTTP/1.1 200 "):
                body = bytes(buf[end + 4 : end + 4 + length])
                self._fail(RuntimeError(f"produce failed: {head[:40]!r} {body[:300]!r}"))
                return
            del buf[: end + 4 + length]
            self.waiting -= 1
            self.answered += 1
        now = time.perf_counter()
        if self.latencies is not None:
            self.latencies.append((now - self.sent_at) * 1000)
        if now < self.deadline:
            self._send()
        elif not self.done.done():
            self.done.set_result(self.answered)
            self.transport.close()

    def _fail(self, error: Exception) -> None:
        if not self.done.done():
            self.done.set_exception(error)
        self.transport.close()

    def connection_lost(self, exc) -> None:
        if not self.done.done():
            self.done.set_exception(exc or RuntimeError("the broker closed the connection"))


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def run(
    port: int,
    sources: list[RequestSource],
    depth: int,
    seconds: float,
    *,
    latencies: list[float] | None = None,
    host: str = "127.0.0.1",
) -> PipelinedRun:
    """One connection per source, each pipelining ``depth`` requests, for ``seconds``, on an
    uvloop event loop in this process (which does nothing else meanwhile, so its CPU is the
    client's). ``latencies`` collects milliseconds from each write to its last answer (per
    request at ``depth`` 1)."""
    import uvloop

    async def main() -> PipelinedRun:
        loop = asyncio.get_running_loop()
        cpu0 = _cpu()
        start = time.perf_counter()
        deadline = start + seconds
        dones = []
        for source in sources:
            done = loop.create_future()
            await loop.create_connection(
                lambda done=done, source=source: _Connection(
                    source, depth, deadline, done, latencies
                ),
                host,
                port,
            )
            dones.append(done)
        answered = sum(await asyncio.gather(*dones))
        return PipelinedRun(answered, time.perf_counter() - start, _cpu() - cpu0)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main())
