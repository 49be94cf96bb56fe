"""Waiting heartbeats (``wait_ms``) against a real broker: the coordinator holds a heartbeat
that has nothing new to say and answers it as soon as the member has news (a revocation, a
released partition), so a rebalance completes within round trips rather than heartbeat
intervals; and the SDK's group consumer uses them."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

from brokernodes.client import AsyncGroupConsumer
from tests.integration.groups.conftest import http_json

INTERVAL_MS = 5_000  # long: every prompt answer below is the coordinator's, not a timer's
SLOW = {"session_timeout_ms": 30_000, "heartbeat_interval_ms": INTERVAL_MS}


def hb(b, group, timeout: float = 20.0, **body):
    return http_json(
        "POST", f"{b.url}/sluice/v1/groups/{group}/heartbeat", body, key=b.api_key, timeout=timeout
    )


def tps(rows) -> set[tuple[str, int]]:
    return {(r["topic"], r["partition"]) for r in rows}


def join(b, group):
    s, d = hb(b, group, member_epoch=0, subscriptions=["sixty"], **SLOW)
    assert s == 200, d
    return d


def test_a_heartbeat_without_news_is_held_for_its_wait(gbroker):
    a = join(gbroker, "wait-none")
    started = time.monotonic()
    s, d = hb(
        gbroker,
        "wait-none",
        member_id=a["member_id"],
        member_epoch=a["member_epoch"],
        owned=a["assignment"],
        wait_ms=600,
    )
    held = time.monotonic() - started
    assert s == 200 and 0.5 <= held < 5, held
    assert d["member_epoch"] == a["member_epoch"] and tps(d["assignment"]) == tps(a["assignment"])
    # one that reports less than it was given is answered at once: it has news already
    started = time.monotonic()
    s, d = hb(
        gbroker,
        "wait-none",
        member_id=a["member_id"],
        member_epoch=a["member_epoch"],
        owned=[],
        wait_ms=INTERVAL_MS,
    )
    assert s == 200 and time.monotonic() - started < 2
    assert len(d["assignment"]) == 12


def test_a_join_and_a_release_answer_the_waiting_heartbeats_at_once(gbroker):
    a = join(gbroker, "wait-join")
    assert len(a["assignment"]) == 12
    with ThreadPoolExecutor(2) as pool:
        held = pool.submit(
            hb,
            gbroker,
            "wait-join",
            member_id=a["member_id"],
            member_epoch=a["member_epoch"],
            owned=a["assignment"],
            wait_ms=INTERVAL_MS,
        )
        time.sleep(0.3)
        assert not held.done()  # nothing new for a yet
        b = join(gbroker, "wait-join")  # a must give half up
        joined = time.monotonic()
        s, ra = held.result(timeout=10)
        assert s == 200 and time.monotonic() - joined < 2  # not a heartbeat interval later
        assert len(ra["revoking"]) == 6 and len(ra["assignment"]) == 6
        # b waits for those six: its waiting heartbeat is held until a releases them
        assert b["assignment"] == [] and len(b["pending"]) == 6
        pending = pool.submit(
            hb,
            gbroker,
            "wait-join",
            member_id=b["member_id"],
            member_epoch=b["member_epoch"],
            owned=[],
            wait_ms=INTERVAL_MS,
        )
        time.sleep(0.3)
        assert not pending.done()
        # a releases them, itself waiting: the release moves it to the new epoch, which is
        # news for it (its commits need it), so that answer is not held either
        released = time.monotonic()
        s, ra2 = hb(
            gbroker,
            "wait-join",
            member_id=a["member_id"],
            member_epoch=ra["member_epoch"],
            owned=ra["assignment"],
            wait_ms=INTERVAL_MS,
        )
        assert s == 200 and time.monotonic() - released < 2
        assert ra2["member_epoch"] == b["member_epoch"] > ra["member_epoch"]
        assert tps(ra2["assignment"]) == tps(ra["assignment"]) and ra2["revoking"] == []
        s, rb = pending.result(timeout=10)
        assert s == 200 and time.monotonic() - released < 2
        assert tps(rb["assignment"]) == tps(ra["revoking"]) and rb["pending"] == []
    s, d = http_json("GET", f"{gbroker.url}/sluice/v1/groups/wait-join", key=gbroker.api_key)
    assert d["state"] == "STABLE"


def test_group_consumers_rebalance_within_round_trips_not_intervals(gbroker):
    """Heartbeat interval 5 s: without waiting heartbeats the first member would hear of the
    second at its next heartbeat, seconds later."""
    url, key = gbroker.url, gbroker.api_key

    async def main():
        consumers = [
            AsyncGroupConsumer(
                url,
                key,
                group_id="wait-sdk",
                topics=["sixty"],
                auto_offset_reset="earliest",
                **SLOW,
            )
            for _ in range(2)
        ]
        polls = []

        async def loop(c):
            while True:
                await c.poll(0.1)

        try:
            first, second = consumers
            await first.start()
            polls.append(asyncio.create_task(loop(first)))
            deadline = time.monotonic() + 20
            while len(first.assignment()) < 12:
                assert time.monotonic() < deadline, "the first member never took 12 partitions"
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.3)  # first is settled: its heartbeat is held now
            started = time.monotonic()
            await second.start()
            polls.append(asyncio.create_task(loop(second)))
            while time.monotonic() - started < 10:
                if len(first.assignment()) == 6 and len(second.assignment()) == 6:
                    _, d = await asyncio.to_thread(
                        http_json, "GET", f"{url}/sluice/v1/groups/wait-sdk", key=key
                    )
                    if d.get("state") == "STABLE":
                        break
                await asyncio.sleep(0.01)
            took = time.monotonic() - started
            assert first.assignment().isdisjoint(second.assignment())
            assert len(first.assignment()) == len(second.assignment()) == 6
            assert took < 1.5, took
        finally:
            for t in polls:
                t.cancel()
            await asyncio.gather(*polls, return_exceptions=True)
            for c in consumers:
                await c.close()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_partitions_taken_back_before_the_member_applies_them_are_released_unseen(gbroker):
    """A member given all 12 partitions, with a second member joining before its first poll
    applies them: the heartbeat reporting them owned hears of the join, so the six taken
    back are released at once, never looked up, fetched or handed to the listeners."""
    url, key = gbroker.url, gbroker.api_key
    assigned: list[set] = []
    revoked: list[set] = []

    async def main():
        a = AsyncGroupConsumer(
            url,
            key,
            group_id="wait-burst",
            topics=["sixty"],
            auto_offset_reset="earliest",
            on_partitions_assigned=lambda tps: assigned.append(set(tps)),
            on_partitions_revoked=lambda tps: revoked.append(set(tps)),
            **SLOW,
        )
        await a.start()
        try:
            deadline = time.monotonic() + 20
            while len(a._target) < 12:  # the join's answer: every partition (not applied yet)
                assert time.monotonic() < deadline
                await asyncio.sleep(0.01)
            b = await asyncio.to_thread(join, gbroker, "wait-burst")
            assert b["assignment"] == [] and len(b["pending"]) == 6
            await a.poll(0.5)  # applies: takes its six, lets the other six go
            assert len(a.assignment()) == 6 and assigned == [a.assignment()] and revoked == []
            # b's waiting heartbeat gets the six a let go
            s, rb = await asyncio.to_thread(
                hb,
                gbroker,
                "wait-burst",
                member_id=b["member_id"],
                member_epoch=b["member_epoch"],
                owned=[],
                wait_ms=INTERVAL_MS,
            )
            assert s == 200 and len(rb["assignment"]) == 6
            assert not tps(rb["assignment"]) & set(a.assignment())
        finally:
            await a.close()

    asyncio.run(asyncio.wait_for(main(), 60))
