"""Request body limits inside Daphne's HTTP server (``make up`` serves the control plane so).

Twisted's request buffers the whole body (to a temporary file past 100 KB) before Daphne
hands the request to the ASGI application, so neither ``BodyLimit`` nor Django's middleware
sees a 10 GB upload until it has been written to disk. ``install`` makes Daphne's request
refuse, with 413 ``PAYLOAD_TOO_LARGE`` and a closed connection, a body whose Content-Length
is over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` as soon as the headers arrive, and a body without a
length as soon as it passes the limit; nothing more of it is kept.
"""

from __future__ import annotations

import json

from django.conf import settings

from backend.core.exceptions import error_body, too_large_message


def _refuse(request) -> None:
    """Write the 413 straight to the connection and close it (the request never reached the
    application, so there is no response object to use)."""
    request.sluice_too_large = True
    body = json.dumps(error_body("PAYLOAD_TOO_LARGE", too_large_message())).encode()
    head = (
        b"HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
    )
    transport = request.channel.transport
    transport.write(head + body)
    transport.loseConnection()


def install() -> bool:
    """Patch Daphne's request class once; False when Daphne is not installed."""
    try:
        from daphne.http_protocol import WebRequest
    except ImportError:
        return False
    if getattr(WebRequest, "sluice_body_limit", False):
        return True
    got_length, content_chunk = WebRequest.gotLength, WebRequest.handleContentChunk

    def limited_got_length(self, length):
        self.sluice_received = 0
        if length is not None and length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            got_length(self, 0)
            _refuse(self)
            return
        got_length(self, length)

    def limited_content_chunk(self, data):
        if getattr(self, "sluice_too_large", False):
            return
        self.sluice_received = getattr(self, "sluice_received", 0) + len(data)
        if self.sluice_received > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            _refuse(self)
            return
        content_chunk(self, data)

    WebRequest.gotLength = limited_got_length
    WebRequest.handleContentChunk = limited_content_chunk
    WebRequest.sluice_body_limit = True
    return True
