"""Transactional offset commits (KIP-98's TxnOffsetCommit) in the group coordinator.

A TxnOffsetCommit appends its offset records to the group's ``__consumer_offsets``
partition as a *transactional* batch of the producer (its id and epoch, the next sequence of
that producer on the partition), and holds them as pending for that producer id: OffsetFetch
does not show them. When the transaction coordinator writes the producer's marker to the
partition (``write_txn_marker``, under the shard's lock), a commit marker materialises them
into the committed offsets and an abort drops them. A coordinator loading a partition reads
it the same way (``read_records_txn``): a producer's transactional records count at its commit
marker's position, are dropped at an abort marker, and are pending when no marker follows.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from typing import TYPE_CHECKING

from brokernodes.groups import OffsetAndMetadata, TopicPartition, load_records, validate_commit
from brokernodes.groups.classic import ClassicGroup
from brokernodes.groups.records import encode_offset_commit
from brokernodes.groups.types import OffsetKey
from brokernodes.records.batch import Record, decode_batches, encode_batch
from brokernodes.server.coordinator.offsets_topic import READ_CHUNK

if TYPE_CHECKING:
    from collections.abc import Mapping

    from brokernodes.server.replica.partition import Partition

LOAD_WAIT_S = 10.0
_CONTROL_KEY = struct.Struct(">hh")  # version, type (0 abort, 1 commit)
KV = tuple[bytes, bytes | None]


def marker_commits(key: bytes | None) -> bool:
    """Whether a control record's key is a COMMIT marker (else ABORT)."""
    if key is None or len(key) < _CONTROL_KEY.size:
        return False
    return _CONTROL_KEY.unpack_from(key)[1] == 1


def read_records_txn(partition: Partition) -> tuple[list[KV], dict[int, list[KV]]]:
    """(records in effect in log order, pending transactional records by producer id) of a
    hosted ``__consumer_offsets`` partition. Blocking: call in a worker thread."""
    log = partition.log
    out: list[KV] = []
    pending: dict[int, list[KV]] = {}
    offset = log.log_start_offset
    end = log.log_end_offset
    while offset < end:
        raw = log.read(offset, READ_CHUNK).read_bytes()
        if not raw:
            break
        for batch in decode_batches(raw, verify_crc=False):
            h = batch.header
            records = [r for r in batch.records if r.offset >= offset]
            if h.is_control:
                held = pending.pop(h.producer_id, [])
                if records and marker_commits(records[0].key):
                    out.extend(held)
            elif h.is_transactional:
                pending.setdefault(h.producer_id, []).extend(
                    (r.key, r.value) for r in records if r.key is not None
                )
            else:
                out.extend((r.key, r.value) for r in records if r.key is not None)
            offset = max(offset, h.next_offset)
    return out, pending


def pending_offsets(records: list[KV], now_ms: int) -> dict[OffsetKey, OffsetAndMetadata]:
    return dict(load_records(records, now_ms).offsets)


def next_sequence(partition: Partition, producer_id: int, producer_epoch: int) -> int:
    entry = partition.producer_state.last_entry(producer_id)
    if entry is None or entry.producer_epoch != producer_epoch or entry.last_seq < 0:
        return 0
    return (entry.last_seq + 1) & 0x7FFFFFFF


class TxnOffsetRequests:
    """The GroupCoordinator's transactional-offset requests (a mixin: it uses the
    coordinator's shards, locks and partitions)."""

    async def txn_commit(
        self,
        qualified: str,
        producer_id: int,
        producer_epoch: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        *,
        member_id: str | None = None,
        generation_id: int = -1,
        instance_id: str | None = None,
    ) -> None:
        """TxnOffsetCommit: validate as a commit of the group (a classic member's generation
        when given), append the records transactionally, hold them pending."""
        from brokernodes.server.coordinator.group_coordinator import CoordinatorNotAvailableError

        shard = await self.shard_for(qualified)
        async with shard.lock:
            group = shard.groups.get(qualified)
            if isinstance(group, ClassicGroup) and generation_id >= 0:
                group.validate_offset_commit(member_id, generation_id, instance_id)
            validate_commit(None, None, -1, offsets)  # offsets >= 0
            p = self._partition(self.metadata.global_image(), shard.partition)
            if p is None or not p.is_leader:
                raise CoordinatorNotAvailableError(
                    "this broker stopped leading the group's __consumer_offsets partition"
                )
            keyed = {OffsetKey(qualified, tp[0], tp[1]): om for tp, om in offsets.items()}
            ts = int(time.time() * 1000)
            batch = [Record(ts, *encode_offset_commit(k, om)) for k, om in sorted(keyed.items())]
            buf = bytearray(
                encode_batch(
                    batch,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    base_sequence=next_sequence(p, producer_id, producer_epoch),
                    is_transactional=True,
                )
            )
            await asyncio.wait_for(p.append_as_leader(buf, acks=-1), 30)
            shard.pending_txn.setdefault(producer_id, {}).update(keyed)

    async def write_txn_marker(
        self,
        number: int,
        partition: Partition,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
    ) -> int:
        """Write a producer's marker to ``__consumer_offsets-<number>`` and apply it to the
        pending offsets, under the shard's lock (no commit interleaves). A shard still loading
        is waited for; without one (leadership just moved) only the marker is written and the
        next loader applies it from the log."""
        shard = self.shards.get(number)
        if shard is not None and not shard.loaded.is_set():
            # loading: wait, so a marker appended after the loader read its end is applied
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(shard.loaded.wait(), LOAD_WAIT_S)
        if shard is None or not shard.loaded.is_set() or shard.failed:
            return await partition.write_txn_marker(
                producer_id, producer_epoch, commit, coordinator_epoch
            )
        async with shard.lock:
            offset = await partition.write_txn_marker(
                producer_id, producer_epoch, commit, coordinator_epoch
            )
            held = shard.pending_txn.pop(producer_id, {})
            if commit:
                shard.offsets.offsets.update(held)
                for gid in {k.group for k in held}:
                    for callback in self.on_change:
                        callback(gid)
            return offset
