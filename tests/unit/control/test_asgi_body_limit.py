"""The ASGI body limit: a body over DATA_UPLOAD_MAX_MEMORY_SIZE is refused with 413 before
the application reads it (declared) or as soon as it passes the limit (chunked)."""

from __future__ import annotations

import asyncio
import json

from django.test import override_settings

from backend.core.asgi_body_limit import BodyLimit


class ReadingApp:
    """Reads the whole body like Django's handler, then answers 200 (or stops on a
    disconnect, as Django's RequestAborted does)."""

    def __init__(self) -> None:
        self.called = False
        self.read = 0

    async def __call__(self, scope, receive, send):
        self.called = True
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            self.read += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def run(headers, chunks: list[bytes]) -> tuple[ReadingApp, int, dict | None, int]:
    app = ReadingApp()
    pending = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]
    served = 0
    sent: list[dict] = []

    async def receive():
        nonlocal served
        served += 1
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/api/v1/topics/", "headers": headers}
    asyncio.run(BodyLimit(app)(scope, receive, send))
    status = sent[0]["status"]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return app, status, json.loads(body) if status != 200 else None, served


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=100)
def test_a_declared_body_over_the_limit_is_refused_unread():
    app, status, body, served = run([(b"content-length", b"10737418240")], [b"x" * 10])
    assert (status, body["error_code"]) == (413, "PAYLOAD_TOO_LARGE")
    assert not app.called and served == 0


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=100)
def test_a_chunked_body_is_cut_off_at_the_limit():
    app, status, body, served = run([], [b"x" * 60] * 10)
    assert (status, body["error_code"]) == (413, "PAYLOAD_TOO_LARGE")
    assert app.read <= 100 and served == 2


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=100)
def test_bodies_within_the_limit_and_bad_lengths():
    app, status, _, _ = run([(b"content-length", b"100")], [b"x" * 50, b"y" * 50])
    assert status == 200 and app.read == 100
    app, status, body, _ = run([(b"content-length", b"-5")], [b""])
    assert (status, body["error_code"]) == (400, "INVALID_REQUEST") and not app.called
