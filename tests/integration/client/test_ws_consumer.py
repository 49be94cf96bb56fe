"""The consumer's WebSocket fetch path (``fetch_mode="websocket"``) against a real broker:
every record in order, credit-bounded buffering, the live tail, offset resets, a broker
restart mid-stream, and a clean close."""

from __future__ import annotations

import asyncio
import time

import pytest

from brokernodes.client.consumer import AsyncConsumer, Consumer
from brokernodes.client.producer import AsyncProducer
from brokernodes.errors import BrokerError


def run(coro, timeout: float = 30.0):
    async def bounded():
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


def ws_consumer(broker, **config) -> AsyncConsumer:
    return AsyncConsumer(broker.url, broker.api_key, fetch_mode="websocket", **config)


async def poll_until(consumer: AsyncConsumer, expected: int, timeout: float = 10.0) -> list:
    records: list = []
    deadline = time.monotonic() + timeout
    while len(records) < expected and time.monotonic() < deadline:
        records.extend(await consumer.poll(0.5))
    return records


def test_fetch_mode_is_checked():
    with pytest.raises(ValueError, match="fetch_mode"):
        AsyncConsumer("http://127.0.0.1:1", "k", fetch_mode="carrier-pigeon")


def test_every_record_arrives_in_order(client_broker):
    count = 3000

    async def main():
        async with AsyncProducer(
            client_broker.url, client_broker.api_key, batch_size=1024, linger_ms=1
        ) as p:
            for i in range(count):
                p.send("ws-order", b"%06d" % i, key=b"k%d" % (i % 37))
            await p.flush()
        async with ws_consumer(client_broker, auto_offset_reset="earliest") as c:
            c.assign(await c.partitions_for("ws-order"))
            await c.seek_to_beginning()
            records = await poll_until(c, count)
            await asyncio.sleep(0.2)
            records.extend(await c.poll(0.1))  # nothing more may arrive
            return records

    records = run(main())
    assert len(records) == count
    by_partition: dict[int, list] = {}
    for r in records:
        by_partition.setdefault(r.partition, []).append(r)
    for rs in by_partition.values():
        offsets = [r.offset for r in rs]
        assert offsets == list(range(offsets[0], offsets[0] + len(rs)))
        values = [int(r.value) for r in rs]
        assert values == sorted(values)
        keys = {r.key for r in rs}
        assert all(int(r.value) % 37 == int(r.key[1:]) for r in rs) and keys
    assert sorted(int(r.value) for r in records) == list(range(count))


def test_credit_bounds_what_is_buffered_and_poll_resumes_the_stream(client_broker):
    window = 8192
    batch_size = 1024
    count = 1000  # about 110 KB: many times the window

    async def main():
        async with AsyncProducer(
            client_broker.url, client_broker.api_key, batch_size=batch_size, linger_ms=1
        ) as p:
            for i in range(count):
                p.send("ws-credit", b"%06d" % i + b"x" * 94)
            await p.flush()
        async with ws_consumer(
            client_broker, auto_offset_reset="earliest", max_buffered_bytes=window
        ) as c:
            c.assign([("ws-credit", 0)])
            await c.seek_to_beginning()
            await asyncio.sleep(0.5)  # the stream runs as far as its credit lets it
            state = c._partitions[next(iter(c._partitions))]
            buffered = state.buffered_bytes  # fetched batches not yet handed out
            records = await poll_until(c, count)
            return buffered, records

    buffered, records = run(main())
    # Frames are granted back only while the buffer has room: at most about twice the
    # window (plus a batch) is ever buffered, far below the ~100 KB available.
    assert 0 < buffered <= 2 * window + 2 * batch_size
    assert [r.offset for r in records] == list(range(count))
    assert [int(r.value[:6]) for r in records] == list(range(count))


def test_live_tail_is_pushed_promptly(client_broker):
    async def main():
        async with ws_consumer(client_broker) as c:
            c.assign([("ws-tail", 0), ("ws-tail", 1)])
            await c.seek_to_end()
            await asyncio.sleep(0.3)  # the streams are open and waiting
            async with AsyncProducer(client_broker.url, client_broker.api_key, linger_ms=0) as p:
                started = time.monotonic()
                await p.send("ws-tail", b"now", partition=1)
                records = await c.poll(5.0)
                return records, time.monotonic() - started

    records, elapsed = run(main())
    assert [(r.partition, r.value) for r in records] == [(1, b"now")]
    assert elapsed < 1.0


def test_out_of_range_offset_resets_or_raises(client_broker):
    async def main():
        async with AsyncProducer(client_broker.url, client_broker.api_key) as p:
            for i in range(5):
                p.send("ws-range", b"r%d" % i)
            await p.flush()
        async with ws_consumer(client_broker, auto_offset_reset="earliest") as c:
            c.assign([("ws-range", 0)])
            c.seek(("ws-range", 0), 10**9)
            reset = await poll_until(c, 5)
        async with ws_consumer(client_broker, auto_offset_reset="none") as c:
            c.assign([("ws-range", 0)])
            c.seek(("ws-range", 0), 10**9)
            with pytest.raises(BrokerError) as info:
                await poll_until(c, 1, timeout=5)
        return reset, info.value

    reset, error = run(main())
    assert [r.value for r in reset][:5] == [b"r0", b"r1", b"r2", b"r3", b"r4"]
    assert error.error_code == "OFFSET_OUT_OF_RANGE"


def test_stream_reopens_after_a_broker_restart(broker_factory):
    broker = broker_factory({"t": (1, {})})

    async def main():
        async with ws_consumer(broker, retry_backoff_ms=50) as c:
            c.assign([("t", 0)])
            await c.seek_to_end()
            async with AsyncProducer(broker.url, broker.api_key, linger_ms=0) as p:
                await p.send("t", b"before")
            first = await poll_until(c, 1)
            await asyncio.to_thread(broker.restart)
            async with AsyncProducer(broker.url, broker.api_key, linger_ms=0) as p:
                await p.send("t", b"after")
            second = await poll_until(c, 1, timeout=15)
            return first, second

    first, second = run(main(), timeout=60)
    assert [(r.offset, r.value) for r in first] == [(0, b"before")]
    assert [(r.offset, r.value) for r in second] == [(1, b"after")]


def test_close_ends_the_streams_cleanly(client_broker):
    async def main():
        c = ws_consumer(client_broker)
        await c.start()
        c.assign([("ws-tail", 0), ("ws-tail", 1)])
        await c.seek_to_end()
        await asyncio.sleep(0.2)
        tasks = [s.task for s in c._partitions.values()]
        await asyncio.wait_for(c.close(), 5)
        return tasks

    tasks = run(main())
    assert tasks and all(t.done() for t in tasks)


def test_sync_consumer_over_websocket(client_broker):
    with Consumer(
        client_broker.url,
        client_broker.api_key,
        fetch_mode="websocket",
        auto_offset_reset="earliest",
    ) as c:
        c.assign([("ws-order", 0)])
        c.seek_to_beginning()
        records = c.poll(5.0)
    assert records and [r.offset for r in records] == list(range(len(records)))
