"""A leader's append honours message.timestamp.type=LogAppendTime and compression.type, on a
real log in a temp dir: the stored bytes, the answer, duplicates, followers, the time index."""

from __future__ import annotations

import asyncio
import time

import pytest

from brokernodes.errors import InvalidTimestampError, MessageTooLargeError
from brokernodes.records.batch import Record, decode_batch, encode_batch
from brokernodes.records.compression import Compression
from brokernodes.records.header import iter_batches
from brokernodes.server.metadata.cluster import PartitionInfo
from brokernodes.server.replica.partition import Partition
from brokernodes.server.replica.produce_rewrite import rewrite_batches
from brokernodes.storage.config import LogConfig

# KIP-937 bounds that a CreateTime topic would apply to OLD; a LogAppendTime topic does not
LAT = LogConfig(message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=60_000)
OLD = 1_000_000_000_000  # 2001


def info(leader: int = 1) -> PartitionInfo:
    return PartitionInfo("t", 0, leader, 0, (1, 2), (1, 2), "", 0)


def batch(*values: str, ts: int | None = None, codec: int = 0, pid: int = -1, seq: int = -1):
    stamp = int(time.time() * 1000) if ts is None else ts
    return bytearray(
        encode_batch(
            [Record(stamp + i, f"k{i}".encode(), v.encode() * 50) for i, v in enumerate(values)],
            compression=codec,
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=seq,
        )
    )


def open_partition(tmp_path, config: LogConfig, leader: int = 1, name: str = "t-0") -> Partition:
    log, state = Partition.open_log(str(tmp_path / name), info(leader), config, fsync=False)
    return Partition(info(leader), log, 1, state, min_insync_replicas=1)


def stored(p: Partition) -> bytes:
    return p.read(0, 1 << 24, replica_id=2).read_bytes()


def test_log_append_time_stamps_the_batch_and_answers_the_time(tmp_path):
    async def scenario():
        p = open_partition(tmp_path, LAT)
        before = int(time.time() * 1000)
        # a producer clock far in the past: CreateTime's KIP-937 bounds do not apply
        result = await p.append_as_leader(batch("a", "b", ts=OLD), acks=1)
        after = int(time.time() * 1000)
        assert before <= result.log_append_time <= after
        (h,) = list(iter_batches(stored(p)))  # CRCs verified
        assert h.timestamp_type == 1 and h.max_timestamp == result.log_append_time
        records = decode_batch(stored(p)).records
        assert [r.timestamp for r in records] == [result.log_append_time] * 2
        found = p.log.offset_for_timestamp(result.log_append_time)
        assert found is not None and found.offset == 0  # the time index has the append time
        assert p.log.offset_for_timestamp(result.log_append_time + 1) is None
        p.log.close()

    asyncio.run(scenario())


def test_create_time_keeps_its_kip_937_bounds(tmp_path):
    async def scenario():
        p = open_partition(tmp_path, LAT.with_changes(message_timestamp_type="CreateTime"))
        with pytest.raises(InvalidTimestampError):
            await p.append_as_leader(batch("a", ts=OLD), acks=1)
        p.log.close()

    asyncio.run(scenario())


def test_create_time_answers_minus_one_and_stores_the_bytes_as_sent(tmp_path):
    async def scenario():
        p = open_partition(tmp_path, LogConfig())
        sent = batch("a", codec=Compression.GZIP)
        expected = bytes(sent)
        result = await p.append_as_leader(sent, acks=1)
        assert result.log_append_time == -1
        got = stored(p)
        # only the base offset and leader epoch (outside the CRC) may differ
        assert got[17:] == expected[17:]
        p.log.close()

    asyncio.run(scenario())


def test_an_idempotent_duplicate_answers_the_original_append_time(tmp_path):
    async def scenario():
        p = open_partition(tmp_path, LAT)
        first = await p.append_as_leader(batch("a", pid=9, seq=0), acks=1)
        await asyncio.sleep(0.01)
        again = await p.append_as_leader(batch("a", pid=9, seq=0), acks=1)
        assert again.duplicate
        assert again.log_append_time == first.log_append_time
        assert (again.base_offset, again.last_offset) == (first.base_offset, first.last_offset)
        p.log.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_compression_type_recompresses_what_the_producer_sent(tmp_path, target):
    async def scenario():
        config = LogConfig(compression_type=target)
        p = open_partition(tmp_path, config)
        sent = [batch("x", "y", "z", pid=4, seq=0), batch("w", codec=Compression.LZ4)]
        values = [r.value for b in sent for r in decode_batch(b).records]
        result = await p.append_as_leader(bytearray(b"".join(sent)), acks=1)
        assert (result.base_offset, result.last_offset) == (0, 3)
        headers = list(iter_batches(stored(p)))
        assert [h.compression for h in headers] == [config.compression_codec] * 2
        assert (headers[0].producer_id, headers[0].base_sequence) == (4, 0)
        data = stored(p)
        decoded = [r for h in headers for r in decode_batch(data, h.position).records]
        assert [r.value for r in decoded] == values
        assert [r.offset for r in decoded] == [0, 1, 2, 3]
        p.log.close()

    asyncio.run(scenario())


def test_recompressed_log_append_time_batch_and_the_follower_copy(tmp_path):
    async def scenario():
        config = LogConfig(message_timestamp_type="LogAppendTime", compression_type="zstd")
        leader = open_partition(tmp_path, config)
        result = await leader.append_as_leader(batch("a", "b"), acks=1)
        data = stored(leader)
        (h,) = list(iter_batches(data))
        assert h.compression == Compression.ZSTD and h.timestamp_type == 1
        assert h.max_timestamp == result.log_append_time
        # a follower (any config) keeps the leader's bytes unchanged
        follower = open_partition(tmp_path, LogConfig(), leader=2, name="f-0")
        assert await follower.append_as_follower(bytearray(data), 0, follower.log_generation)
        assert stored(follower) == data
        leader.log.close()
        follower.log.close()

    asyncio.run(scenario())


def test_a_batch_too_large_once_decompressed_is_refused_and_nothing_stored(tmp_path):
    async def scenario():
        config = LogConfig(compression_type="uncompressed", max_message_bytes=2000)
        p = open_partition(tmp_path, config)
        big = batch(*["same value "] * 30, codec=Compression.ZSTD)  # 16 KB inflated
        assert len(big) < 2000
        with pytest.raises(MessageTooLargeError, match=r"compression\.type=uncompressed"):
            await p.append_as_leader(big, acks=1)
        assert p.log.log_end_offset == 0
        p.log.close()

    asyncio.run(scenario())


def test_rewrite_batches_is_pure_and_keeps_a_batch_already_in_the_codec():
    sent = batch("a", codec=Compression.ZSTD)
    headers = list(iter_batches(sent))
    out = rewrite_batches(sent, headers, LogConfig(compression_type="zstd"), 1 << 20, 5)
    assert bytes(out.buf) == bytes(sent) and out.log_append_time == -1
