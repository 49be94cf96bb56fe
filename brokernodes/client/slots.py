"""First come, first served request slots per broker: the SDK transport's connection limit.

aiohttp's own per-host limit lets a task that just gave its connection back take it again at
once, before the waiter it woke runs. A consumer re-sends each partition's long poll the
moment the last one ends, so with more partitions than connections the partitions that held
one kept it and the others waited until their connect timeout, again and again. Here a freed
slot goes straight to the oldest waiter, and a new request queues behind every waiter, so
each partition gets its turn: after about one long poll per ``limit`` requests ahead of it.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["FairSlots"]


class FairSlots:
    """At most ``limit`` holders at once; waiters are served in the order they came."""

    __slots__ = ("_held", "_waiters", "limit")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        self.limit = limit
        self._held = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def held(self) -> int:
        return self._held

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def acquire(self) -> None:
        """Take a slot, waiting behind earlier callers when none is free."""
        if self._held < self.limit and not self._waiters:
            self._held += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # ``_hand_out`` counted the slot as held when it woke this waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot, cancelled before it ran: pass it on
            else:
                if waiter in self._waiters:  # ``_hand_out`` may have dropped it already
                    self._waiters.remove(waiter)
                self._hand_out()  # it may have been all that kept a newer waiter waiting
            raise

    def release(self) -> None:
        """Give a slot back: it goes to the oldest waiter, if any."""
        self._held -= 1
        self._hand_out()

    def _hand_out(self) -> None:
        waiters = self._waiters
        while self._held < self.limit and waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._held += 1
