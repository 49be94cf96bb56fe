"""A replica fetch cancelled (the fetcher stopping, a role change) just as its request
failed leaves no task whose exception asyncio reports as never retrieved: the broker's log
showed those as ERROR lines during failovers."""

from __future__ import annotations

import asyncio
import gc

from brokernodes.server.replica.fetcher import ReplicaFetcher


class Truncations:
    """The one thing ``_unless_truncated`` asks of a partition: a wait that never ends."""

    async def wait_for_truncation(self) -> None:
        await asyncio.Event().wait()


def test_a_fetch_failing_as_it_is_cancelled_is_not_reported_as_lost():
    reported: list[dict] = []

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: reported.append(ctx))

        async def failing_get():
            raise ConnectionError("the leader's answer was cut short")

        outer = asyncio.create_task(ReplicaFetcher._unless_truncated(Truncations(), failing_get()))
        await asyncio.sleep(0)  # outer waits; the request runs and fails in this turn
        await asyncio.sleep(0)
        outer.cancel()  # before outer resumes from its wait
        try:
            await outer
        except asyncio.CancelledError:
            pass
        else:
            raise AssertionError("the fetch was not cancelled")
        del outer
        gc.collect()
        await asyncio.sleep(0)

    asyncio.run(scenario())
    gc.collect()
    assert not [c for c in reported if "never retrieved" in c.get("message", "")], reported
