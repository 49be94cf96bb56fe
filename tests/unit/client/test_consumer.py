"""Consumer logic against the in-memory fake broker: positions, seeks, resets, pipelining."""

from __future__ import annotations

import asyncio

import pytest

from brokernodes.client.consumer import AsyncConsumer, Consumer, TopicPartition
from brokernodes.client.producer import AsyncProducer
from brokernodes.errors import BrokerError, SluiceError, UnknownTopicError
from tests.unit.client.fakes import URL, FakeTransport

TP = TopicPartition("t", 0)


def run(coro, timeout: float = 10.0):
    async def bounded():
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


async def fill(fake: FakeTransport, n: int, topic: str = "t", batch_size: int = 300) -> None:
    async with AsyncProducer(URL, transport=fake, batch_size=batch_size, linger_ms=0) as p:
        for i in range(n):
            p.send(
                topic, b"v%d" % i, key=b"k%d" % i, headers=[("n", b"%d" % i)], timestamp=1000 + i
            )
        await p.flush()


async def drain(c: AsyncConsumer, n: int) -> list:
    out = []
    while len(out) < n:
        got = await c.poll(2.0)
        assert got, f"stalled after {len(out)} records"
        out.extend(got)
    return out


def consumer(fake: FakeTransport, **config) -> AsyncConsumer:
    config.setdefault("fetch_max_wait_ms", 20)
    config.setdefault("retry_backoff_ms", 1)
    return AsyncConsumer(URL, "k.s", transport=fake, **config)


def test_poll_returns_decoded_records_in_offset_order():
    fake = FakeTransport({"t": 1})

    async def main():
        await fill(fake, 50)
        async with consumer(fake) as c:
            c.assign([TP])
            c.seek(TP, 0)
            records = await drain(c, 50)
            return records, await c.position(TP)

    records, position = run(main())
    assert [r.offset for r in records] == list(range(50))
    r = records[7]
    assert (r.topic, r.partition, r.key, r.value, r.timestamp) == ("t", 0, b"k7", b"v7", 1007)
    assert r.headers == [("n", b"7")]
    assert position == 50


def test_seek_into_the_middle_of_a_batch_skips_the_records_before():
    fake = FakeTransport({"t": 1})

    async def main():
        await fill(fake, 30, batch_size=100_000)  # one batch
        async with consumer(fake) as c:
            c.assign([TP])
            c.seek(TP, 17)
            return await drain(c, 13)

    assert [r.offset for r in run(main())] == list(range(17, 30))


def test_seek_to_beginning_end_and_timestamp():
    fake = FakeTransport({"t": 1})

    async def main():
        await fill(fake, 20)
        async with consumer(fake) as c:
            c.assign([TP])
            await c.seek_to_end()
            assert await c.position(TP) == 20
            assert await c.poll(0.1) == []
            await c.seek_to_beginning(TP)
            first = (await c.poll(1.0))[0]
            await c.seek_to_timestamp(1010, TP)
            after = (await c.poll(1.0))[0]
            times = await c.offsets_for_times({TP: 1010})
            return first, after, times

    first, after, times = run(main())
    assert first.offset == 0
    assert after.timestamp <= 1010 <= after.timestamp + 10  # the batch holding 1010
    assert times[TP].offset <= 10


def test_default_reset_latest_waits_for_new_records():
    fake = FakeTransport({"t": 1})

    async def main():
        await fill(fake, 5)
        async with consumer(fake) as c:
            c.assign([TP])
            assert await c.poll(0.1) == []
            await fill(fake, 3)
            return await drain(c, 3)

    assert [r.offset for r in run(main())] == [5, 6, 7]


class EarlyTimerLoop(asyncio.SelectorEventLoop):
    """Fires every timer 1 ms before its time, as uvloop's millisecond timers may."""

    def call_at(self, when, callback, *args, context=None):
        return super().call_at(when - 0.001, callback, *args, context=context)


def test_poll_returns_at_its_timeout_when_the_timer_fires_early():
    # A poll that woke from its timer just before the deadline used to wait again with no
    # timer left: `sluice bench e2e` on uvloop hung in its last poll about one run in 15.
    fake = FakeTransport({"t": 1})

    async def main():
        async with consumer(fake) as c:
            c.assign([TP])
            await c.seek_to_end()
            loop = asyncio.get_running_loop()
            started = loop.time()
            for _ in range(20):
                assert await c.poll(0.01) == []
            return loop.time() - started

    with asyncio.Runner(loop_factory=EarlyTimerLoop) as runner:
        waited = runner.run(asyncio.wait_for(main(), 10.0))
    assert 0.15 <= waited < 5.0


def test_out_of_range_resets_per_policy():
    fake = FakeTransport({"t": 1})

    async def main():
        await fill(fake, 5)
        async with consumer(fake, auto_offset_reset="earliest") as c:
            c.assign([TP])
            c.seek(TP, 99)
            records = await drain(c, 5)
        async with consumer(fake, auto_offset_reset="none") as c:
            c.assign([TP])
            c.seek(TP, 99)
            with pytest.raises(BrokerError) as info:
                await c.poll(1.0)
            assert info.value.error_code == "OFFSET_OUT_OF_RANGE"
        async with consumer(fake, auto_offset_reset="none") as c:
            c.assign([TP])
            with pytest.raises(SluiceError, match="seek it first"):
                await c.position(TP)
        return records

    assert [r.offset for r in run(main())] == list(range(5))


def test_fetches_run_ahead_of_poll_one_per_partition():
    fake = FakeTransport({"t": 2})

    async def main():
        await fill(fake, 100)
        async with consumer(fake, max_poll_records=10) as c:
            c.assign([("t", 0), ("t", 1)])
            await c.seek_to_beginning()
            await asyncio.sleep(0.1)
            fetches = [r for r in fake.requests if r.method == "GET" and "batches" in r.path]
            assert fetches  # fetched before the first poll
            got = await drain(c, 100)
            return got

    records = run(main())
    assert len(records) == 100
    assert len({(r.partition, r.offset) for r in records}) == 100


def test_assign_refuses_unknown_partitions():
    fake = FakeTransport({"t": 1})

    async def main():
        async with consumer(fake) as c:
            with pytest.raises(UnknownTopicError):
                c.assign([("nope", 0)])
            with pytest.raises(UnknownTopicError):
                c.assign([("t", 3)])

    run(main())


def test_sync_consumer():
    fake = FakeTransport({"t": 1})
    asyncio.run(fill(fake, 10))
    c = Consumer(URL, "k.s", transport=fake, fetch_max_wait_ms=20)
    try:
        c.assign([TP])
        c.seek_to_beginning()
        records = []
        while len(records) < 10:
            records.extend(c.poll(2.0))
        assert c.position(TP) == 10
        assert c.end_offsets([TP]) == {TP: 10}
    finally:
        c.close()
    assert [r.value for r in records] == [b"v%d" % i for i in range(10)]
