"""HttpTransport: bearer auth, and every failure turned into an error a person can act on.

Runs against a small aiohttp server in the test process: the transport's own behaviour is the
unit under test here (the broker's real answers are covered in tests/integration/client)."""

from __future__ import annotations

import asyncio
import socket

import pytest
from aiohttp import web

from brokernodes.client.http import BATCH_CONTENT_TYPE, HttpTransport, normalize_url
from brokernodes.errors import BrokerConnectionError, BrokerError, ClientTimeoutError


def run(coro, timeout: float = 10.0):
    async def bounded():
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


async def serve(routes) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.add_routes(routes)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_requests_carry_the_bearer_key_and_content_type():
    seen = {}

    async def handler(request: web.Request) -> web.Response:
        seen["auth"] = request.headers.get("Authorization")
        seen["type"] = request.headers.get("Content-Type")
        seen["body"] = await request.read()
        seen["acks"] = request.query.get("acks")
        return web.json_response({"base_offset": 7})

    async def main():
        runner, url = await serve([web.post("/p", handler)])
        transport = HttpTransport("id.secret")
        try:
            response = await transport.request(
                "POST",
                url + "/p",
                params={"acks": "all"},
                body=b"xyz",
                content_type=BATCH_CONTENT_TYPE,
            )
            return response.json()
        finally:
            await transport.close()
            await runner.cleanup()

    assert run(main()) == {"base_offset": 7}
    assert seen == {
        "auth": "Bearer id.secret",
        "type": BATCH_CONTENT_TYPE,
        "body": b"xyz",
        "acks": "all",
    }


def test_a_json_error_body_becomes_a_broker_error_with_its_details():
    async def handler(_request: web.Request) -> web.Response:
        body = {"error_code": "NOT_LEADER_OR_FOLLOWER", "message": "ask 2", "leader_id": 2}
        return web.json_response(body, status=421)

    async def main():
        runner, url = await serve([web.get("/x", handler)])
        transport = HttpTransport(None)
        try:
            with pytest.raises(BrokerError) as info:
                await transport.request("GET", url + "/x")
            return info.value
        finally:
            await transport.close()
            await runner.cleanup()

    error = run(main())
    assert (error.error_code, error.message, error.status) == (
        "NOT_LEADER_OR_FOLLOWER",
        "ask 2",
        421,
    )
    assert error.details == {"leader_id": 2}
    assert error.retriable
    assert str(error) == "NOT_LEADER_OR_FOLLOWER: ask 2"


def test_a_non_json_error_still_reads_well():
    async def handler(_request: web.Request) -> web.Response:
        return web.Response(status=502, text="Bad Gateway from a proxy")

    async def main():
        runner, url = await serve([web.get("/x", handler)])
        transport = HttpTransport(None)
        try:
            with pytest.raises(BrokerError) as info:
                await transport.request("GET", url + "/x")
            return info.value
        finally:
            await transport.close()
            await runner.cleanup()

    error = run(main())
    assert error.error_code == "UNKNOWN_SERVER_ERROR" and error.retriable
    assert "HTTP 502" in error.message and "Bad Gateway" in error.message


def test_connection_refused_names_the_url_and_what_to_check():
    url = f"http://127.0.0.1:{closed_port()}"

    async def main():
        transport = HttpTransport(None)
        try:
            with pytest.raises(BrokerConnectionError) as info:
                await transport.request("GET", url + "/sluice/v1/metadata")
            return info.value
        finally:
            await transport.close()

    error = run(main())
    assert url in error.message and "connection refused" in error.message
    assert "SLUICE_URL" in error.message and error.retriable


def test_a_silent_server_times_out():
    async def handler(_request: web.Request) -> web.Response:
        await asyncio.sleep(0.6)
        return web.Response()

    async def main():
        runner, url = await serve([web.get("/slow", handler)])
        transport = HttpTransport(None, request_timeout_s=0.2)
        try:
            with pytest.raises(ClientTimeoutError, match=r"within 0\.2s"):
                await transport.request("GET", url + "/slow")
        finally:
            await transport.close()
            await runner.cleanup()

    run(main())


def test_normalize_url():
    assert normalize_url("127.0.0.1:9092") == "http://127.0.0.1:9092"
    assert normalize_url(" https://b.example/ ") == "https://b.example"


def test_a_sharing_transport_reuses_idle_connections_with_slots_of_its_own():
    peers: list = []
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({"ok": True})

    async def fast(request: web.Request) -> web.Response:
        peers.append(request.transport.get_extra_info("peername"))
        return web.json_response({"ok": True})

    async def main():
        runner, url = await serve([web.get("/slow", slow), web.get("/fast", fast)])
        owner = HttpTransport(None, max_connections_per_host=1)
        sharer = HttpTransport(None, max_connections_per_host=1, share=owner)
        try:
            await owner.get_json(url + "/fast")  # leaves one idle keep-alive connection
            await sharer.get_json(url + "/fast")  # ... which the sharer reuses
            assert peers[0] == peers[1]
            # the owner's only slot is busy: the sharer's request does not queue behind it
            held = asyncio.ensure_future(owner.get_json(url + "/slow"))
            await asyncio.sleep(0.05)
            assert await asyncio.wait_for(sharer.get_json(url + "/fast"), 2) == {"ok": True}
            release.set()
            await held
            await sharer.close()  # not its session to close: the owner goes on
            assert await owner.get_json(url + "/fast") == {"ok": True}
        finally:
            await owner.close()
            await runner.cleanup()

    run(main())
