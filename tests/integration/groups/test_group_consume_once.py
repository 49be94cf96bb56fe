"""A consumer group reading a backlog while its members join one after another, against a
real broker process: every record reaches the output exactly once through the rebalances
(each revocation commits what was returned, and a member taking over a partition without a
committed offset never reads it twice), and a member with more partitions than its fetch
connections still heartbeats and commits at once (the coordinator's requests do not queue
behind the partitions' long polls)."""

from __future__ import annotations

import asyncio
import time

from brokernodes.client import AsyncGroupConsumer, AsyncProducer
from tests.integration.groups.conftest import GROUP_TOPICS, http_json
from tests.integration.groups.test_group_consumer import run, settled

FAST = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 100, "auto_commit_interval_ms": 200}


class Member:
    """A group member polling in a task, counting each record value it is given."""

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
                self.seen[r.value] = self.seen.get(r.value, 0) + 1

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.c.close()


async def backlog(url: str, key: str, topic: str, n: int) -> None:
    async with AsyncProducer(url, key, linger_ms=5) as p:
        futures = [p.send(topic, b"%06d" % i, key=b"k%d" % (i % 101)) for i in range(n)]
        for f in futures:
            await f


def test_members_joining_one_by_one_read_every_record_once(gbroker):
    url, key = gbroker.url, gbroker.api_key
    total = 20_000

    async def main() -> dict:
        await backlog(url, key, "sixty", total)
        seen: dict = {}
        members = []
        for _ in range(6):  # each join moves partitions while the others are mid-backlog
            members.append(await Member(url, key, "g-once", "sixty", seen).start())
            await asyncio.sleep(0.05)
        deadline = time.monotonic() + 30
        while len(seen) < total and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await settled(members, 12, url, key, "g-once")
        for m in members:
            await m.stop()
        return seen

    seen = run(main())
    missing = [i for i in range(total) if b"%06d" % i not in seen]
    twice = sorted(v for v, n in seen.items() if n > 1)
    assert not missing, f"{len(missing)} records never consumed, e.g. {missing[:5]}"
    assert not twice, f"{len(twice)} records consumed more than once, e.g. {twice[:5]}"
    # the members' last commits (at close) cover everything: no lag is left
    s, d = http_json("GET", url + "/sluice/v1/groups/g-once", key=key)
    assert s == 200 and d["total_lag"] == 0, d


def test_heartbeats_and_commits_do_not_wait_behind_long_polls(broker_factory):
    # 64 partitions: as many long polls as the fetcher has connections to the broker
    broker = broker_factory({**GROUP_TOPICS, "wide": (64, {})})
    url, key = broker.url, broker.api_key

    async def main() -> float:
        await backlog(url, key, "wide", 640)
        seen: dict = {}
        # each partition's fetch waits up to 5 s at the end of the log
        first = await Member(url, key, "g-wide", "wide", seen, fetch_max_wait_ms=5000).start()
        deadline = time.monotonic() + 20
        while len(seen) < 640 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert len(seen) == 640
        await asyncio.sleep(0.3)  # every partition is in a long poll now
        started = time.monotonic()
        second = await Member(url, key, "g-wide", "wide", seen, fetch_max_wait_ms=5000).start()
        await settled([first, second], 64, url, key, "g-wide")
        took = time.monotonic() - started
        for m in (first, second):
            await m.stop()
        assert all(n == 1 for n in seen.values())
        return took

    took = run(main())
    # the first member learns of the revocation on a heartbeat, commits and releases: well
    # inside one long poll (5 s), and inside the 2 s session (a heartbeat stuck behind the
    # long polls would let it expire)
    assert took < 3.0, f"the group took {took:.1f} s to settle after the join"
