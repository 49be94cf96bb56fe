"""``Partition`` driven by the replication state machines, on a real log in a temp dir:
acks=all waits, NOT_ENOUGH_REPLICAS, HW-capped reads, leader epochs on batches, replica
fetch fencing, ISR proposals, become-follower, follower appends and truncation."""

from __future__ import annotations

import asyncio
import errno
import os
import time

import pytest

from brokernodes.errors import KafkaStorageError, NotEnoughReplicasError, NotLeaderOrFollowerError
from brokernodes.records.batch import Record, decode_batch, encode_batch
from brokernodes.records.header import (
    HEADER_SIZE,
    iter_batches,
    set_base_offset,
    set_partition_leader_epoch,
)
from brokernodes.replication.errors import NotEnoughReplicasAfterAppendError
from brokernodes.replication.leader import AlterPartitionResponse
from brokernodes.server.main import logs_shut_down_cleanly
from brokernodes.server.metadata.cluster import PartitionInfo, parse_metadata
from brokernodes.server.replica.errors import FencedLeaderEpochError, UnknownLeaderEpochError
from brokernodes.server.replica.partition import Partition, is_disk_failure
from brokernodes.server.replica.scrubber import find_corruption
from brokernodes.storage.config import LogConfig
from brokernodes.storage.log import PartitionLog
from brokernodes.storage.producer_state import ProducerStateManager


def info(leader=1, epoch=0, isr=(1, 2, 3), partition_epoch=0) -> PartitionInfo:
    return PartitionInfo("t", 0, leader, epoch, (1, 2, 3), tuple(isr), "", partition_epoch)


def batch(*values: str, pid: int = -1, seq: int = -1) -> bytearray:
    now = int(time.time() * 1000)
    return bytearray(
        encode_batch(
            [Record(now, None, v.encode()) for v in values],
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=seq,
        )
    )


def open_partition(tmp_path, pinfo: PartitionInfo, *, min_isr=2, lag_ms=30_000) -> Partition:
    log, state = Partition.open_log(str(tmp_path / "t-0"), pinfo, None, fsync=False)
    return Partition(
        pinfo, log, 1, state, min_insync_replicas=min_isr, replica_lag_time_max_ms=lag_ms
    )


def run(coro):
    return asyncio.run(coro)


def test_acks_all_completes_when_the_isr_has_fetched_past_the_append(tmp_path):
    async def scenario():
        p = open_partition(tmp_path, info())
        waiting = asyncio.create_task(p.append_as_leader(batch("a", "b"), acks=-1, timeout=5))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        assert p.log.high_watermark == 0
        assert p.read(0, 1 << 20).size == 0  # consumers see nothing above the HW
        assert p.read(0, 1 << 20, replica_id=2).size > 0  # replicas read to the log end
        p.on_replica_fetch(2, 2, 0, -1)
        await asyncio.sleep(0.01)
        assert not waiting.done()  # replica 3 is in the ISR and has not fetched yet
        p.on_replica_fetch(3, 2, 0, -1)
        result = await asyncio.wait_for(waiting, 1)
        assert (result.base_offset, result.last_offset) == (0, 1)
        assert p.log.high_watermark == 2
        p.log.close()

    run(scenario())


def test_every_appended_batch_carries_the_leader_epoch(tmp_path):
    async def scenario():
        p = open_partition(tmp_path, info(epoch=7), min_isr=1)
        await p.append_as_leader(batch("a"), acks=1)
        data = p.read(0, 1 << 20, replica_id=2).read_bytes()
        assert [h.partition_leader_epoch for h in iter_batches(data)] == [7]
        assert p.log.leader_epoch_cache.entries[-1].epoch == 7
        p.log.close()

    run(scenario())


def test_acks_all_refused_under_min_isr_and_nothing_appended(tmp_path):
    async def scenario():
        p = open_partition(tmp_path, info(isr=(1,)))
        with pytest.raises(NotEnoughReplicasError):
            await p.append_as_leader(batch("a"), acks=-1)
        assert p.log.log_end_offset == 0
        # acks=1 appends, but the HW does not move under min ISR (KIP-966)
        await p.append_as_leader(batch("b"), acks=1)
        assert p.log.log_end_offset == 1 and p.log.high_watermark == 0
        p.log.close()

    run(scenario())


def test_a_duplicate_is_answered_only_once_committed(tmp_path):
    async def scenario():
        p = open_partition(tmp_path, info(isr=(1, 2)))
        first = asyncio.create_task(p.append_as_leader(batch("a", pid=5, seq=0), acks=-1))
        await asyncio.sleep(0.02)
        retry = asyncio.create_task(p.append_as_leader(batch("a", pid=5, seq=0), acks=-1))
        await asyncio.sleep(0.02)
        assert not first.done() and not retry.done()
        assert p.log.log_end_offset == 1  # deduplicated
        p.on_replica_fetch(2, 1, 0, -1)
        a, b = await asyncio.wait_for(asyncio.gather(first, retry), 1)
        assert a.base_offset == b.base_offset == 0 and b.duplicate
        p.log.close()

    run(scenario())


def test_replica_fetch_is_fenced_by_leader_epoch(tmp_path):
    p = open_partition(tmp_path, info(epoch=3))
    with pytest.raises(FencedLeaderEpochError):
        p.on_replica_fetch(2, 0, 2, -1)
    with pytest.raises(UnknownLeaderEpochError):
        p.on_replica_fetch(2, 0, 4, -1)
    with pytest.raises(NotLeaderOrFollowerError):
        p.on_replica_fetch(9, 0, 3, -1)
    p.log.close()


def test_isr_shrink_is_proposed_and_waiting_produces_fail_once_committed(tmp_path):
    async def scenario():
        p = open_partition(tmp_path, info(), lag_ms=0)
        proposals = []
        p.alter_sink = lambda part, request: proposals.append(request)
        waiting = asyncio.create_task(p.append_as_leader(batch("a"), acks=-1, timeout=5))
        await asyncio.sleep(0.01)
        time.sleep(0.002)
        p.maybe_shrink_isr()
        assert [r.isr for r in proposals] == [(1,)]
        assert not waiting.done()  # a shrink counts only once the controller accepts it
        p.on_alter_partition_response(
            proposals[0], AlterPartitionResponse(leader_epoch=0, partition_epoch=1, isr=(1,))
        )
        with pytest.raises(NotEnoughReplicasAfterAppendError):
            await asyncio.wait_for(waiting, 1)
        assert p.isr == (1,)
        # the follower catches up: an expansion is proposed
        p.on_replica_fetch(2, 1, 0, -1)
        assert proposals[-1].isr == (1, 2)
        p.log.close()

    run(scenario())


def test_losing_leadership_fails_waiting_produces_and_follows_the_new_leader(tmp_path):
    async def scenario():
        p = open_partition(tmp_path, info())
        waiting = asyncio.create_task(p.append_as_leader(batch("a", "b"), acks=-1, timeout=5))
        await asyncio.sleep(0.01)
        assert p.apply_metadata(info(leader=2, epoch=1), min_insync_replicas=2) == "follower"
        with pytest.raises(NotLeaderOrFollowerError):
            await asyncio.wait_for(waiting, 1)
        assert not p.is_leader and p.follower is not None and p.follower.leader_id == 2
        # the new leader had only offset 0: the follower cuts its uncommitted tail ...
        await p.truncate_to(0)
        assert p.log.log_end_offset == 0
        # ... and appends the leader's batches as they are (offsets and epochs kept)
        leader_batch = bytearray(batch("x", "y", pid=9, seq=0))
        set_base_offset(leader_batch, 0, 0)
        set_partition_leader_epoch(leader_batch, 0, 1)
        assert await p.append_as_follower(bytes(leader_batch), 0, p.log_generation)
        assert p.log.log_end_offset == 2
        got = decode_batch(p.read(0, 1 << 20, replica_id=1).read_bytes(), 0)
        assert got.header.partition_leader_epoch == 1
        assert [r.value for r in got.records] == [b"x", b"y"]
        assert p.producer_state.last_entry(9) is not None  # a later leader dedupes retries
        with pytest.raises(NotLeaderOrFollowerError):
            await p.append_as_leader(batch("z"), acks=1)
        p.log.close()

    run(scenario())


def test_becoming_leader_assigns_the_epoch_at_the_log_end(tmp_path):
    async def scenario():
        p = open_partition(tmp_path, info(leader=2, epoch=1))
        leader_batch = bytearray(batch("x"))
        set_partition_leader_epoch(leader_batch, 0, 1)
        assert await p.append_as_follower(bytes(leader_batch), 0, p.log_generation)
        assert p.apply_metadata(info(leader=1, epoch=4), min_insync_replicas=2) == "leader"
        assert [tuple(e) for e in p.log.leader_epoch_cache.entries] == [(1, 0), (4, 1)]
        p.log.close()

    run(scenario())


def test_clean_shutdown_means_every_partition_directory_has_its_marker(tmp_path):
    assert logs_shut_down_cleanly(str(tmp_path / "missing"))
    (tmp_path / "a-0").mkdir()
    (tmp_path / "a-0" / ".clean_shutdown").write_bytes(b"")
    (tmp_path / "other").mkdir()
    assert logs_shut_down_cleanly(str(tmp_path))
    (tmp_path / "b-1").mkdir()
    assert not logs_shut_down_cleanly(str(tmp_path))


def test_static_metadata_reads_replication_configs_and_partition_epochs():
    image = parse_metadata(
        {
            "cluster_id": "c",
            "broker_id": 1,
            "brokers": [{"id": 1, "url": "http://a"}],
            "topics": [
                {
                    "name": "t",
                    "partitions": 1,
                    "replicas": [[1, 2]],
                    "partition_epochs": [4],
                    "configs": {"min.insync.replicas": "2", "segment.bytes": "4096"},
                }
            ],
        }
    )
    assert image.min_insync_replicas("t") == 2
    assert image.partition("t", 0).partition_epoch == 4
    assert image.topics["t"].log_config.segment_bytes == 4096


def test_scrubber_finds_the_first_corrupt_batch_and_the_offset_to_refetch_from(tmp_path):
    first, second = bytes(batch("a", "b")), bytearray(batch("c"))
    set_base_offset(second, 0, 2)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(first + bytes(second))
    size = len(first) + len(second)
    assert find_corruption(str(path), 0, size) is None
    second[HEADER_SIZE + 1] ^= 0x01  # a flipped bit under the CRC
    path.write_bytes(first + bytes(second))
    assert find_corruption(str(path), 0, size) == (len(first), 2)
    path.write_bytes(first + bytes(second[:10]))  # a torn batch
    assert find_corruption(str(path), 0, len(first) + 10) == (len(first), 2)


def test_a_disk_failure_is_told_from_other_storage_errors():
    def wrapped(cause: BaseException | None) -> KafkaStorageError:
        try:
            try:
                if cause is not None:
                    raise cause
                raise KafkaStorageError("partition log is closed")
            except OSError as e:
                raise KafkaStorageError(f"cannot append: {e}") from e
        except KafkaStorageError as e:
            return e

    assert is_disk_failure(wrapped(OSError(errno.ENOSPC, "No space left on device")))
    assert is_disk_failure(wrapped(OSError(errno.EFBIG, "File too large")))
    assert not is_disk_failure(wrapped(OSError(errno.ENOENT, "gone")))
    assert not is_disk_failure(wrapped(None))


def test_a_failed_background_fsync_reaches_the_broker_at_once(tmp_path, monkeypatch):
    """A rolled segment's fsync fails in the flusher thread: the partition tells the
    broker's disk-failure handler on its loop, without waiting for another append."""

    async def scenario():
        pinfo = info()
        size = len(batch("a"))
        log = PartitionLog(str(tmp_path / "t-0"), LogConfig(segment_bytes=2 * size), fsync=True)
        p = Partition(pinfo, log, 1, ProducerStateManager(), min_insync_replicas=1)
        told: list[BaseException] = []
        heard = asyncio.Event()

        def on_disk_failure(partition, error):
            told.append(error)
            heard.set()

        p.on_disk_failure = on_disk_failure

        def failing_fsync(fd):
            raise OSError(errno.EIO, "Input/output error")

        await p.append_as_leader(batch("a"), acks=1)
        await p.append_as_leader(batch("b"), acks=1)
        monkeypatch.setattr(os, "fsync", failing_fsync)
        await p.append_as_leader(batch("c"), acks=1)  # rolls; its flush fails in the background
        await asyncio.wait_for(heard.wait(), 5)
        assert is_disk_failure(told[0]) and "offline" in str(told[0])
        monkeypatch.undo()
        log.close()

    run(scenario())


def test_the_high_watermark_survives_a_restart(tmp_path):
    async def scenario():
        p = open_partition(tmp_path, info(), min_isr=1)
        await p.append_as_leader(batch("a", "b", "c"), acks=1)
        p.on_replica_fetch(2, 3, 0, -1)
        p.on_replica_fetch(3, 3, 0, -1)
        assert p.log.high_watermark == 3
        p.checkpoint_high_watermark()
        p.log.close()
        again = open_partition(tmp_path, info(), min_isr=1)
        assert again.log.high_watermark == 3  # consumers read at once, before any fetch
        assert again.read(0, 1 << 20).size > 0
        again.log.close()

    run(scenario())


def _leader_batches(*counts: int, base: int = 0, epoch: int = 0) -> bytes:
    out = bytearray()
    for n in counts:
        b = batch(*(f"v{base + i}" for i in range(n)))
        set_base_offset(b, 0, base)
        set_partition_leader_epoch(b, 0, epoch)
        out += b
        base += n
    return bytes(out)


def test_a_fetch_answer_for_a_log_truncated_meanwhile_is_dropped(tmp_path):
    """The fetch was sent from offset 4; the scrubber cut the log to 2 while it waited: the
    answer (offsets 4..) must not land after the cut, and the waiting fetch is woken."""

    async def scenario():
        p = open_partition(tmp_path, info(leader=2, epoch=0))
        assert await p.append_as_follower(_leader_batches(2, 2), 0, p.log_generation)
        fetched_at, generation = p.log.log_end_offset, p.log_generation
        waiting = asyncio.create_task(p.wait_for_truncation())
        await asyncio.sleep(0)
        await p.truncate_to(2)
        await asyncio.wait_for(waiting, 1)
        assert not await p.append_as_follower(_leader_batches(3, base=4), fetched_at, generation)
        assert p.log.log_end_offset == 2
        # fetched again from the new log end, the same records continue the log
        assert await p.append_as_follower(_leader_batches(2, 3, base=2), 2, p.log_generation)
        assert p.log.log_end_offset == 7
        p.log.close()

    run(scenario())


def test_each_batch_of_a_retried_request_gets_its_own_outcome(tmp_path):
    """[b1] then [b1, b2]: b1 is answered from the producer state with its offsets, b2 is
    appended (the old code answered both as b1's duplicate and b2 was never stored)."""

    async def scenario():
        p = open_partition(tmp_path, info(), min_isr=1)
        first = await p.append_as_leader(batch("a", "b", pid=7, seq=0), acks=1)
        assert (first.base_offset, first.last_offset, first.duplicate) == (0, 1, False)
        assert first.batches is None
        retry = batch("a", "b", pid=7, seq=0) + batch("c", pid=7, seq=2)
        result = await p.append_as_leader(retry, acks=1)
        assert result.batches == [(0, 1, True), (2, 2, False)]
        assert not result.duplicate and result.record_count == 1
        values = [r.value for r in decode_batches(p.read(0, 1 << 20, replica_id=2))]
        assert values == [b"a", b"b", b"c"]
        again = await p.append_as_leader(retry, acks=1)  # both here now: both duplicates
        assert again.duplicate and again.batches == [(0, 1, True), (2, 2, True)]
        two = await p.append_as_leader(batch("d", pid=7, seq=3) + batch("e", pid=7, seq=4))
        assert two.batches == [(3, 3, False), (4, 4, False)]
        p.log.close()

    run(scenario())


def decode_batches(data) -> list:
    raw = data.read_bytes()
    pos, records = 0, []
    while pos < len(raw):
        b = decode_batch(raw, pos)
        records.extend(b.records)
        pos += b.header.batch_length + 12
    return records
