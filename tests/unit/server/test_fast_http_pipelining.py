"""The lean HTTP/1.1 front's answers to pipelined requests: written together once the
requests read with them are served, in order, and never held behind a request that waits.

The front runs on a real event loop with a real aiohttp handler and middleware; its
transport records each ``write`` (the number of writes is what is under test)."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from brokernodes.server.http.fast import FastRoutes, FastServer
from brokernodes.storage.config import LogConfig
from tests.unit.server.test_partition_group_commit import batch, leader


class RecordingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def get_extra_info(self, name, default=None):
        return default

    def pause_reading(self) -> None:
        """Read flow control is not under test: every request is fed by the test."""

    def resume_reading(self) -> None:
        """See ``pause_reading``."""


async def _produce(request) -> web.Response:
    body = bytes(await request.content.readany())
    if body.startswith(b"wait"):
        await asyncio.sleep(0.2)  # a request that waits (a long poll, an acks=all produce)
    return web.Response(body=b"ok:" + body)


async def _passthrough(request, handler):
    return await handler(request)


def _front() -> tuple[FastServer, RecordingTransport]:
    app = web.Application()
    app.router.add_post("/p", _produce, name="produce_binary")
    routes = FastRoutes(app, _passthrough, methods={"produce_binary": "POST"})

    def no_fallback():
        raise AssertionError("every request here is the fast front's")

    server = FastServer(routes, no_fallback, body_timeout_s=5.0, max_request_bytes=1 << 20)
    transport = RecordingTransport()
    server().connection_made(transport)
    return server, transport


def _request(body: bytes, *, close: bool = False) -> bytes:
    head = f"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
    return (head + ("Connection: close\r\n" if close else "") + "\r\n").encode() + body


def _bodies(raw: bytes) -> list[bytes]:
    return [part.rsplit(b"\r\n\r\n", 1)[1] for part in raw.split(b"HTTP/1.1 200 OK")[1:]]


async def _settle(transport: RecordingTransport, answers: int, timeout: float = 2.0) -> None:
    async with asyncio.timeout(timeout):
        while len(_bodies(b"".join(transport.writes))) < answers:
            await asyncio.sleep(0.005)


def test_answers_to_requests_read_together_go_out_in_one_write():
    async def main():
        server, transport = _front()
        (conn,) = server.connections
        conn.data_received(b"".join(_request(b"r%d" % i) for i in range(4)))
        await _settle(transport, 4)
        await asyncio.sleep(0.02)
        assert len(transport.writes) == 1
        assert _bodies(transport.writes[0]) == [b"ok:r0", b"ok:r1", b"ok:r2", b"ok:r3"]
        # a lone request later is answered at once, on its own
        conn.data_received(_request(b"r4"))
        await _settle(transport, 5)
        assert _bodies(transport.writes[1]) == [b"ok:r4"]

    asyncio.run(main())


def test_an_answer_is_not_held_behind_a_request_that_waits():
    async def main():
        server, transport = _front()
        (conn,) = server.connections
        conn.data_received(_request(b"first") + _request(b"wait") + _request(b"last"))
        await _settle(transport, 1, timeout=0.15)  # well before the waiting one is done
        assert _bodies(b"".join(transport.writes)) == [b"ok:first"]
        await _settle(transport, 3)
        assert _bodies(b"".join(transport.writes)) == [b"ok:first", b"ok:wait", b"ok:last"]

    asyncio.run(main())


@pytest.mark.parametrize("split", [False, True])
def test_held_answers_go_out_before_a_close_and_with_a_partial_request(split):
    """A held answer is written when the next request is not whole yet (its rest may never
    come), and before the connection closes."""

    async def main():
        server, transport = _front()
        (conn,) = server.connections
        second = _request(b"second", close=True)
        conn.data_received(_request(b"first") + (second[:20] if split else second))
        if split:
            await _settle(transport, 1)
            assert not transport.closed
            conn.data_received(second[20:])
        await _settle(transport, 2)
        await asyncio.sleep(0.02)
        assert _bodies(b"".join(transport.writes)) == [b"ok:first", b"ok:second"]
        assert transport.closed

    asyncio.run(main())


def _durable_front(tmp_path, route: str):
    """A front whose ``route`` appends each body to a real leader partition whose log
    fsyncs (``flush.messages=1``, acks=all); the transport notes the recovery point at each
    write (what was on disk when those answers left)."""
    partition, flushed = leader(tmp_path, LogConfig(flush_messages=1))

    async def append(request) -> web.Response:
        body = bytearray(await request.content.readany())
        result = await partition.append_as_leader(body, acks=-1)
        return web.Response(body=b"ok:%d" % result.last_offset)

    app = web.Application()
    app.router.add_post("/p", append, name=route)
    routes = FastRoutes(app, _passthrough, methods={route: "POST"})
    server = FastServer(routes, lambda: None, body_timeout_s=5.0, max_request_bytes=1 << 20)
    transport = RecordingTransport()
    on_disk: list[int] = []
    write = transport.write

    def noted(data) -> None:
        on_disk.append(partition.log.recovery_point)
        write(data)

    transport.write = noted  # type: ignore[method-assign]
    server().connection_made(transport)
    return server, transport, partition, flushed, on_disk


@pytest.mark.parametrize(("route", "shared"), [("produce_binary", True), ("metadata", False)])
def test_pipelined_produces_share_fsyncs_and_are_never_answered_before_theirs(
    tmp_path, route, shared
):
    """Binary produces pipelined on one connection overlap their fsync waits (fewer fsyncs
    than requests), answers in order, each written only once its records are on disk; a
    route that is not pipelined runs one request at a time (one fsync each)."""

    async def main():
        server, transport, partition, flushed, on_disk = _durable_front(tmp_path, route)
        (conn,) = server.connections
        conn.data_received(b"".join(_request(bytes(batch(f"r{i}"))) for i in range(8)))
        await _settle(transport, 8, timeout=10)
        bodies = [_bodies(w) for w in transport.writes]
        assert [b for each in bodies for b in each] == [b"ok:%d" % i for i in range(8)]
        for answers, recovery_point in zip(bodies, on_disk, strict=True):
            assert all(int(a[3:]) < recovery_point for a in answers)
        assert (len(flushed) < 8) if shared else (len(flushed) == 8), flushed
        partition.log.close()

    asyncio.run(main())
