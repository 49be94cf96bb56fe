"""The receiving side of a Kafka connection: an asyncio protocol that buffers the bytes the
transport delivers and hands out whole size-prefixed frames.

A StreamReader costs two ``readexactly`` calls (and a wake-up) per request; here the usual
request, already whole in the buffer when its handler asks, is sliced off with no future at
all, and a request still arriving costs one wake-up once all of it is in. Reading pauses
while more than ``high_water`` bytes wait unasked (a client pipelining faster than it is
answered) and resumes when the connection needs more. The protocol also carries the
transport's write flow control (``drain``), which StreamWriter would otherwise provide.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable

_SIZE = struct.Struct(">i")
HIGH_WATER = 1 << 20  # unasked buffered bytes before reading pauses


class FrameReader(asyncio.Protocol):
    """One connection's receive buffer; ``on_connect(self)`` runs when the transport is up."""

    def __init__(self, on_connect: Callable[[FrameReader], None], high_water: int = HIGH_WATER):
        self._on_connect = on_connect
        self.high_water = high_water
        self.transport: asyncio.Transport | None = None
        # the loop, taken once: ``asyncio.get_running_loop`` costs a getpid() system call
        # per call on CPython 3.11, and the waiter below is made once per request
        self._loop: asyncio.AbstractEventLoop | None = None
        self._buf = bytearray()
        self._waiter: asyncio.Future | None = None  # the connection waiting for bytes
        self._need = 0  # how many buffered bytes the waiter needs
        self._eof = False
        self._lost: BaseException | None = None
        self._reading_paused = False
        self._writing_paused = False
        self._drain_waiter: asyncio.Future | None = None

    # -- the transport's callbacks

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport
        self._loop = asyncio.get_running_loop()
        self._on_connect(self)

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        waiter = self._waiter
        if waiter is not None:
            if len(buf) >= self._need:
                self._waiter = None
                if not waiter.done():
                    waiter.set_result(None)
        elif len(buf) > self.high_water and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()  # type: ignore[union-attr]

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False  # the transport closes itself: Kafka has no half-closed connections

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._lost = exc if exc is not None else ConnectionResetError("connection lost")
        self._wake()
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(self._lost)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- the connection's side

    def buffered(self) -> int:
        return len(self._buf)

    def next_size(self) -> int | None:
        """The size prefix of the next frame, once its 4 bytes are in (else None)."""
        buf = self._buf
        return _SIZE.unpack_from(buf, 0)[0] if len(buf) >= 4 else None

    def frame_ready(self) -> bool:
        """Whether a whole next frame is buffered."""
        size = self.next_size()
        return size is not None and len(self._buf) >= 4 + size

    async def wait_for(self, n: int) -> None:
        """Until ``n`` bytes are buffered; ``IncompleteReadError`` if the client closes
        first."""
        while len(self._buf) < n:
            if self._eof:
                raise asyncio.IncompleteReadError(bytes(self._buf), n)
            if self._reading_paused:
                self._reading_paused = False
                self.transport.resume_reading()  # type: ignore[union-attr]
            waiter = self._waiter = self._loop.create_future()  # type: ignore[union-attr]
            self._need = n
            try:
                await waiter
            finally:
                self._waiter = None

    def take_frame(self, size: int) -> bytes:
        """The next frame's ``size`` bytes (after its prefix), removed from the buffer."""
        buf = self._buf
        end = 4 + size
        if len(buf) == end:
            frame = bytes(memoryview(buf)[4:])
            buf.clear()
        else:
            frame = bytes(memoryview(buf)[4:end])
            del buf[:end]
        return frame

    async def drain(self) -> None:
        """Until the transport's buffer is below its high-water mark (StreamWriter.drain)."""
        if self._lost is not None:
            raise ConnectionResetError("connection lost")
        if self.transport is not None and self.transport.is_closing():
            await asyncio.sleep(0)  # let connection_lost run
            if self._lost is not None:
                raise ConnectionResetError("connection lost")
        if not self._writing_paused:
            return
        waiter = self._drain_waiter = self._loop.create_future()  # type: ignore[union-attr]
        await waiter
