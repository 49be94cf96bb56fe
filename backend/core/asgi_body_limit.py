"""An ASGI wrapper that bounds request bodies before Django reads them.

Under Daphne, Django's ASGI handler spools the whole body to a temporary file before any
middleware runs, so a 10 GB upload would fill the disk before ``RequestSizeLimitMiddleware``
could refuse it. Here a ``Content-Length`` over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is answered
413 ``PAYLOAD_TOO_LARGE`` at once (one that is not a number: 400), and a body without a
length (chunked) is counted as it arrives: past the limit the application sees the client
go away (``http.disconnect``) and the client gets the 413.
"""

from __future__ import annotations

import json

from django.conf import settings

from backend.core.exceptions import error_body, too_large_message


async def _answer(send, status: int, code: str, message: str) -> None:
    body = json.dumps(error_body(code, message)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _declared_length(scope) -> int | None:
    """The Content-Length (None: absent; -1: not a whole number)."""
    for name, value in scope.get("headers") or ():
        if name.lower() == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else -1
    return None


class BodyLimit:
    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        declared = _declared_length(scope)
        if declared == -1:
            return await _answer(send, 400, "INVALID_REQUEST", "Content-Length is not a number")
        if declared is not None and declared > limit:
            return await _answer(send, 413, "PAYLOAD_TOO_LARGE", too_large_message())
        received = 0
        too_large = started = False

        async def counted_receive():
            nonlocal received, too_large
            if too_large:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    too_large = True
                    return {"type": "http.disconnect"}
            return message

        async def watched_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, counted_receive, watched_send)
        if too_large and not started:
            await _answer(send, 413, "PAYLOAD_TOO_LARGE", too_large_message())
