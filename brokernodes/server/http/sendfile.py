"""Send segment file ranges as an HTTP response body: zero-copy (``os.sendfile``) or copying.

Fetch opens every ``FileSlice``'s file before the response starts (``open_slices``), so
retention or compaction unlinking a segment afterwards cannot break the send: the open fd
keeps the bytes. A file that vanished before it was opened makes ``open_slices`` return None
and the caller reads the log again.

The handler answers with a ``SliceResponse`` holding the open slices; aiohttp or the lean
front (``http.fast``) sends it. Zero-copy works under uvloop too, which has no
``loop.sendfile``: once the head is written and the transport's write buffer is empty,
``os.sendfile`` writes straight to the transport's non-blocking socket; on EAGAIN it waits
for writability on a ``dup`` of the socket fd (the loop refuses ``add_writer`` on an fd a
transport owns).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from brokernodes.storage.files import FileSlice

logger = logging.getLogger("sluice.broker.fetch")

COPY_CHUNK = 256 * 1024
SEND_STALL_TIMEOUT_S = 60.0  # a client that reads nothing for this long is cut off


@dataclass(slots=True)
class OpenSlice:
    fd: int
    position: int
    length: int


def open_slices(slices: list[FileSlice]) -> list[OpenSlice] | None:
    """Open each slice's file (one fd per distinct path); None if one vanished."""
    opened: list[OpenSlice] = []
    fds: dict[str, int] = {}
    try:
        for s in slices:
            fd = fds.get(s.path)
            if fd is None:
                fd = fds[s.path] = os.open(s.path, os.O_RDONLY)
            opened.append(OpenSlice(fd, s.position, s.length))
    except FileNotFoundError:
        close_slices(list(fds.values()))
        return None
    return opened


def close_slices(fds) -> None:
    for fd in set(fds):
        with contextlib.suppress(OSError):
            os.close(fd)


class ShortFileError(ConnectionError):
    """A segment file ended before its slice did (truncated under us): the response is
    cut and the connection aborted, so the client sees a torn response, never wrong bytes."""


async def _wait_buffer_empty(transport: asyncio.Transport) -> None:
    delay = 0.0005
    waited = 0.0
    while transport.get_write_buffer_size() > 0:
        if transport.is_closing() or waited > SEND_STALL_TIMEOUT_S:
            raise ConnectionResetError("client stopped reading")
        await asyncio.sleep(delay)
        waited += delay
        delay = min(delay * 2, 0.01)


async def _wait_writable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    fut = loop.create_future()
    loop.add_writer(fd, lambda: fut.done() or fut.set_result(None))
    try:
        async with asyncio.timeout(SEND_STALL_TIMEOUT_S):
            await fut
    except TimeoutError:
        raise ConnectionResetError("client stopped reading") from None
    finally:
        loop.remove_writer(fd)


async def send_zero_copy(transport: asyncio.Transport, slices: list[OpenSlice]) -> int:
    """``os.sendfile`` every slice to the transport's socket once its buffer (the response
    head) is written; returns bytes sent."""
    if transport.is_closing():
        raise ConnectionResetError("client went away")
    sock_fd = transport.get_extra_info("socket").fileno()
    await _wait_buffer_empty(transport)
    sent = 0
    wait_fd = -1
    try:
        for s in slices:
            offset, count = s.position, s.length
            while count > 0:
                try:
                    n = os.sendfile(sock_fd, s.fd, offset, count)
                except BlockingIOError:
                    if wait_fd < 0:
                        wait_fd = os.dup(sock_fd)
                    await _wait_writable(asyncio.get_running_loop(), wait_fd)
                    if transport.is_closing():
                        raise ConnectionResetError("client went away") from None
                    continue
                if n == 0:
                    raise ShortFileError("segment file shorter than its slice")
                offset += n
                count -= n
                sent += n
    finally:
        if wait_fd >= 0:
            os.close(wait_fd)
    return sent


async def send_copy(write: Callable[[bytes], Awaitable[object]], slices: list[OpenSlice]) -> int:
    """The copying path: ``pread`` into memory and ``write`` it (which waits while the
    transport's buffer is full)."""
    sent = 0
    for s in slices:
        offset, count = s.position, s.length
        while count > 0:
            chunk = os.pread(s.fd, min(count, COPY_CHUNK), offset)
            if not chunk:
                raise ShortFileError("segment file shorter than its slice")
            await write(chunk)
            offset += len(chunk)
            count -= len(chunk)
            sent += len(chunk)
    return sent


class SliceResponse(web.StreamResponse):
    """A response whose body is segment file slices, opened already.

    The handler returns it unsent. aiohttp sends it through ``prepare`` (as it does a
    ``web.FileResponse``); the lean front (``http.fast``) through ``send_over``. Either way
    the body goes zero-copy when ``zero_copy`` and the connection is not TLS (sendfile
    bypasses the transport), else copied; the files are closed once sent, or when the
    response is dropped unsent. ``on_sent(bytes)`` runs after a whole body went out. A file
    that turns out shorter than its slice cuts the response and aborts the connection, so
    the client sees a torn response, never wrong bytes."""

    def __init__(
        self,
        slices: list[OpenSlice],
        *,
        zero_copy: bool,
        headers: dict[str, str],
        on_sent: Callable[[int], object] | None = None,
        label: str = "",
    ) -> None:
        super().__init__(headers=headers)
        self.label = label
        self.slices = slices
        self.zero_copy = zero_copy
        self.content_length = sum(s.length for s in slices)
        self._on_sent = on_sent
        self._close_files = weakref.finalize(self, close_slices, [s.fd for s in slices])

    def _goes_zero_copy(self, transport: asyncio.Transport) -> bool:
        return self.zero_copy and transport.get_extra_info("sslcontext") is None

    async def _send_body(
        self, transport: asyncio.Transport, write: Callable[[bytes], Awaitable[object]]
    ) -> bool:
        """The body; False if a short file cut it (the connection is aborted)."""
        total = self.content_length or 0
        try:
            if total:
                if self._goes_zero_copy(transport):
                    await send_zero_copy(transport, self.slices)
                else:
                    await send_copy(write, self.slices)
        except ShortFileError:
            logger.warning("%s: a segment file shrank during a fetch; response cut", self.label)
            transport.abort()
            return False
        finally:
            self._close_files()
        if self._on_sent is not None:
            self._on_sent(total)
        return True

    async def prepare(self, request: web.BaseRequest):
        """aiohttp's way: headers through its writer, then the body."""
        if self.prepared:
            return await super().prepare(request)
        try:
            writer = await super().prepare(request)
            transport = request.transport
            if transport is None:
                raise ConnectionResetError("client went away")
        except BaseException:
            self._close_files()  # now, not when a traceback cycle lets go of this response
            raise
        await self._send_body(transport, super().write)
        return writer

    async def write(self, data) -> None:  # the body is the slices only
        raise RuntimeError("a SliceResponse's body is its file slices")

    async def send_over(
        self,
        transport: asyncio.Transport,
        head: bytes,
        write: Callable[[bytes], Awaitable[object]],
    ) -> bool:
        """The lean front's way: ``head`` (status line and headers, serialised by the
        caller) straight to the transport, then the body; False if the body was cut."""
        if transport.is_closing():
            self._close_files()
            raise ConnectionResetError("client went away")
        transport.write(head)
        return await self._send_body(transport, write)
