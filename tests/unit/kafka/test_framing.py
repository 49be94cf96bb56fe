"""The Kafka listener's receive buffer (``FrameReader``) over a real loopback TCP connection:
frames cut at any byte boundary come out whole and in order, several frames in one segment
are taken without waiting, reading pauses past the high-water mark while nothing asks and
resumes when the connection needs more, and a client closing mid-frame ends the read."""

from __future__ import annotations

import asyncio
import struct

import pytest

from brokernodes.server.kafka.framing import FrameReader


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


async def _next(reader: FrameReader) -> bytes:
    """What the connection does for each request (``KafkaConnection._read_frame``)."""
    await reader.wait_for(4)
    size = reader.next_size()
    assert size is not None
    await reader.wait_for(4 + size)
    return reader.take_frame(size)


async def _pair(high_water: int = 1 << 20):
    """A FrameReader server and a connected client stream."""
    accepted: asyncio.Future[FrameReader] = asyncio.get_running_loop().create_future()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: FrameReader(accepted.set_result, high_water), "127.0.0.1", 0
    )
    port = server.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    reader = await asyncio.wait_for(accepted, 5)
    return server, reader, writer


def test_frames_cut_anywhere_come_out_whole_and_in_order():
    async def main():
        server, reader, writer = await _pair()
        bodies = [b"a" * 7, b"", b"b" * 300, b"c" * 70_000]
        wire = b"".join(_frame(b) for b in bodies)
        got = []

        async def consume():
            for _ in bodies:
                got.append(await _next(reader))

        consumer = asyncio.create_task(consume())
        for cut in range(0, len(wire), 997):  # segment edges inside prefixes and bodies
            writer.write(wire[cut : cut + 997])
            await writer.drain()
            await asyncio.sleep(0)
        await asyncio.wait_for(consumer, 5)
        assert got == bodies
        assert reader.buffered() == 0
        writer.close()
        server.close()

    asyncio.run(main())


def test_frames_already_buffered_are_taken_without_a_wait():
    async def main():
        server, reader, writer = await _pair()
        writer.write(_frame(b"one") + _frame(b"two") + _frame(b"three"))
        await writer.drain()
        await reader.wait_for(len(_frame(b"one") + _frame(b"two") + _frame(b"three")))
        assert reader.frame_ready()
        assert [reader.take_frame(reader.next_size()) for _ in range(3)] == [  # type: ignore[arg-type]
            b"one",
            b"two",
            b"three",
        ]
        assert not reader.frame_ready() and reader.next_size() is None
        writer.close()
        server.close()

    asyncio.run(main())


def test_reading_pauses_past_high_water_and_resumes_when_more_is_needed():
    async def main():
        server, reader, writer = await _pair(high_water=64 * 1024)
        big = _frame(b"x" * 40_000)
        for _ in range(8):  # 320 KB pipelined while the connection asks for nothing
            writer.write(big)
        await asyncio.sleep(0.2)
        assert reader._reading_paused  # stopped taking bytes from the socket
        assert reader.buffered() < 8 * len(big)
        for _ in range(8):  # each wait for a frame not yet in resumes reading
            assert await asyncio.wait_for(_next(reader), 5) == b"x" * 40_000
        assert reader.buffered() == 0
        writer.close()
        server.close()

    asyncio.run(main())


def test_a_client_closing_mid_frame_ends_the_read():
    async def main():
        server, reader, writer = await _pair()
        writer.write(struct.pack(">i", 100) + b"only part")
        await writer.drain()
        writer.close()
        with pytest.raises(asyncio.IncompleteReadError):
            await asyncio.wait_for(_next(reader), 5)
        with pytest.raises(ConnectionError):
            await reader.drain()
        server.close()

    asyncio.run(main())
