"""The consumer keeps fetched batches undecoded until ``poll`` hands their records out, and a
position lookup racing the fetch task's own reset never makes records come twice (against
the in-memory fake broker)."""

from __future__ import annotations

import asyncio

import pytest
from crc32c import crc32c

from brokernodes.client import fetcher
from brokernodes.client.consumer import TopicPartition
from brokernodes.errors import InvalidRecordError
from brokernodes.records.header import ATTRIBUTES_AT, CRC_AT, HEADER_SIZE
from tests.unit.client.fakes import FakeTransport
from tests.unit.client.test_consumer import consumer, drain, fill, run

TP = TopicPartition("t", 0)


class CountingDecodes:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = fetcher.decode_batch

        def counted(*args, **kwargs):
            self.calls += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(fetcher, "decode_batch", counted)


def test_fetched_batches_are_decoded_only_as_poll_takes_them(monkeypatch):
    decodes = CountingDecodes(monkeypatch)
    fake = FakeTransport({"t": 1})

    async def main():
        await fill(fake, 60, batch_size=200)  # several batches
        batches = len(fake.logs[("t", 0)].batches)
        async with consumer(fake) as c:
            c.assign([TP])
            c.seek(TP, 0)
            await asyncio.sleep(0.1)  # the fetch task has fetched everything
            state = c._partitions[TP]
            queued, before = len(state.pending), decodes.calls
            first = await c.poll(1.0, max_records=1)
            after_one = decodes.calls - before
            c.seek(TP, 0)  # what was fetched ahead is dropped without being decoded
            records = await drain(c, 60)
            return batches, queued, before, after_one, first, records

    batches, queued, before, after_one, first, records = run(main())
    assert batches > 2 and queued == batches
    assert before == 0 and after_one == 1  # one record taken: one batch decoded
    assert [r.offset for r in first] == [0]
    assert [r.offset for r in records] == list(range(60))
    assert decodes.calls == 1 + batches


def test_buffered_bytes_bound_what_is_fetched_ahead():
    fake = FakeTransport({"t": 1})

    async def main():
        await fill(fake, 200, batch_size=300)
        async with consumer(fake, max_buffered_bytes=1000, fetch_max_bytes=600) as c:
            c.assign([TP])
            c.seek(TP, 0)
            await asyncio.sleep(0.1)
            state = c._partitions[TP]
            ahead = state.buffered_bytes
            records = await drain(c, 200)
            return ahead, records, state.buffered_bytes

    ahead, records, left = run(main())
    assert 1000 <= ahead < 1000 + 600  # stopped at the bound (one fetch past it at most)
    assert [r.offset for r in records] == list(range(200))
    assert left == 0


def test_a_batch_that_does_not_decode_stops_the_partition_after_the_records_before_it():
    fake = FakeTransport({"t": 1})

    async def main():
        await fill(fake, 20, batch_size=200)
        log = fake.logs[("t", 0)]
        # the second batch claims one record more than it holds, with a CRC to match: it
        # passes the check made when it is fetched and fails when it is decoded
        bad = bytearray(log.batches[1])
        count_at = HEADER_SIZE - 4
        bad[count_at : count_at + 4] = (int.from_bytes(bad[count_at:HEADER_SIZE]) + 1).to_bytes(4)
        bad[CRC_AT : CRC_AT + 4] = crc32c(bytes(bad[ATTRIBUTES_AT:])).to_bytes(4)
        log.batches[1] = bytes(bad)
        good = int.from_bytes(log.batches[0][HEADER_SIZE - 4 : HEADER_SIZE])
        async with consumer(fake) as c:
            c.assign([TP])
            c.seek(TP, 0)
            records = await drain(c, good)
            with pytest.raises(InvalidRecordError):
                await c.poll(1.0)
            with pytest.raises(InvalidRecordError):  # until a seek
                await c.poll(0.1)
            return good, records, await c.position(TP)

    good, records, position = run(main())
    assert [r.offset for r in records] == list(range(good))
    assert position == good


class SlowSecondLookup(FakeTransport):
    """Answers the second offset lookup of a partition late: after the fetch task, which
    looked up its own reset position first, has fetched from there."""

    lookups = 0

    async def request(self, method, url, **kw):
        if url.endswith("/offsets"):
            self.lookups += 1
            if self.lookups == 2:
                await asyncio.sleep(0.2)
        return await super().request(method, url, **kw)


def test_a_position_lookup_racing_the_fetch_tasks_reset_reads_nothing_twice():
    fake = SlowSecondLookup({"t": 1})

    async def main():
        await fill(fake, 30)
        async with consumer(fake, auto_offset_reset="earliest") as c:
            c.assign([TP])  # no position: the fetch task resets it, and so does position()
            await asyncio.sleep(0)  # the fetch task's lookup goes first
            position = await c.position(TP)
            records = await drain(c, 30)
            await asyncio.sleep(0.1)
            more = await c.poll(0.1)
            return position, records, more

    position, records, more = run(main())
    assert position == 0
    assert [r.offset for r in records] == list(range(30))
    assert more == []  # before the fix: offsets 0.. again, from the late lookup's reset
