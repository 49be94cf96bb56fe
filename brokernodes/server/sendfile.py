"""Send segment file ranges as an HTTP response body: zero-copy (``os.sendfile``) or copying.

Fetch opens every ``FileSlice``'s file before the response starts (``open_slices``), so
retention or compaction unlinking a segment afterwards cannot break the send: the open fd
keeps the bytes. A file that vanished before it was opened makes ``open_slices`` return None
and the caller reads the log again.

Zero-copy works under uvloop too, which has no ``loop.sendfile``: once aiohttp has written the
headers and the transport's write buffer is empty, ``os.sendfile`` writes straight to the
transport's non-blocking socket; on EAGAIN it waits for writability on a ``dup`` of the
socket fd (the loop refuses ``add_writer`` on an fd a transport owns).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass

from aiohttp import web

from brokernodes.storage.files import FileSlice

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


async def send_zero_copy(request: web.BaseRequest, slices: list[OpenSlice]) -> int:
    """``os.sendfile`` every slice to the request's socket; returns bytes sent."""
    transport = request.transport
    if transport is None:
        raise ConnectionResetError("client went away")
    sock = transport.get_extra_info("socket")
    sock_fd = sock.fileno()
    loop = asyncio.get_running_loop()
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
                    await _wait_writable(loop, wait_fd)
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


async def send_copy(resp: web.StreamResponse, slices: list[OpenSlice]) -> int:
    """The copying path: ``pread`` into memory and write through the transport."""
    sent = 0
    for s in slices:
        offset, count = s.position, s.length
        while count > 0:
            chunk = os.pread(s.fd, min(count, COPY_CHUNK), offset)
            if not chunk:
                raise ShortFileError("segment file shorter than its slice")
            await resp.write(chunk)
            offset += len(chunk)
            count -= len(chunk)
            sent += len(chunk)
    return sent
