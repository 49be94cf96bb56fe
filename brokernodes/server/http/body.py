"""Reading request bodies with a size cap and a deadline.

A body larger than ``max_bytes`` is refused from its Content-Length before a byte of it is
read (or as soon as a chunked body passes the cap); a client that does not deliver the whole
body within ``timeout`` seconds is answered REQUEST_TIMED_OUT and cut off. Either way only
that connection is affected. Known-length bodies land in one preallocated ``bytearray``
(one copy), which the log then rewrites in place; a body the lean front read whole
(``BufferedBody``) is that buffer already and is handed over as it is.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from brokernodes.errors import InvalidRequestError, RequestTimedOutError, RequestTooLargeError
from brokernodes.server.protocol.request import BufferedBody, SluiceRequest


async def read_body(
    request: SluiceRequest | web.BaseRequest, *, max_bytes: int, timeout: float
) -> bytearray:
    length = request.content_length
    if length is not None and length > max_bytes:
        raise RequestTooLargeError(
            f"request body of {length} bytes is over this broker's limit of {max_bytes} "
            f"bytes; send smaller requests"
        )
    stream = request.content
    if stream.__class__ is BufferedBody:  # the lean front's: read whole into its own buffer
        data = stream.take()
        if data.__class__ is bytearray and len(data) == length:
            return data  # type: ignore[return-value]
        stream = BufferedBody(data)
    if length is not None and stream.is_eof():
        # The whole body is already buffered (a small body arrives with its headers): the
        # reads below never wait, so there is no deadline to arm.
        return await _read_known(stream, length)
    try:
        async with asyncio.timeout(timeout):
            if length is not None:
                return await _read_known(stream, length)
            parts = bytearray()
            while True:
                chunk = await stream.readany()
                if not chunk:
                    return parts
                parts += chunk
                if len(parts) > max_bytes:
                    raise RequestTooLargeError(
                        f"request body is over this broker's limit of {max_bytes} bytes; "
                        f"send smaller requests"
                    )
    except TimeoutError:
        raise RequestTimedOutError(
            f"the request body did not arrive within {timeout:g} s; the connection is closed"
        ) from None


async def _read_known(stream, length: int) -> bytearray:
    """A body of ``length`` bytes into one preallocated buffer (one copy per chunk)."""
    buf = bytearray(length)
    view = memoryview(buf)
    pos = 0
    while pos < length:
        chunk = await stream.readany()
        if not chunk:
            raise InvalidRequestError(
                f"body ended after {pos} of the {length} bytes Content-Length announced"
            )
        end = pos + len(chunk)
        view[pos:end] = chunk
        pos = end
    return buf
