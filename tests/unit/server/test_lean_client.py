"""The lean client (forwarded calls, replica fetches) against a small HTTP server on
loopback: keep-alive reuse, Content-Length, chunked and read-to-close answers, and the
not-sent / sent split."""

from __future__ import annotations

import asyncio
import socket

import pytest

from brokernodes.server.lean_client import LeanClient, NotSent


def run(coro):
    async def bounded():
        async with asyncio.timeout(10):
            return await coro

    return asyncio.run(bounded())


async def serve(answers: list[bytes], seen: list[bytes], connections: list[int]):
    """A server answering each request with the next of ``answers`` (closing after a
    ``Connection: close`` one); records request heads and bodies."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        while answers:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            seen.append(head + await reader.readexactly(length))
            answer = answers.pop(0)
            writer.write(answer)
            await writer.drain()
            if b"close" in answer.lower():
                break
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_keep_alive_reuse_and_answer_framings():
    async def main():
        seen: list[bytes] = []
        conns: list[int] = []
        answers = [
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nSluice-X: 1\r\n\r\nok",
            b"HTTP/1.1 207 Multi\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
            b"HTTP/1.1 503 No\r\nConnection: close\r\n\r\nbye",
        ]
        server, port = await serve(answers, seen, conns)
        client = LeanClient(idle_s=30, connect_timeout_s=1)
        try:
            one = await client.request(
                "POST",
                "127.0.0.1",
                port,
                "/a?x=1",
                [("Authorization", "Bearer k")],
                b"BODY",
                read_timeout_s=5,
            )
            two = await client.request("GET", "127.0.0.1", port, "/b", [], None, read_timeout_s=5)
            three = await client.request("GET", "127.0.0.1", port, "/c", [], None, read_timeout_s=5)
        finally:
            await client.close()
            server.close()
        return one, two, three, seen, conns

    one, two, three, seen, conns = run(main())
    assert one == (200, [("Content-Length", "2"), ("Sluice-X", "1")], b"ok")
    assert two[0] == 207 and two[2] == b"abcde"
    assert three[0] == 503 and three[2] == b"bye"
    assert len(conns) == 1  # one connection kept alive for all three
    assert seen[0].startswith(b"POST /a?x=1 HTTP/1.1\r\n") and seen[0].endswith(b"\r\n\r\nBODY")
    assert b"Authorization: Bearer k" in seen[0] and b"Content-Length: 4" in seen[0]
    assert b"Content-Length" not in seen[1]


def test_refused_is_not_sent_and_a_dropped_answer_is_not():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]

    async def main():
        client = LeanClient(idle_s=30, connect_timeout_s=1)
        with pytest.raises(NotSent):
            await client.request("GET", "127.0.0.1", free, "/", [], None, read_timeout_s=1)
        server, port = await serve([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"], [], [])
        try:
            with pytest.raises(asyncio.IncompleteReadError):
                await client.request("POST", "127.0.0.1", port, "/", [], b"x", read_timeout_s=2)
        finally:
            await client.close()
            server.close()

    run(main())


def test_replica_fetches_take_the_lean_client_for_plain_http_leaders():
    """The replica fetcher's choice: a plain ``http://host:port`` leader URL (with the
    fetch path) goes through the lean client, TLS through aiohttp's."""
    from brokernodes.server.lean_client import plain_http

    assert plain_http("http://127.0.0.1:9092/sluice/v1/topics/t/partitions/0/batches") == (
        "127.0.0.1",
        9092,
        "/sluice/v1/topics/t/partitions/0/batches",
    )
    assert plain_http("http://broker-1/x") == ("broker-1", 80, "/x")
    assert plain_http("https://127.0.0.1:9443/x") is None
