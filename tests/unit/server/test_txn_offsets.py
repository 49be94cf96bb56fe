"""Transactional offsets in ``__consumer_offsets`` on a real partition log: what a loading
group coordinator makes of a producer's transactional offset records followed by a commit
marker, an abort marker, or no marker yet (``read_records_txn``), and the sequence numbers
TxnOffsetCommit batches take (``next_sequence``)."""

from __future__ import annotations

import asyncio
import time

from brokernodes.groups import OffsetAndMetadata, load_records
from brokernodes.groups.records import encode_offset_commit
from brokernodes.groups.types import OffsetKey
from brokernodes.records.batch import Record, encode_batch
from brokernodes.server.coordinator.txn_offsets import (
    marker_commits,
    next_sequence,
    pending_offsets,
    read_records_txn,
)
from brokernodes.server.metadata.cluster import PartitionInfo
from brokernodes.server.replica.partition import Partition


def open_partition(path) -> Partition:
    info = PartitionInfo("__consumer_offsets", 0, 1, 0, (1,), (1,), "", 0)
    log, state = Partition.open_log(str(path), info, None, fsync=False)
    return Partition(info, log, 1, state, min_insync_replicas=1)


def offset(group: str, topic: str, p: int, value: int) -> tuple[bytes, bytes]:
    return encode_offset_commit(OffsetKey(group, topic, p), OffsetAndMetadata(value, None, "", 1))


def batch(records, *, pid: int = -1, epoch: int = -1, seq: int = -1) -> bytearray:
    now = int(time.time() * 1000)
    return bytearray(
        encode_batch(
            [Record(now, k, v) for k, v in records],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            is_transactional=pid >= 0,
        )
    )


def committed(records) -> dict[tuple[str, str, int], int]:
    offsets = load_records(records, 0).offsets
    return {(k.group, k.topic, k.partition): v.offset for k, v in offsets.items()}


def test_commit_markers_apply_abort_markers_drop_and_unmarked_stay_pending(tmp_path):
    async def scenario():
        p = open_partition(tmp_path)
        await p.append_as_leader(batch([offset("g", "t", 0, 5)]))  # a plain commit
        # producer 7 commits its offsets, producer 8 aborts, producer 9 has no marker yet
        seq = next_sequence(p, 7, 0)
        await p.append_as_leader(batch([offset("g", "t", 0, 10)], pid=7, epoch=0, seq=seq))
        await p.append_as_leader(batch([offset("g", "t", 1, 99)], pid=8, epoch=0, seq=0))
        await p.append_as_leader(batch([offset("h", "t", 0, 3)], pid=9, epoch=0, seq=0))
        await p.write_txn_marker(8, 0, False, 0)
        await p.append_as_leader(batch([offset("g", "t", 2, 1)]))  # plain, before 7's marker
        await p.write_txn_marker(7, 0, True, 0)
        records, pending = await asyncio.to_thread(read_records_txn, p)
        assert committed(records) == {("g", "t", 0): 10, ("g", "t", 2): 1}
        assert set(pending) == {9}
        assert {k: v.offset for k, v in pending_offsets(pending[9], 0).items()} == {
            OffsetKey("h", "t", 0): 3
        }
        # the next transactional batch of producer 7 at this epoch continues its sequence
        assert next_sequence(p, 7, 0) == 1 and next_sequence(p, 7, 1) == 0
        assert next_sequence(p, 42, 0) == 0

    asyncio.run(scenario())


def test_marker_keys():
    assert marker_commits(b"\x00\x00\x00\x01") and not marker_commits(b"\x00\x00\x00\x00")
    assert not marker_commits(None) and not marker_commits(b"\x00")
