"""Both HTTP fronts hand handlers the same ``SluiceRequest`` for the same request, and the
lean front parses a query as ``parse_qsl`` does.

Each front listens on loopback as the broker's ``listen`` sets it up (the lean front in
front of aiohttp, or aiohttp alone), with the real middleware; a handler on a fast route
records what it was handed, and the same raw bytes are sent to each."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import parse_qsl

import pytest
from aiohttp import web

from brokernodes.server.app import build_app
from brokernodes.server.broker import Broker
from brokernodes.server.config import BrokerConfig
from brokernodes.server.http.body import read_body
from brokernodes.server.http.util import json_answer
from brokernodes.server.main import listen
from brokernodes.server.metadata.cluster import StaticMetadataSource
from brokernodes.server.protocol.request import BufferedBody, SluiceRequest, parse_query

PATH = "/sluice/v1/topics/events/partitions/0/batches"
BODY = b"\x00\x01body bytes\xff"
RAW = (
    f"POST {PATH}?acks=all&x=1&x=2&empty= HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    f"Authorization: Bearer k.s\r\nX-Trace: a:b\r\nContent-Length: {len(BODY)}\r\n\r\n"
).encode() + BODY


async def _seen_by_handler(tmp_path, front: str) -> dict:
    meta = tmp_path / "m.json"
    meta.write_text(json.dumps({"cluster_id": "c", "broker_id": 1, "brokers": []}))
    config = BrokerConfig(str(meta), str(tmp_path / front), 0, http_front=front)
    broker = Broker(config, StaticMetadataSource(meta))
    app = build_app(broker)
    seen: dict = {}

    async def probe(request):
        seen.update(
            type=type(request),
            method=request.method,
            path=request.path,
            query=list(request.query.items()),
            match_info=dict(request.match_info),
            route_name=request.route_name,
            headers={k: request.headers[k] for k in ("Host", "authorization", "X-Trace")},
            content_length=request.content_length,
            body=bytes(await read_body(request, max_bytes=1 << 20, timeout=5.0)),
            remote=request.remote,
            version=tuple(request.version),
            has_transport=request.transport is not None,
        )
        return web.Response(text="ok")

    # the binary produce route is a fast one: replace its handler with the probe
    (route,) = [r for r in app.router.routes() if r.name == "produce_binary"]
    route._handler = probe
    runner = web.AppRunner(app)
    await runner.setup()
    server, fast = await listen(config, app, runner)
    assert (fast is not None) == (front == "fast")
    try:
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(RAW)
        await writer.drain()
        async with asyncio.timeout(10):
            head = await reader.readuntil(b"\r\n\r\n")
        writer.close()
        assert head.startswith(b"HTTP/1.1 200"), head
        # which front answered: aiohttp names itself, the lean front does not
        assert (b"Server:" in head) == (front == "aiohttp"), head
    finally:
        server.close()
        await runner.cleanup()
    return seen


def test_both_fronts_hand_handlers_the_same_request(tmp_path):
    fast = asyncio.run(_seen_by_handler(tmp_path, "fast"))
    slow = asyncio.run(_seen_by_handler(tmp_path, "aiohttp"))
    assert fast["type"] is SluiceRequest and slow["type"] is SluiceRequest
    assert fast == slow
    assert fast["query"] == [("acks", "all"), ("x", "1"), ("x", "2"), ("empty", "")]
    assert fast["match_info"] == {"topic": "events", "partition": "0"}
    assert fast["route_name"] == "produce_binary"
    assert fast["body"] == BODY and fast["content_length"] == len(BODY)
    assert fast["remote"] == "127.0.0.1" and fast["version"] == (1, 1)
    assert fast["headers"]["X-Trace"] == "a:b"


QUERIES = [
    "",
    "offset=5&max_bytes=1000",
    "a=1&a=2&b",
    "a=&=b&&c=d=e",
    "&&",
    "x=1;y=2",
    "k=a+b&m=%41%2B",
    "k=%zz&plus=+",
    "tab=\t&uni=é",
]


@pytest.mark.parametrize("qs", QUERIES)
def test_the_lean_query_parse_is_parse_qsl(qs):
    assert parse_query(qs) == parse_qsl(qs, keep_blank_values=True)


def test_a_body_the_lean_front_read_whole_is_handed_over_without_a_copy():
    body = bytearray(b"batch bytes")
    request = SluiceRequest("POST", PATH, "", {}, None, BufferedBody(body), len(body), None)
    got = asyncio.run(read_body(request, max_bytes=1 << 20, timeout=5.0))
    assert got is body
    empty = SluiceRequest("POST", PATH, "", {}, None, BufferedBody(b""), 0, None)
    got = asyncio.run(read_body(empty, max_bytes=1 << 20, timeout=5.0))
    assert got == bytearray() and isinstance(got, bytearray)


async def _answer_of(tmp_path, front: str, make_answer) -> tuple[bytes, dict, bytes]:
    """The binary produce route's answer, from a handler returning ``make_answer()``, as
    each front writes it: (status line, headers, body)."""
    meta = tmp_path / "m.json"
    meta.write_text(json.dumps({"cluster_id": "c", "broker_id": 1, "brokers": []}))
    config = BrokerConfig(str(meta), str(tmp_path / front), 0, http_front=front)
    app = build_app(Broker(config, StaticMetadataSource(meta)))

    async def answering(request):
        return make_answer()

    (route,) = [r for r in app.router.routes() if r.name == "produce_binary"]
    route._handler = answering
    runner = web.AppRunner(app)
    await runner.setup()
    server, _ = await listen(config, app, runner)
    try:
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(RAW)
        await writer.drain()
        async with asyncio.timeout(10):
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head[:-4].split(b"\r\n")
            headers = dict(line.split(b": ", 1) for line in lines[1:])
            body = await reader.readexactly(int(headers[b"Content-Length"]))
        writer.close()
    finally:
        server.close()
        await runner.cleanup()
    return lines[0], headers, body


@pytest.mark.parametrize(
    "make_answer",
    [
        lambda: json_answer({"base_offset": 3, "ok": True}, throttle_ms=7),
        lambda: json_answer({}, 202),
    ],
)
def test_an_answer_reads_the_same_from_either_front(tmp_path, make_answer):
    fast = asyncio.run(_answer_of(tmp_path, "fast", make_answer))
    slow = asyncio.run(_answer_of(tmp_path, "aiohttp", make_answer))
    expected = make_answer()
    for status_line, headers, body in (fast, slow):
        assert status_line == f"HTTP/1.1 {expected.status} {expected.reason}".encode()
        assert body == expected.body
        assert headers[b"Content-Type"] == b"application/json"
        assert headers.get(b"Sluice-Throttle-Time-Ms") == (b"7" if expected.status == 200 else None)
        assert b"Date" in headers and b"Connection" not in headers
