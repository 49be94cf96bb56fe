"""Partition and ReplicaManager against real logs in a tmp dir (no sockets)."""

import asyncio
import json
import os

import pytest

from brokernodes.errors import (
    CorruptRecordError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
)
from brokernodes.records.batch import Record, encode_batch
from brokernodes.server.config import BrokerConfig
from brokernodes.server.http.sendfile import close_slices, open_slices
from brokernodes.server.metadata.cluster import StaticMetadataSource
from brokernodes.server.replica.manager import ReplicaManager
from brokernodes.storage.files import FileSlice


def _batch(values, **kw):
    return bytearray(encode_batch([Record(1000, None, v) for v in values], **kw))


@pytest.fixture
def manager_factory(tmp_path):
    meta = tmp_path / "m.json"
    meta.write_text(
        json.dumps(
            {
                "cluster_id": "c",
                "broker_id": 1,
                "brokers": [{"id": 1, "url": "http://a"}, {"id": 2, "url": "http://b"}],
                "topics": [
                    {"name": "t", "partitions": 2, "leaders": [1, 2], "leader_epochs": [4, 0]}
                ],
            }
        )
    )
    config = BrokerConfig(str(meta), str(tmp_path / "data"), 0, fsync=False)

    def make():
        return ReplicaManager(config, StaticMetadataSource(meta))

    return make


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


def test_append_fetch_and_leadership(manager_factory):
    async def main():
        rm = manager_factory()
        await rm.start()
        assert set(rm.partitions) == {("t", 0)}
        r = await rm.append("t", 0, _batch([b"a", b"b"]))
        assert (r.base_offset, r.last_offset, r.record_count) == (0, 1, 2)
        data = await rm.fetch("t", 0, 0, max_bytes=1 << 20)
        raw = b"".join(s.read_bytes() for s in data.slices)
        assert raw[12:16] == (4).to_bytes(4, "big")  # leader epoch from metadata
        assert data.high_watermark == 2
        with pytest.raises(NotLeaderOrFollowerError) as e:
            rm.get_partition("t", 1)
        assert e.value.details == {"leader_id": 2, "leader_url": "http://b"}
        with pytest.raises(OffsetOutOfRangeError) as e:
            await rm.fetch("t", 0, 9, max_bytes=100)
        assert e.value.details == {"log_start_offset": 0, "log_end_offset": 2}
        with pytest.raises(CorruptRecordError):
            await rm.append("t", 0, bytearray(b"\x00" * 70))
        assert rm.list_offsets("t", 0, -1).offset == 2
        await rm.close()

    run(main())


def test_long_poll_wakes_and_times_out(manager_factory):
    async def main():
        rm = manager_factory()
        await rm.start()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        empty = await rm.fetch("t", 0, 0, max_bytes=100, max_wait_ms=200)
        assert empty.size == 0 and loop.time() - t0 >= 0.19
        waiter = asyncio.create_task(rm.fetch("t", 0, 0, max_bytes=1 << 20, max_wait_ms=5000))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        await rm.append("t", 0, _batch([b"x"]))
        data = await asyncio.wait_for(waiter, 1)
        assert data.size > 0
        # close releases waiters
        waiter = asyncio.create_task(rm.fetch("t", 0, 1, max_bytes=100, max_wait_ms=5000))
        await asyncio.sleep(0.05)
        await rm.close()
        assert (await asyncio.wait_for(waiter, 1)).size == 0

    run(main())


def test_data_waiters_each_wake_once_and_leave_no_trace(manager_factory):
    """Several consumers waiting on one partition are all released by one append; a waiter
    that timed out or was cancelled is not kept in the partition's waiter list."""

    async def main():
        rm = manager_factory()
        await rm.start()
        p = rm.partitions[("t", 0)]
        waiters = [asyncio.create_task(p.wait_for_data(5)) for _ in range(3)]
        await asyncio.sleep(0.01)
        assert len(p._data_arrived) == 3
        await rm.append("t", 0, _batch([b"x"]))
        await asyncio.wait_for(asyncio.gather(*waiters), 1)
        assert p._data_arrived is None  # the wake took the whole list
        await p.wait_for_data(0.01)  # times out: nothing new
        assert p._data_arrived == []
        cancelled = asyncio.create_task(p.wait_for_data(5))
        await asyncio.sleep(0.01)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert p._data_arrived == []
        await rm.close()

    run(main())


def test_waits_use_the_partitions_loop_and_a_later_loop_once_it_closed(manager_factory):
    """A partition's waits take the loop it was built in without asking asyncio (a getpid()
    call per wait on 3.11); once that loop has closed, a wait in another loop still works."""
    holder = {}

    async def build():
        rm = holder["rm"] = manager_factory()
        await rm.start()
        p = holder["p"] = rm.partitions[("t", 0)]
        assert p._running_loop() is asyncio.get_running_loop()
        waiter = asyncio.create_task(p.wait_for_data(5))
        await asyncio.sleep(0.01)
        await rm.append("t", 0, _batch([b"x"]))
        await asyncio.wait_for(waiter, 1)

    run(build())

    async def later():
        p = holder["p"]
        assert p._running_loop() is asyncio.get_running_loop()
        await p.wait_for_data(0.01)  # times out in this loop's timer
        await holder["rm"].close()

    run(later())


def test_idempotence_survives_reopen(manager_factory):
    async def main():
        rm = manager_factory()
        await rm.start()
        kw = {"producer_id": 77, "producer_epoch": 0}
        await rm.append("t", 0, _batch([b"a"], base_sequence=0, **kw))
        await rm.append("t", 0, _batch([b"b", b"c"], base_sequence=1, **kw))
        dup = await rm.append("t", 0, _batch([b"b", b"c"], base_sequence=1, **kw))
        assert dup.duplicate and (dup.base_offset, dup.last_offset) == (1, 2)
        await rm.close()
        rm = manager_factory()
        await rm.start()
        dup = await rm.append("t", 0, _batch([b"a"], base_sequence=0, **kw))
        assert dup.duplicate and dup.base_offset == 0
        with pytest.raises(OutOfOrderSequenceError):
            await rm.append("t", 0, _batch([b"z"], base_sequence=9, **kw))
        ok = await rm.append("t", 0, _batch([b"d"], base_sequence=3, **kw))
        assert ok.base_offset == 3 and not ok.duplicate
        await rm.close()

    run(main())


def test_open_slices_reports_a_vanished_file(tmp_path):
    a = tmp_path / "a.log"
    a.write_bytes(b"0123456789")
    opened = open_slices([FileSlice(str(a), 2, 3), FileSlice(str(a), 5, 1)])
    assert opened is not None and opened[0].fd == opened[1].fd
    os.unlink(a)  # the open fd still reads the bytes
    assert os.pread(opened[0].fd, 3, 2) == b"234"
    close_slices(s.fd for s in opened)
    assert open_slices([FileSlice(str(a), 0, 1)]) is None
