"""A loopback TCP proxy for one network link, with faults switched on and off while it runs.

``LinkProxy(upstream_port).start()`` listens on a free port and forwards to the upstream.
Faults (set attributes at any time):

- ``cut = True``: close every open connection and refuse new ones (a partition);
- ``blackhole = True``: one-way loss: requests still reach the server, its answers vanish
  (connections stay open, so the client waits for its own timeout);
- ``drop_rate = p``: each chunk of an answer is, with probability ``p``, not delivered and
  the connection closed instead (a produce acknowledgement lost on the way back);
- ``latency_s = d``: every chunk, both ways, is delayed by ``d``.

Runs its own event loop in a daemon thread; ``close`` stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading

from tests.integration.conftest import free_port


class LinkProxy:
    def __init__(self, upstream_port: int, *, seed: int = 7) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self.cut = False
        self.blackhole = False
        self.drop_rate = 0.0
        self.latency_s = 0.0
        self.dropped = 0
        self._random = random.Random(seed)
        self._loop = asyncio.new_event_loop()
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LinkProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(5)
        return self

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

    def set_cut(self, cut: bool) -> None:
        self.cut = cut
        if cut:
            self._loop.call_soon_threadsafe(self._close_all)

    def _close_all(self) -> None:
        for w in list(self._writers):
            w.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(
                self._pump(reader, up_writer, answers=False),
                self._pump(up_reader, writer, answers=True),
            )
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.close()

    async def _pump(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, answers: bool
    ) -> None:
        try:
            while True:
                chunk = await src.read(65536)
                if not chunk or self.cut:
                    break
                if self.latency_s:
                    await asyncio.sleep(self.latency_s)
                if answers and self.blackhole:
                    continue
                if answers and self.drop_rate and self._random.random() < self.drop_rate:
                    self.dropped += 1
                    break
                dst.write(chunk)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                dst.close()

    def close(self) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            self._close_all()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
