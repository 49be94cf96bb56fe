"""Transactions on ``Partition`` with real logs in temp dirs: markers through the replicated
append path, the LSO and aborted transactions on a leader and its follower, failover,
truncation that reopens a transaction, restart, fencing, and read_committed reads."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from brokernodes.errors import InvalidProducerEpochError, NotLeaderOrFollowerError
from brokernodes.records.batch import Record, decode_batches, encode_batch
from brokernodes.server.metadata.cluster import PartitionInfo
from brokernodes.server.replica.partition import Partition
from brokernodes.storage.txn_index import AbortedTxn

BIG = 1 << 20


def info(leader=1, epoch=0, isr=(1, 2)) -> PartitionInfo:
    return PartitionInfo("t", 0, leader, epoch, (1, 2), tuple(isr), "", 0)


def txn(pid: int, seq: int, *values: str, epoch: int = 0) -> bytearray:
    now = int(time.time() * 1000)
    return bytearray(
        encode_batch(
            [Record(now, None, v.encode()) for v in values],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            is_transactional=True,
        )
    )


def plain(*values: str) -> bytearray:
    now = int(time.time() * 1000)
    return bytearray(encode_batch([Record(now, None, v.encode()) for v in values]))


def open_partition(path, broker_id: int, pinfo: PartitionInfo) -> Partition:
    log, state = Partition.open_log(str(path), pinfo, None, fsync=False)
    return Partition(pinfo, log, broker_id, state, min_insync_replicas=1)


async def replicate(leader: Partition, follower: Partition, replica_id: int = 2) -> None:
    """One replica fetch round: the follower copies what it lacks and reports its end."""
    leo = follower.log.log_end_offset
    leader.on_replica_fetch(replica_id, leo, leader.leader_epoch, -1)
    data = leader.read(leo, BIG, replica_id=replica_id).read_bytes()
    if data:
        assert await follower.append_as_follower(data, leo, follower.log_generation)
    leader.on_replica_fetch(replica_id, follower.log.log_end_offset, leader.leader_epoch, -1)
    follower.set_follower_high_watermark(leader.log.high_watermark)


async def marker_replicated(leader: Partition, follower: Partition, *args) -> int:
    task = asyncio.create_task(leader.write_txn_marker(*args, timeout=5))
    await asyncio.sleep(0.01)
    assert not task.done()  # acks=all: waits for the follower
    await replicate(leader, follower)
    return await asyncio.wait_for(task, 2)


def values(p: Partition, *, read_committed: bool) -> list[str]:
    data = p.read(0, BIG, read_committed=read_committed).read_bytes()
    return [
        r.value.decode() for b in decode_batches(data) if not b.header.is_control for r in b.records
    ]


def test_leader_and_follower_agree_on_lso_and_aborts_and_failover_keeps_them(tmp_path):
    async def scenario():
        leader = open_partition(tmp_path / "b1", 1, info())
        follower = open_partition(tmp_path / "b2", 2, info())
        await leader.append_as_leader(txn(7, 0, "a0", "a1"))  # 0-1, aborted below
        await leader.append_as_leader(plain("p0"))  # 2
        await leader.append_as_leader(txn(8, 0, "c0"))  # 3, committed below
        await replicate(leader, follower)
        assert leader.last_stable_offset == follower.last_stable_offset == 0
        assert await marker_replicated(leader, follower, 7, 0, False, 0) == 4
        assert leader.last_stable_offset == 3  # producer 8 still open
        await leader.append_as_leader(txn(9, 0, "o0"))  # 5, left open
        assert await marker_replicated(leader, follower, 8, 0, True, 0) == 6
        await replicate(leader, follower)
        assert leader.log.high_watermark == follower.log.high_watermark == 7
        assert leader.last_stable_offset == follower.last_stable_offset == 5
        assert (
            leader.aborted_transactions(0, 7)
            == follower.aborted_transactions(0, 7)
            == [AbortedTxn(7, 0, 4, 3)]
        )
        assert values(leader, read_committed=False) == ["a0", "a1", "p0", "c0", "o0"]
        # read_committed stops at the LSO; dropping the aborted batches is the reader's job
        assert values(leader, read_committed=True) == ["a0", "a1", "p0", "c0"]
        # failover: the follower leads, with the same LSO; producer 9's commit goes there
        leader.apply_metadata(info(leader=2, epoch=1, isr=(2,)))
        assert follower.apply_metadata(info(leader=2, epoch=1, isr=(2,))) == "leader"
        assert follower.last_stable_offset == 5
        with pytest.raises(NotLeaderOrFollowerError):
            await leader.write_txn_marker(9, 0, True, 0)
        assert await follower.write_txn_marker(9, 0, True, 0, timeout=2) == 7
        assert follower.last_stable_offset == follower.log.high_watermark == 8
        leader.log.close()
        follower.log.close()

    asyncio.run(scenario())


def test_a_truncated_marker_reopens_its_transaction_on_the_follower(tmp_path):
    async def scenario():
        leader = open_partition(tmp_path / "b1", 1, info(isr=(1,)))
        follower = open_partition(tmp_path / "b2", 2, info())
        await leader.append_as_leader(txn(7, 0, "x"))  # 0
        await leader.write_txn_marker(7, 0, False, 0)  # 1
        await replicate(leader, follower)
        assert follower.aborted_transactions(0, 2) == [AbortedTxn(7, 0, 1, 2)]
        # the marker was never committed: the new leader's log ends before it
        await follower.truncate_to(1)
        assert follower.producer_state.ongoing_transactions == {7: 0}
        assert follower.aborted_transactions(0, 2) == []
        assert follower.last_stable_offset == 0
        leader.log.close()
        follower.log.close()

    asyncio.run(scenario())


def test_restart_rebuilds_open_transactions_and_the_txnindex(tmp_path):
    async def scenario():
        p = open_partition(tmp_path / "b1", 1, info(isr=(1,)))
        await p.append_as_leader(txn(7, 0, "a"))  # 0
        await p.append_as_leader(txn(8, 0, "b"))  # 1
        await p.write_txn_marker(7, 0, False, 3)  # 2
        p.checkpoint_high_watermark()
        p.log.close()
        again = open_partition(tmp_path / "b1", 1, info(isr=(1,)))
        assert again.producer_state.ongoing_transactions == {8: 1}
        assert again.last_stable_offset == 1
        assert again.aborted_transactions(0, 3) == [AbortedTxn(7, 0, 2, 1)]
        assert again.producer_state.last_entry(7).coordinator_epoch == 3
        again.log.close()

    asyncio.run(scenario())


def test_markers_of_older_producer_epochs_are_fenced(tmp_path):
    async def scenario():
        p = open_partition(tmp_path / "b1", 1, info(isr=(1,)))
        await p.append_as_leader(txn(7, 0, "a", epoch=2))
        with pytest.raises(InvalidProducerEpochError):
            await p.write_txn_marker(7, 1, True, 0)
        assert p.log.log_end_offset == 1  # nothing appended
        assert await p.write_txn_marker(7, 2, True, 0) == 1
        assert p.last_stable_offset == 2
        p.log.close()

    asyncio.run(scenario())


def test_a_marker_under_a_flush_policy_is_fsynced_before_it_is_answered(tmp_path):
    async def scenario():
        p = open_partition(tmp_path / "b1", 1, info(isr=(1,)))
        p.log.update_config(dataclasses.replace(p.log.config, flush_messages=1))
        await p.append_as_leader(txn(7, 0, "a"))
        offset = await p.write_txn_marker(7, 0, True, 0)
        assert p.log.recovery_point > offset
        p.log.close()

    asyncio.run(scenario())


def test_a_control_batch_that_is_no_marker_ends_nothing_and_opens_fine(tmp_path):
    async def scenario():
        p = open_partition(tmp_path / "b1", 1, info(isr=(1,)))
        await p.append_as_leader(txn(7, 0, "a"))  # 0
        odd = encode_batch(
            [Record(1, b"\x00\x00\x00\x02", b"")],  # control type 2: not a marker
            producer_id=7,
            producer_epoch=0,
            is_transactional=True,
            is_control=True,
        )
        p.log.append(bytearray(odd), leader_epoch=0)  # as if replicated: 1
        p.log.close()
        again = open_partition(tmp_path / "b1", 1, info(isr=(1,)))
        assert again.producer_state.ongoing_transactions == {7: 0}
        assert await again.write_txn_marker(7, 0, True, 0) == 2
        assert again.last_stable_offset == 3
        again.log.close()

    asyncio.run(scenario())
