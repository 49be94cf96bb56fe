"""A private event loop on a daemon thread, for the SDK's blocking (sync) clients."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from brokernodes.errors import ClientTimeoutError

T = TypeVar("T")


class LoopThread:
    """Runs coroutines on its own loop; ``run`` blocks the caller until one finishes."""

    def __init__(self, name: str = "sluice-client") -> None:
        self.loop = asyncio.new_event_loop()
        started = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.call_soon(started.set)
            self.loop.run_forever()

        self.thread = threading.Thread(target=main, name=name, daemon=True)
        self.thread.start()
        started.wait()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("a blocking client call was made from its own event loop thread")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ClientTimeoutError(f"the call did not finish within {timeout:g}s") from None

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()
