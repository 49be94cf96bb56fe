"""Consumer groups end to end with real broker processes: members join, leave and crash and
every partition ends with exactly one owner; processing is at-least-once with no gaps through
rebalances and through kill -9 of the coordinator's broker; static members restart without a
rebalance."""

from __future__ import annotations

import asyncio
import time

import pytest

from brokernodes.client import AsyncGroupConsumer, AsyncProducer
from tests.integration.groups.conftest import GROUP_TOPICS, http_json, start_cluster

FAST = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 100, "fetch_max_wait_ms": 100}


def run(coro, timeout: float = 90.0):
    async def bounded():
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


class Member:
    """A group consumer that polls in a task and records what it saw."""

    def __init__(self, url: str, key: str, group: str, topic: str, seen: dict, **kw) -> None:
        self.c = AsyncGroupConsumer(
            url, key, group_id=group, topics=[topic], auto_offset_reset="earliest", **FAST, **kw
        )
        self.seen = seen
        self.task: asyncio.Task | None = None

    async def start(self) -> Member:
        await self.c.start()
        self.task = asyncio.create_task(self._loop())
        return self

    async def _loop(self) -> None:
        while True:
            for r in await self.c.poll(0.2):
                self.seen.setdefault(r.value, 0)
                self.seen[r.value] += 1

    async def stop(self, *, leave: bool = True) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.c.close(leave=leave)


async def settled(
    members: list[Member], partitions: int, url: str, key: str, group: str, timeout: float = 20.0
) -> None:
    """Wait until the coordinator says STABLE, each member consumes exactly what the
    coordinator assigned it, and together they own every partition exactly once."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        owned = {m.c.member_id: m.c.assignment() for m in members}
        union = set().union(*owned.values())
        if len(union) == partitions and sum(len(o) for o in owned.values()) == partitions:
            _, last = await asyncio.to_thread(
                http_json, "GET", f"{url}/sluice/v1/groups/{group}", key=key
            )
            assigned = {
                m["member_id"]: {(a["topic"], a["partition"]) for a in m["assignments"]}
                for m in last.get("members", [])
            }
            if last.get("state") == "STABLE" and assigned == owned:
                return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no stable assignment: {owned} vs {last}")


async def produce(url: str, key: str, topic: str, start: int, n: int) -> None:
    async with AsyncProducer(url, key, linger_ms=5) as p:
        futures = [
            p.send(topic, b"%06d" % i, key=b"k%d" % (i % 97)) for i in range(start, start + n)
        ]
        for f in futures:
            await f


def test_join_leave_crash_leave_one_owner_per_partition(gbroker):
    url, key = gbroker.url, gbroker.api_key

    async def main():
        seen: dict = {}
        members = [await Member(url, key, "g-own", "sixty", seen).start() for _ in range(3)]
        await settled(members, 12, url, key, "g-own")
        members.append(await Member(url, key, "g-own", "sixty", seen).start())  # join
        await settled(members, 12, url, key, "g-own")
        assert all(len(m.c.assignment()) == 3 for m in members)
        await members.pop(0).stop()  # leave
        await settled(members, 12, url, key, "g-own")
        crashed = members.pop(0)
        await crashed.stop(leave=False)  # crash: its session expires (2 s)
        await settled(members, 12, url, key, "g-own", timeout=10)
        for m in members:
            await m.stop()
        s, d = http_json("GET", url + "/sluice/v1/groups/g-own", key=key)
        assert s == 200 and d["state"] == "EMPTY" and d["members"] == []

    run(main())


@pytest.mark.slow
def test_at_least_once_no_gaps_through_rebalances_and_coordinator_kill(broker_factory):
    topics = {**GROUP_TOPICS}
    cluster = start_cluster(broker_factory, topics)
    url = ",".join(b.url for b in cluster)
    key = cluster[0].api_key
    s, coord = http_json("GET", cluster[0].url + "/sluice/v1/groups/g-alo/coordinator", key=key)
    assert s == 200
    victim = next(b for b in cluster if b.url == coord["url"])
    total = 3000

    async def main():
        seen: dict = {}
        await produce(cluster[0].url, key, "sixty", 0, 1000)
        members = [await Member(url, key, "g-alo", "sixty", seen).start() for _ in range(2)]
        await asyncio.sleep(0.5)
        members.append(await Member(url, key, "g-alo", "sixty", seen).start())
        await produce(cluster[0].url, key, "sixty", 1000, 1000)
        await members.pop(0).stop()  # a rebalance mid-stream
        victim.kill()  # kill -9 of the coordinator's broker
        await asyncio.sleep(0.5)
        await asyncio.to_thread(victim.start)  # RF 1: it comes back on restart
        members.append(await Member(url, key, "g-alo", "sixty", seen).start())
        await produce(cluster[0].url, key, "sixty", 2000, 1000)
        deadline = time.monotonic() + 40
        while len(seen) < total and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await settled(members, 12, coord["url"], key, "g-alo")
        for m in members:
            await m.stop()
        return seen

    seen = run(main(), timeout=120)
    missing = [i for i in range(total) if b"%06d" % i not in seen]
    assert not missing, f"{len(missing)} records never consumed, e.g. {missing[:10]}"
    # everything processed was committed: the group's lag is 0 at the end
    s, d = http_json("GET", coord["url"] + "/sluice/v1/groups/g-alo", key=key)
    assert s == 200, d
    assert d["total_lag"] == 0 and all(r["lag"] == 0 for r in d["offsets"]), d["offsets"]


def test_static_member_restart_inside_session_keeps_assignment(gbroker):
    url, key = gbroker.url, gbroker.api_key

    async def main():
        seen: dict = {}
        a = await Member(url, key, "g-static", "sixty", seen, group_instance_id="host-a").start()
        b = await Member(url, key, "g-static", "sixty", seen, group_instance_id="host-b").start()
        await settled([a, b], 12, url, key, "g-static")
        before = a.c.assignment()
        s, d = http_json("GET", url + "/sluice/v1/groups/g-static", key=key)
        epoch = d["group_epoch"]
        await a.stop()  # leaves with epoch -2: slot kept
        a2 = await Member(url, key, "g-static", "sixty", seen, group_instance_id="host-a").start()
        await settled([a2, b], 12, url, key, "g-static")
        assert a2.c.assignment() == before
        s, d = http_json("GET", url + "/sluice/v1/groups/g-static", key=key)
        assert s == 200 and d["group_epoch"] == epoch  # no rebalance
        await a2.stop()
        await b.stop()

    run(main())
