"""FairSlots (the transport's per-broker request limit) and the transport's use of it: slots
are handed out in the order they were asked for, a caller that gives one back and asks again
queues behind the waiters, and cancellation never loses or leaks a slot.

The transport test runs against a small aiohttp server in the test process: the transport's
own queueing is the unit under test (the consumer on a real broker is covered in
tests/integration/client/test_consumer_many_partitions.py)."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from brokernodes.client.consumer import AsyncConsumer
from brokernodes.client.http import HttpTransport
from brokernodes.client.slots import FairSlots


def run(coro, timeout: float = 10.0):
    async def bounded():
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_limit_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        FairSlots(0)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "8"])
def test_the_consumer_refuses_a_connection_limit_that_is_not_a_positive_integer(bad):
    with pytest.raises(ValueError, match="max_connections_per_broker must be an integer"):
        AsyncConsumer("http://127.0.0.1:1", max_connections_per_broker=bad)


def test_waiters_are_served_in_arrival_order_and_a_returner_queues_behind_them():
    async def main():
        slots = FairSlots(2)
        order: list[str] = []
        await slots.acquire()
        await slots.acquire()

        async def wait(name: str) -> None:
            await slots.acquire()
            order.append(name)

        tasks = [asyncio.create_task(wait(n)) for n in ("a", "b", "c")]
        await settle()
        assert (slots.held, slots.waiting) == (2, 3)
        # the holder gives its slot back and asks again at once, as a fetch loop does
        slots.release()
        again = asyncio.create_task(wait("returner"))
        await settle()
        assert order == ["a"]
        for _ in range(3):
            slots.release()
            await settle()
        assert order == ["a", "b", "c", "returner"]
        await asyncio.gather(*tasks, again)
        assert (slots.held, slots.waiting) == (2, 0)

    run(main())


def test_a_cancelled_waiter_leaves_the_queue_and_loses_no_slot():
    async def main():
        slots = FairSlots(1)
        await slots.acquire()
        first = asyncio.create_task(slots.acquire())
        second = asyncio.create_task(slots.acquire())
        await settle()
        first.cancel()
        await settle()
        assert first.cancelled() and slots.waiting == 1
        slots.release()
        await second
        assert (slots.held, slots.waiting) == (1, 0)
        slots.release()
        assert slots.held == 0

    run(main())


def test_a_waiter_cancelled_after_being_handed_a_slot_passes_it_on():
    async def main():
        slots = FairSlots(1)
        await slots.acquire()
        first = asyncio.create_task(slots.acquire())
        second = asyncio.create_task(slots.acquire())
        await settle()
        slots.release()  # hands the slot to ``first``, which has not run yet
        first.cancel()
        await settle()
        assert first.cancelled() and second.done()
        assert (slots.held, slots.waiting) == (1, 0)

    run(main())


def test_a_cancelled_waiter_ahead_of_free_slots_does_not_block_a_newer_one():
    """A newcomer queues while an older waiter is still listed; when that one is cancelled
    and a slot is free, the newcomer gets it without anyone releasing."""

    async def main():
        slots = FairSlots(1)
        await slots.acquire()
        old = asyncio.create_task(slots.acquire())
        await settle()
        slots.release()  # hands the slot to ``old``
        old.cancel()  # ... which is cancelled before it runs: passes the slot on
        new = asyncio.create_task(slots.acquire())
        await settle()
        assert new.done() and not new.cancelled()
        assert (slots.held, slots.waiting) == (1, 0)

    run(main())


def test_more_long_polls_than_connections_all_get_their_turn():
    """Three loops each re-send a long poll the moment the last one ends, over a transport
    of two connections: every loop is answered, in turns."""

    async def long_poll(request: web.Request) -> web.Response:
        await asyncio.sleep(0.05)
        return web.Response(body=request.query["who"].encode())

    async def main():
        app = web.Application()
        app.add_routes([web.get("/poll", long_poll)])
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/poll"
        transport = HttpTransport(None, max_connections_per_host=2)
        answered = {"a": 0, "b": 0, "c": 0}

        async def loop(who: str) -> None:
            while True:
                response = await transport.request("GET", url, params={"who": who})
                answered[response.body.decode()] += 1

        tasks = [asyncio.create_task(loop(w)) for w in answered]
        try:
            await asyncio.sleep(1.0)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await transport.close()
            await runner.cleanup()
        return answered

    answered = run(main())
    assert min(answered.values()) >= 5, answered
    assert max(answered.values()) - min(answered.values()) <= 2, answered
