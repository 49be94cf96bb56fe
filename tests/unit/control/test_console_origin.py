"""The live tail's Origin check is exact: scheme, host and port of the console itself (or a
trusted origin); a page on another port of the same host is refused."""

from __future__ import annotations

import asyncio

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model

from backend.console.consumers import LiveTailConsumer
from backend.console.origins import origin_allowed


def scope(origin: str | None, host: str = "127.0.0.1:8000", scheme: str = "ws") -> dict:
    headers = [(b"host", host.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    return {"type": "websocket", "scheme": scheme, "headers": headers}


@pytest.mark.parametrize(
    "origin",
    ["http://127.0.0.1:8000", "HTTP://127.0.0.1:8000", "http://127.0.0.1:8000/"],
)
def test_the_consoles_own_origin_is_allowed(origin):
    assert origin_allowed(scope(origin))


@pytest.mark.parametrize(
    "origin",
    [
        None,
        "null",
        "http://127.0.0.1:8001",  # another port of the same host
        "http://127.0.0.1",  # port 80
        "https://127.0.0.1:8000",  # another scheme
        "http://localhost:8000",  # another host name
        "http://127.0.0.1:8000.evil.example",
        "http://user@127.0.0.1:8000",
        "http://127.0.0.1:99999",
    ],
)
def test_any_other_origin_is_refused(origin):
    assert not origin_allowed(scope(origin))


def test_default_ports_and_trusted_origins():
    assert origin_allowed(scope("http://example.test", host="example.test:80"))
    assert origin_allowed(scope("https://example.test", host="example.test", scheme="wss"))
    assert not origin_allowed(scope("https://console.example", host="127.0.0.1:8000"))
    assert origin_allowed(
        scope("https://console.example", host="127.0.0.1:8000"), ["https://console.example:443"]
    )


def _connect(user, origin: str) -> tuple[bool, int | None]:
    async def go():
        comm = WebsocketCommunicator(LiveTailConsumer.as_asgi(), "/ws/console/tail?topic=t")
        comm.scope.update(scope(origin))
        comm.scope["user"] = user
        comm.scope["session"] = {}
        connected, code = await comm.connect(timeout=5)
        await comm.disconnect()
        return connected, code

    return asyncio.run(go())


@pytest.mark.django_db(transaction=True)
def test_a_signed_in_browser_on_another_port_is_refused():
    user = get_user_model().objects.create_user(username="tailer", password="pw")
    assert _connect(user, "http://127.0.0.1:8001") == (False, 4403)
    # the console's own origin gets past the check (to the topic lookup: no organisation)
    connected, code = _connect(user, "http://127.0.0.1:8000")
    assert not connected and code != 4403, code
