"""The leader's group commit under a flush policy, on a real log that fsyncs in a temp dir:
no request is answered before the fsync that covers its records, requests waiting together
share fsyncs, and a failed fsync acknowledges none of them."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
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


def test_a_request_the_fsync_in_flight_covers_is_released_by_it(tmp_path):
    """A request appended before the fsync in flight started, but asking for it after (its
    coroutine ran later), is released by that fsync, even when more requests queue for the
    next one meanwhile (they once replaced it in the waiting list: it was never answered)."""

    async def scenario():
        p, flushed = leader(tmp_path, LogConfig(flush_messages=1))
        gate = threading.Event()
        flush = p.log.flush_policy_to

        def gated(offset: int) -> None:
            gate.wait(10)
            flush(offset)

        p.log.flush_policy_to = gated
        p.log.append(batch("a"), leader_epoch=0, defer_flush=True)
        p.log.append(batch("b"), leader_epoch=0, defer_flush=True)
        second = asyncio.create_task(p._group_commit(2))  # starts the fsync up to 2
        await asyncio.sleep(0.05)
        p.log.append(batch("c"), leader_epoch=0, defer_flush=True)
        first = asyncio.create_task(p._group_commit(1))  # covered by the fsync in flight
        third = asyncio.create_task(p._group_commit(3))  # waits for the next one
        await asyncio.sleep(0.05)
        gate.set()
        await asyncio.wait_for(asyncio.gather(first, second, third), 10)
        assert p.log.recovery_point == 3
        assert flushed == [2, 3]
        p.log.close()

    asyncio.run(scenario())


def test_an_fsync_left_short_of_its_target_is_followed_by_another(tmp_path):
    """An fsync that leaves the recovery point short of its target (a segment rolled at the
    target meanwhile) neither fails its requests nor answers them: the next fsync covers
    them and they are answered then."""

    async def scenario():
        p, flushed = leader(tmp_path, LogConfig(flush_messages=1))
        flush = p.log.flush_policy_to

        def short_once(offset: int) -> None:
            flush(offset - 1 if not flushed else offset)

        p.log.flush_policy_to = short_once
        results = await asyncio.wait_for(
            asyncio.gather(*(p.append_as_leader(batch(f"r{i}"), acks=1) for i in range(3))), 10
        )
        assert p.log.recovery_point == 3
        assert all(p.log.recovery_point > r.last_offset for r in results)
        assert len(flushed) >= 2
        p.log.close()

    asyncio.run(scenario())
