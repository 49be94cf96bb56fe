"""The leader's group commit under a flush policy, on a real log that fsyncs in a temp dir:
no request is answered before the fsync that covers its records, requests waiting together
share fsyncs, and a failed fsync acknowledges none of them."""

from __future__ import annotations

import asyncio
import errno
import os
import time

import pytest

from brokernodes.errors import KafkaStorageError
from brokernodes.records.batch import Record, encode_batch
from brokernodes.server.metadata.cluster import PartitionInfo
from brokernodes.server.replica.partition import Partition
from brokernodes.storage.config import LogConfig
from brokernodes.storage.log import PartitionLog
from brokernodes.storage.producer_state import ProducerStateManager

REQUESTS = 40


def batch(value: str) -> bytearray:
    return bytearray(encode_batch([Record(int(time.time() * 1000), None, value.encode())]))


def leader(tmp_path, config: LogConfig) -> tuple[Partition, list[int]]:
    """A leader (RF 1) on a log that fsyncs; the targets of its group-commit flushes, each
    recorded once its fsync has returned."""
    pinfo = PartitionInfo("t", 0, 1, 0, (1,), (1,), "", 0)
    log = PartitionLog(str(tmp_path / "t-0"), config, fsync=True)
    flushed: list[int] = []
    real = log.flush_policy_to

    def counted(offset: int) -> None:
        real(offset)
        flushed.append(offset)

    log.flush_policy_to = counted
    return Partition(pinfo, log, 1, ProducerStateManager(), min_insync_replicas=1), flushed


@pytest.mark.parametrize("acks", [1, -1])
def test_every_answer_comes_after_the_fsync_of_its_records(tmp_path, acks):
    async def scenario():
        p, flushed = leader(tmp_path, LogConfig(flush_messages=1))
        checked: list[tuple[int, int, int]] = []

        async def produce(i: int) -> None:
            result = await p.append_as_leader(batch(f"r{i}"), acks=acks)
            # at the moment of the answer: on disk, and a flush covering it has returned
            checked.append((result.last_offset, p.log.recovery_point, max(flushed)))

        await asyncio.gather(*(produce(i) for i in range(REQUESTS)))
        assert len(checked) == REQUESTS
        for last_offset, recovery_point, flushed_to in checked:
            assert recovery_point > last_offset
            assert flushed_to > last_offset
        assert p.log.recovery_point == REQUESTS
        # requests that waited together shared fsyncs
        assert 1 <= len(flushed) < REQUESTS
        p.log.close()

    asyncio.run(scenario())


def test_one_request_at_a_time_gets_one_fsync_each(tmp_path):
    async def scenario():
        p, flushed = leader(tmp_path, LogConfig(flush_messages=1))
        for i in range(3):
            result = await p.append_as_leader(batch(f"r{i}"), acks=1)
            assert p.log.recovery_point == result.last_offset + 1
        assert flushed == [1, 2, 3]
        p.log.close()

    asyncio.run(scenario())


def test_without_a_flush_policy_appends_do_not_wait_for_fsyncs(tmp_path):
    async def scenario():
        p, flushed = leader(tmp_path, LogConfig())
        await asyncio.gather(*(p.append_as_leader(batch(f"r{i}"), acks=1) for i in range(5)))
        assert flushed == []
        assert p.log.recovery_point == 0
        p.log.close()

    asyncio.run(scenario())


def test_a_failed_fsync_acknowledges_none_of_the_requests_waiting_on_it(tmp_path, monkeypatch):
    async def scenario():
        p, _ = leader(tmp_path, LogConfig(flush_messages=1))
        await p.append_as_leader(batch("before"), acks=1)

        def failing_fsync(fd):
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(os, "fsync", failing_fsync)
        outcomes = await asyncio.gather(
            *(p.append_as_leader(batch(f"r{i}"), acks=1) for i in range(5)),
            return_exceptions=True,
        )
        monkeypatch.undo()
        assert all(isinstance(o, KafkaStorageError) for o in outcomes), outcomes
        assert p.log.recovery_point == 1
        p.log.close()

    asyncio.run(scenario())


def test_a_cancelled_request_leaves_the_fsync_and_the_others_alone(tmp_path):
    async def scenario():
        p, flushed = leader(tmp_path, LogConfig(flush_messages=1))
        tasks = [asyncio.create_task(p.append_as_leader(batch(f"r{i}"), acks=1)) for i in range(6)]
        await asyncio.sleep(0)  # each has appended and waits for an fsync
        tasks[2].cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
        assert isinstance(done[2], asyncio.CancelledError)
        others = [r for i, r in enumerate(done) if i != 2]
        assert all(p.log.recovery_point > r.last_offset for r in others)
        assert p.log.recovery_point == 6 and max(flushed) == 6
        p.log.close()

    asyncio.run(scenario())


def test_a_flush_that_raises_anything_fails_its_requests_instead_of_leaving_them(tmp_path):
    async def scenario():
        p, _ = leader(tmp_path, LogConfig(flush_messages=1))

        def broken(offset: int) -> None:
            raise ValueError("not a storage error")

        p.log.flush_policy_to = broken
        outcomes = await asyncio.wait_for(
            asyncio.gather(
                *(p.append_as_leader(batch(f"r{i}"), acks=1) for i in range(4)),
                return_exceptions=True,
            ),
            10,
        )
        assert all(isinstance(o, ValueError) for o in outcomes), outcomes
        assert p.log.recovery_point == 0
        p.log.close()

    asyncio.run(scenario())
