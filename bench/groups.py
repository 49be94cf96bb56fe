"""Consumer groups: ``groups.rebalance_ms`` (6 consumers over 60 partitions; one joins, leaves
or crashes: time until the coordinator says STABLE and every member consumes exactly its
assignment, median of 5; records moved = partitions that changed owner) and the consume
throughput of the 6-member group beside one consumer assigned all 60 partitions.

Members heartbeat every 100 ms with a 2 s session timeout (the crash case waits for it);
the SDK's heartbeats wait at the coordinator for news (a revocation, a released partition),
so a join or leave takes round trips rather than intervals. One broker, static metadata,
everything on loopback. ``SLUICE_BENCH_SMOKE=1`` shrinks it to one rebalance round and a few
thousand records.

The consume comparison gives both sides the same conditions: the clocks start once the
clients are connected (metadata fetched), the producer's send futures are freed first, and
each side counts distinct records in a byte per offset (a Python tuple per record in a set
made the garbage collector walk 200,000 more objects on the group's side only); both clocks
stop when the last distinct record is counted, not when a loop notices it (the group's side
watches from a 5 ms loop, which on a run of a few tens of milliseconds is a large error).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

from bench.broker import start_broker
from bench.report import Metric
from bench.smoke import smoke
from brokernodes.client import AsyncConsumer, AsyncGroupConsumer, AsyncProducer

TOPIC = "g60"
PARTITIONS = 60
MEMBERS = 6
SESSION_MS = 2000
HEARTBEAT_MS = 100
VERBS = {"join": "joins", "leave": "leaves", "crash": "crashes"}


class Distinct:
    """Distinct (partition, offset) pairs consumed, a byte per offset: no Python object per
    record, so the accounting itself adds nothing for the garbage collector to walk. Both
    sides of the throughput comparison count their records with it, and both clocks stop at
    ``done_at``: when the last distinct record was counted (the group's side watches the
    count from a loop of its own, which saw it up to a sleep later)."""

    def __init__(self, records: int) -> None:
        self.marks = [bytearray(records) for _ in range(PARTITIONS)]
        self.count = 0
        self.records = records
        self.done_at: float | None = None

    def add(self, records: list) -> None:
        marks = self.marks
        new = 0
        for r in records:
            row = marks[r.partition]
            if not row[r.offset]:
                row[r.offset] = 1
                new += 1
        self.count += new
        if self.done_at is None and self.count >= self.records:
            self.done_at = time.perf_counter()


class Member:
    def __init__(
        self,
        url: str,
        key: str,
        group: str,
        session_ms: int = SESSION_MS,
        seen: Distinct | None = None,
        *,
        join: bool = True,
    ) -> None:
        self.c = AsyncGroupConsumer(
            url,
            key,
            group_id=group,
            topics=[TOPIC] if join else [],
            auto_offset_reset="earliest",
            session_timeout_ms=session_ms,
            heartbeat_interval_ms=HEARTBEAT_MS,
            auto_commit_interval_ms=1000,
        )
        self.count = 0
        self.seen = seen  # shared by the members: distinct (partition, offset) consumed
        self.task: asyncio.Task | None = None

    async def start(self) -> Member:
        """Connect (metadata) and poll; a member made with ``join=False`` joins at ``join``."""
        await asyncio.wait_for(self.c.start(), 30)
        self.task = asyncio.create_task(self._loop())
        return self

    def join(self) -> None:
        self.c.subscribe([TOPIC])

    async def _loop(self) -> None:
        while True:
            if not self.c.subscription():
                await asyncio.sleep(0.005)  # not joined yet
                continue
            records = await self.c.poll(0.1)
            self.count += len(records)
            if self.seen is not None:
                self.seen.add(records)

    async def stop(self, *, leave: bool = True) -> None:
        assert self.task is not None
        self.task.cancel()
        # bounded: a poll that swallowed the cancellation must not hold the whole run
        done, _ = await asyncio.wait({self.task}, timeout=10)
        if not done:
            print("groups: a member's poll loop ignored its cancellation", flush=True)
        await asyncio.wait_for(self.c.close(leave=leave), 30)


async def stable(session, url: str, key: str, group: str, members: list[Member]) -> dict:
    """Poll until STABLE with each member consuming exactly its assignment; the owners."""
    headers = {"Authorization": f"Bearer {key}"}
    deadline = time.monotonic() + 30
    d: dict = {}
    while time.monotonic() < deadline:
        owned = {m.c.member_id: m.c.assignment() for m in members}
        if sum(len(o) for o in owned.values()) == PARTITIONS:
            async with session.get(f"{url}/sluice/v1/groups/{group}", headers=headers) as r:
                d = orjson.loads(await r.read())
            assigned = {
                m["member_id"]: {(a["topic"], a["partition"]) for a in m["assignments"]}
                for m in d.get("members", [])
            }
            if d.get("state") == "STABLE" and assigned == owned:
                return {tp: mid for mid, tps in owned.items() for tp in tps}
        await asyncio.sleep(0.005)
    raise RuntimeError(f"group {group} not stable within 30 s: {d.get('state')}")


async def rebalances(url: str, key: str, rounds: int) -> dict[str, list[tuple[float, int]]]:
    out: dict[str, list[tuple[float, int]]] = {"join": [], "leave": [], "crash": []}
    async with aiohttp.ClientSession() as session:
        for r in range(rounds):
            group = f"bench-{r}"
            print(f"groups: rebalance round {r + 1}/{rounds}", flush=True)
            members = [await Member(url, key, group).start() for _ in range(MEMBERS)]
            before = await stable(session, url, key, group, members)
            for case in ("join", "leave", "crash"):
                started = time.perf_counter()
                if case == "join":
                    members.append(await Member(url, key, group).start())
                elif case == "leave":
                    await members.pop(0).stop()
                else:
                    await members.pop(0).stop(leave=False)
                after = await stable(session, url, key, group, members)
                ms = (time.perf_counter() - started) * 1000
                moved = sum(1 for tp, mid in after.items() if before.get(tp) != mid)
                out[case].append((ms, moved))
                before = after
            for m in members:
                await m.stop()
    return out


async def produce(url: str, key: str, records: int) -> None:
    """The backlog both sides read; its send futures are gone before either clock starts."""
    async with AsyncProducer(url, key, linger_ms=5, batch_size=65536) as p:
        value = b"x" * 100
        futures = [p.send(TOPIC, value, key=b"k%d" % (i % 1000)) for i in range(records)]
        for f in futures:
            await f


async def throughput(url: str, key: str, records: int) -> tuple[float, float]:
    await produce(url, key, records)
    gc.collect()
    # peer: one consumer assigned every partition, clocked from its first fetch (its client
    # connected) to its last record, counting records as the members do
    async with AsyncConsumer(url, key, auto_offset_reset="earliest") as c:
        c.assign([(TOPIC, p) for p in range(PARTITIONS)])
        got, started = Distinct(records), time.perf_counter()
        while got.count < records:
            if time.perf_counter() - started > 120:
                raise RuntimeError(f"one consumer read {got.count} of {records} records in 120 s")
            got.add(await c.poll(1.0))
        assert got.done_at is not None
        single = records / (got.done_at - started)
    gc.collect()
    # a longer session: six members decoding in one busy process must not miss heartbeats.
    # Their clients connect (metadata) before the clock, as the peer's does; then they join
    seen = Distinct(records)
    members = [
        await Member(url, key, "bench-tput", session_ms=15_000, seen=seen, join=False).start()
        for _ in range(MEMBERS)
    ]
    # from the first join to the last distinct record: joins and rebalances included,
    # records read twice across a rebalance counted once
    started = time.perf_counter()
    for m in members:
        m.join()
    while seen.count < records:
        if time.perf_counter() - started > 120:
            raise RuntimeError(f"the group read {seen.count} of {records} records in 120 s")
        await asyncio.sleep(0.005)
    assert seen.done_at is not None
    group = records / (seen.done_at - started)
    for m in members:
        await m.stop()
    return group, single


def run(quick: bool = False) -> list[Metric]:
    rounds = 1 if quick else 5
    records = 30_000 if quick else 200_000
    if smoke():
        rounds, records = 1, 5_000
    with tempfile.TemporaryDirectory(prefix="sluice-bench-groups-") as tmp:
        topics = {
            TOPIC: (PARTITIONS, {}),
            "__consumer_offsets": (12, {"cleanup.policy": "compact"}),
        }
        broker = start_broker(Path(tmp) / "b", topics, ["--no-fsync"])
        try:
            results = asyncio.run(rebalances(broker.url, broker.api_key, rounds))
            group_rps, single_rps = asyncio.run(throughput(broker.url, broker.api_key, records))
        finally:
            broker.stop()
    metrics = []
    for case, target in (("join", 500), ("leave", 500), ("crash", SESSION_MS + 500)):
        ms = statistics.median(v for v, _ in results[case])
        moved = statistics.median(m for _, m in results[case])
        metrics.append(
            Metric(
                name=f"groups.rebalance_ms.{case}",
                value=round(ms, 1),
                unit="ms",
                better="lower",
                workload=f"6 consumers, 60 partitions, one {VERBS[case]}; heartbeat 100 ms, "
                f"session 2 s; median of {rounds}; median partitions moved {moved:g}",
                target_value=target,
            )
        )
    metrics.append(
        Metric(
            name="groups.consume.records_per_s",
            value=round(group_rps),
            unit="records/s",
            better="higher",
            workload=f"{records} 100-byte records over 60 partitions, 6 group members in one "
            "process (long poll), their clients connected before the clock, from the first "
            "join to the last distinct record; both sides count distinct records the same way "
            "and start with the producer's futures freed",
            peer="one AsyncConsumer assigned all 60 partitions, same data, from its first fetch",
            peer_value=round(single_rps),
            target_ratio=0.7,
        )
    )
    return metrics
