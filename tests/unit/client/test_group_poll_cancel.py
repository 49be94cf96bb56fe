"""A group consumer's poll never swallows its caller's cancellation: a task cancelled while
the poll is being cut short by an assignment change ends (it used to loop on, returning
empty polls, so a service stopping its consumer task waited forever)."""

from __future__ import annotations

import asyncio

from brokernodes.client.group_consumer import AsyncGroupConsumer


class SlowToCancelConsumer:
    """A consumer whose poll takes a moment to wind down once cancelled (as a poll with a
    request in flight does)."""

    max_poll_records = 500

    def __init__(self) -> None:
        self.polls = 0

    def _take(self, limit: int) -> list:
        return []  # nothing at hand: the poll waits

    async def poll(self, wait: float, max_records: int | None) -> list:
        self.polls += 1
        try:
            await asyncio.sleep(wait)
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)
            raise
        return []


def consumer() -> AsyncGroupConsumer:
    group = object.__new__(AsyncGroupConsumer)
    group._consumer = SlowToCancelConsumer()
    group._changed = asyncio.Event()
    group._closed = False
    return group


def test_an_assignment_change_cuts_a_poll_short_with_no_records():
    async def scenario() -> list:
        group = consumer()
        asyncio.get_running_loop().call_later(0.01, group._changed.set)
        return await asyncio.wait_for(group._poll_or_change(5.0, None), 2)

    assert asyncio.run(scenario()) == []


def test_the_callers_cancellation_during_the_cut_is_not_swallowed():
    async def scenario() -> bool:
        group = consumer()

        async def loop() -> None:
            while True:  # a service's consume loop
                await group._poll_or_change(5.0, None)

        task = asyncio.create_task(loop())
        await asyncio.sleep(0.01)
        group._changed.set()  # the poll is cut: it now winds down for 50 ms
        await asyncio.sleep(0.02)
        task.cancel()  # arrives while the group waits for the poll to end
        done, _ = await asyncio.wait({task}, timeout=2)
        if not done:  # swallowed: close the group so the loop can end and the test report
            group._closed = True
            task.cancel()
            await asyncio.wait({task}, timeout=2)
        return bool(done) and task.cancelled()

    assert asyncio.run(scenario())


def test_a_cancelled_caller_cancels_its_poll():
    async def scenario() -> bool:
        group = consumer()
        task = asyncio.create_task(group._poll_or_change(5.0, None))
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.wait({task}, timeout=2)
        await asyncio.sleep(0.1)
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return task.cancelled() and not pending

    assert asyncio.run(scenario())
