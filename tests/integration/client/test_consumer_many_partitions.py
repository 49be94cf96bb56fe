"""A consumer assigned more partitions on one broker than its connection pool holds (64)
against a real broker: every partition is read, over long polls and over WebSocket streams.

Each partition keeps one fetch outstanding; with 70 partitions six of them wait for a
connection. The pool hands connections out in the order they were asked for, so a partition
whose long poll just ended queues behind those waiting instead of taking its connection again
(without that, the six waited until their connect timeout and read nothing before it)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from brokernodes.client import AsyncGroupConsumer
from brokernodes.client.consumer import AsyncConsumer
from brokernodes.client.producer import AsyncProducer
from harness.broker import BrokerLauncher, BrokerProcess

PARTITIONS = 70  # more than the consumer's 64 connections per broker
PER_PARTITION = 10
WAIT_MS = 2000  # each idle long poll holds its connection this long

TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    "many-backlog": (PARTITIONS, {}),
    "many-tail": (PARTITIONS, {}),
    "many-ws": (PARTITIONS, {}),
    "many-few": (PARTITIONS, {}),
    "many-group": (PARTITIONS, {}),
    "__consumer_offsets": (4, {"cleanup.policy": "compact"}),
}


@pytest.fixture(scope="module")
def many_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    launcher = BrokerLauncher(tmp_path_factory.mktemp("many-partitions"))
    try:
        yield launcher(TOPICS)
    finally:
        launcher.close()


def run(coro, timeout: float = 40.0):
    async def bounded():
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


async def produce_each(broker: BrokerProcess, topic: str, count: int, tag: str) -> None:
    async with AsyncProducer(broker.url, broker.api_key, linger_ms=5) as p:
        for i in range(count):
            for partition in range(PARTITIONS):
                p.send(topic, b"%s-%d-%d" % (tag.encode(), partition, i), partition=partition)
        await p.flush()


async def poll_until(consumer: AsyncConsumer, expected: int, within_s: float) -> list:
    records: list = []
    deadline = time.monotonic() + within_s
    while len(records) < expected and time.monotonic() < deadline:
        records.extend(await consumer.poll(0.5))
    return records


def per_partition(records: list) -> dict[int, int]:
    counts = dict.fromkeys(range(PARTITIONS), 0)
    for r in records:
        counts[r.partition] += 1
    return counts


@pytest.mark.parametrize(
    ("topic", "fetch_mode"), [("many-backlog", "long_poll"), ("many-ws", "websocket")]
)
def test_every_partition_of_a_backlog_is_read(many_broker, topic, fetch_mode):
    """700 records already in 70 partitions: all of them within two long polls' time
    (before: the partitions left without a connection read nothing for 10 s; in websocket
    mode the streams held their connections for good and six partitions were never read)."""

    async def main():
        await produce_each(many_broker, topic, PER_PARTITION, "b")
        async with AsyncConsumer(
            many_broker.url,
            many_broker.api_key,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=WAIT_MS,
            fetch_mode=fetch_mode,
        ) as c:
            c.assign([(topic, p) for p in range(PARTITIONS)])
            started = time.monotonic()
            records = await poll_until(c, PARTITIONS * PER_PARTITION, 3 * WAIT_MS / 1000)
            return records, time.monotonic() - started

    records, elapsed = run(main())
    counts = per_partition(records)
    assert {p: n for p, n in counts.items() if n != PER_PARTITION} == {}
    assert elapsed < 3 * WAIT_MS / 1000
    assert len({(r.partition, r.offset) for r in records}) == len(records)


def test_new_records_reach_every_partition_while_long_polls_wait(many_broker):
    """Caught up on all 70 partitions (64 long polls open, six fetches queued), one new
    record per partition arrives on every partition within a long poll's time, in rounds."""
    topic = "many-tail"

    async def main():
        async with AsyncConsumer(
            many_broker.url,
            many_broker.api_key,
            auto_offset_reset="latest",
            fetch_max_wait_ms=WAIT_MS,
        ) as c:
            c.assign([(topic, p) for p in range(PARTITIONS)])
            for p in range(PARTITIONS):
                await c.position((topic, p))
            await asyncio.sleep(0.5)  # every fetch task is in its long poll or queued
            rounds = []
            for n in range(3):
                await produce_each(many_broker, topic, 1, f"t{n}")
                started = time.monotonic()
                records = await poll_until(c, PARTITIONS, 2 * WAIT_MS / 1000)
                rounds.append((records, time.monotonic() - started))
            return rounds

    for records, elapsed in run(main()):
        counts = per_partition(records)
        assert {p: n for p, n in counts.items() if n != 1} == {}
        assert elapsed < 2 * WAIT_MS / 1000


def test_a_few_connections_serve_many_partitions_in_turns(many_broker):
    """``max_connections_per_broker=4``: 70 partitions' fetches take turns on four
    connections and the backlog is still read whole, each record once."""
    topic = "many-few"

    async def main():
        await produce_each(many_broker, topic, PER_PARTITION, "f")
        async with AsyncConsumer(
            many_broker.url,
            many_broker.api_key,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=WAIT_MS,
            max_connections_per_broker=4,
        ) as c:
            c.assign([(topic, p) for p in range(PARTITIONS)])
            return await poll_until(c, PARTITIONS * PER_PARTITION, 5 * WAIT_MS / 1000)

    records = run(main())
    assert {p: n for p, n in per_partition(records).items() if n != PER_PARTITION} == {}
    assert len({(r.partition, r.offset) for r in records}) == len(records)


def test_a_group_member_with_70_partitions_reads_them_all(many_broker):
    """The group consumer fetches through the same consumer: one member owning all 70
    partitions reads the backlog of each, then one new record per partition."""
    topic = "many-group"

    async def main():
        await produce_each(many_broker, topic, PER_PARTITION, "g")
        c = AsyncGroupConsumer(
            many_broker.url,
            many_broker.api_key,
            group_id="many-group-g",
            topics=[topic],
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=200,
            fetch_max_wait_ms=WAIT_MS,
        )
        await c.start()
        try:
            backlog: list = []
            deadline = time.monotonic() + 15
            while len(backlog) < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
                backlog.extend(await c.poll(0.5))
            await produce_each(many_broker, topic, 1, "gt")
            tail: list = []
            deadline = time.monotonic() + 2 * WAIT_MS / 1000
            while len(tail) < PARTITIONS and time.monotonic() < deadline:
                tail.extend(await c.poll(0.5))
            return backlog, tail
        finally:
            await c.close()

    backlog, tail = run(main())
    assert {p: n for p, n in per_partition(backlog).items() if n != PER_PARTITION} == {}
    assert {p: n for p, n in per_partition(tail).items() if n != 1} == {}
