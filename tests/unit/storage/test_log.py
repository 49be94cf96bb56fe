"""PartitionLog: append (leader/follower), read, timestamps, roll, flush, shutdown marker,
truncation, leader epochs."""

from __future__ import annotations

import os
import struct
import threading

import pytest

from brokernodes.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaStorageError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
)
from brokernodes.records import batch as records_batch
from brokernodes.records.compression import Compression
from brokernodes.records.header import read_header
from brokernodes.server.replica.partition import is_disk_failure
from brokernodes.storage.config import LogConfig
from brokernodes.storage.log import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_CHECKPOINT,
    TAIL_CACHE_BYTES,
    PartitionLog,
)
from tests.unit.storage.batches import make_batch, split_batches


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_log(path, clock=None, **config):
    cfg = LogConfig(**config)
    return PartitionLog(path, cfg, clock=clock or Clock(), fsync=False, checkpoint_interval_ms=0)


@pytest.fixture
def log(tmp_path):
    log = open_log(tmp_path / "topic-0")
    yield log
    log.close()


def log_files_size(log):
    return sum(s.size for s in log.segments)


# --- append as leader ----------------------------------------------------------------------


def test_leader_append_assigns_offsets_and_epoch(log):
    info = log.append(make_batch(3, base_offset=777) + make_batch(2), leader_epoch=5)
    assert (info.first_offset, info.last_offset, info.batch_count, info.record_count) == (
        0,
        4,
        2,
        5,
    )
    assert log.log_end_offset == 5
    data = log.read(0, 1 << 20).read_bytes()
    first, second = split_batches(data)
    assert read_header(first).base_offset == 0
    assert read_header(second).base_offset == 3
    assert read_header(first).partition_leader_epoch == 5
    info = log.append(make_batch(1))
    assert info.first_offset == info.last_offset == 5
    assert log.leader_epoch_cache.entries == [(5, 0)]
    log.append(make_batch(1), leader_epoch=6)
    assert log.leader_epoch_cache.entries == [(5, 0), (6, 6)]


def test_append_reports_max_timestamp(log):
    info = log.append(
        make_batch(2, timestamps=[10, 50]) + make_batch(2, timestamps=[20, 30]), leader_epoch=0
    )
    assert info.max_timestamp == 50
    assert info.offset_of_max_timestamp == 1


def test_append_modifies_bytearray_in_place_and_copies_bytes(log):
    raw = make_batch(1, base_offset=99)
    buf = bytearray(raw)
    log.append(make_batch(1))
    log.append(buf)
    assert read_header(buf).base_offset == 1
    log.append(raw)
    assert read_header(raw).base_offset == 99


# --- bad input ------------------------------------------------------------------------------


def corrupt_crc(b: bytes) -> bytes:
    buf = bytearray(b)
    buf[-1] ^= 0xFF
    return bytes(buf)


def bad_magic(b: bytes) -> bytes:
    buf = bytearray(b)
    buf[16] = 1
    return bytes(buf)


def bad_length(b: bytes) -> bytes:
    buf = bytearray(b)
    struct.pack_into(">i", buf, 8, len(b) + 100)
    return bytes(buf)


@pytest.mark.parametrize(
    ("mutate", "error", "words"),
    [
        (corrupt_crc, CorruptRecordError, "CRC"),
        (bad_magic, CorruptRecordError, "magic"),
        (bad_length, CorruptRecordError, "truncated"),
        # cut short: the last batch of a request is torn; an earlier one swallows the next
        # batch's bytes and fails its CRC (or length) check instead
        (lambda b: b[:-3], CorruptRecordError, ("truncated", "CRC")),
        (lambda b: b[:20], CorruptRecordError, ("truncated", "CRC", "magic")),
    ],
)
@pytest.mark.parametrize("position", [0, 1])
def test_bad_batch_refuses_whole_request(tmp_path, mutate, error, words, position):
    log = open_log(tmp_path / "t-0")
    log.append(make_batch(2))
    size_before = log_files_size(log)
    good = make_batch(3)
    batches = [good, good]
    batches[position] = mutate(good)
    with pytest.raises(error) as exc:
        log.append(b"".join(batches))
    words = (words,) if isinstance(words, str) else words
    assert any(w in str(exc.value) for w in words), str(exc.value)
    assert f"batch {position} of the request" in str(exc.value)
    assert "nothing was appended" in str(exc.value)
    assert log.log_end_offset == 2
    assert log_files_size(log) == size_before
    assert os.path.getsize(log.segments.last.log_path) == size_before
    log.close()


def test_over_max_message_bytes_refused(tmp_path):
    log = open_log(tmp_path / "t-0", max_message_bytes=200)
    with pytest.raises(MessageTooLargeError, match=r"max\.message\.bytes=200"):
        log.append(make_batch(1) + make_batch([b"x" * 300]))
    assert log.log_end_offset == 0
    assert log_files_size(log) == 0
    log.close()


def test_empty_request_and_bad_counts_refused(log):
    with pytest.raises(InvalidRecordError):
        log.append(b"")
    with pytest.raises(InvalidRecordError, match="last offset delta"):
        log.append(make_batch(2, last_offset_delta=5))
    assert log.log_end_offset == 0


# --- append as follower ---------------------------------------------------------------------


def test_follower_keeps_offsets_and_epochs(log):
    log.append(make_batch(2, base_offset=0, epoch=1), assign_offsets=False)
    log.append(make_batch(2, base_offset=2, epoch=3), assign_offsets=False)
    assert log.log_end_offset == 4
    assert log.leader_epoch_cache.entries == [(1, 0), (3, 2)]
    heads = [read_header(b) for b in split_batches(log.read(0, 1 << 20).read_bytes())]
    assert [(h.base_offset, h.partition_leader_epoch) for h in heads] == [(0, 1), (2, 3)]


def test_follower_rejects_offsets_going_backwards(log):
    log.append(make_batch(2, base_offset=0), assign_offsets=False)
    with pytest.raises(InvalidRecordError, match="log end offset 2"):
        log.append(make_batch(1, base_offset=1), assign_offsets=False)
    with pytest.raises(InvalidRecordError, match="previous batch"):
        log.append(
            make_batch(2, base_offset=2) + make_batch(1, base_offset=3), assign_offsets=False
        )
    assert log.log_end_offset == 2


def test_follower_refuses_a_gap_at_the_log_end_and_between_batches(log):
    """A replica never claims offsets it does not hold: a batch past the log end (the gap
    a truncation under an in-flight fetch left) is refused whole, for every caller."""
    log.append(make_batch(2, base_offset=0), assign_offsets=False)
    with pytest.raises(InvalidRecordError, match=r"past the log end offset 2.*without a gap"):
        log.append(make_batch(1, base_offset=907), assign_offsets=False)
    with pytest.raises(InvalidRecordError, match="past the previous batch's end 3"):
        log.append(
            make_batch(1, base_offset=2) + make_batch(1, base_offset=5), assign_offsets=False
        )
    assert log.log_end_offset == 2
    assert [
        read_header(b).base_offset for b in split_batches(log.read(0, 1 << 20).read_bytes())
    ] == [0]


def test_follower_append_refuses_batches_fetched_for_another_log_end(log):
    log.append(make_batch(1, base_offset=0) + make_batch(2, base_offset=1), assign_offsets=False)
    log.truncate_to(1)
    with pytest.raises(InvalidRecordError, match=r"fetched for offset 3 .* ends at 1"):
        log.append(make_batch(1, base_offset=3), assign_offsets=False, expected_offset=3)
    assert log.log_end_offset == 1
    log.append(make_batch(2, base_offset=1), assign_offsets=False, expected_offset=1)
    assert log.log_end_offset == 3


def test_compacted_follower_keeps_the_leaders_gaps_and_rolls_past_relative_offsets(tmp_path):
    """The leader's cleaner removed records, so a compacted replica's batches may skip
    offsets (Kafka's rule); never below the log end."""
    log = open_log(tmp_path / "compacted-0", cleanup_policy="compact")
    log.append(make_batch(1, base_offset=0), assign_offsets=False)
    log.append(make_batch(1, base_offset=5), assign_offsets=False)
    log.append(make_batch(1, base_offset=2**31 + 10), assign_offsets=False)
    assert log.segments.base_offsets == [0, 2**31 + 10]
    assert log.read(2**31 + 10, 1000).first_batch_base_offset == 2**31 + 10
    with pytest.raises(InvalidRecordError, match="below the log end"):
        log.append(make_batch(1, base_offset=6), assign_offsets=False)
    log.close()


# --- read -----------------------------------------------------------------------------------


def fill(log, n, records=2, **kw):
    for i in range(n):
        log.append(make_batch(records, timestamp=1_000 + 10 * i, **kw), leader_epoch=0)


def test_read_starts_at_batch_holding_offset(log):
    fill(log, 5)  # batches [0,1] [2,3] ...
    data = log.read(5, 1 << 20)
    assert data.first_batch_base_offset == 4
    assert [read_header(b).base_offset for b in split_batches(data.read_bytes())] == [4, 6, 8]


def test_read_returns_whole_batches_within_max_bytes(log):
    fill(log, 5)
    size = len(make_batch(2))
    data = log.read(0, 2 * size + size // 2)
    assert data.size == 2 * size
    assert len(split_batches(data.read_bytes())) == 2


def test_read_returns_one_batch_even_if_larger_than_max_bytes(log):
    fill(log, 3)
    data = log.read(2, 1)
    assert data.size == len(make_batch(2))
    assert log.read(2, 1, min_one_batch=False).slices == []


def test_read_never_past_max_offset(log):
    fill(log, 5)
    data = log.read(0, 1 << 20, max_offset=6)
    assert [read_header(b).last_offset for b in split_batches(data.read_bytes())] == [1, 3, 5]
    # a batch straddling max_offset is not returned
    assert log.read(0, 1 << 20, max_offset=5).size == 2 * len(make_batch(2))
    assert log.read(6, 1 << 20, max_offset=6).slices == []


def test_read_out_of_range(log):
    fill(log, 2)
    assert log.read(4, 100).slices == []
    with pytest.raises(OffsetOutOfRangeError, match=r"\[0, 4\)"):
        log.read(5, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_read_tail_serves_the_last_small_append_from_memory(tmp_path):
    log = open_log(tmp_path / "topic-0")
    log.append(make_batch(2))
    small = log.append(make_batch([b"x" * 10] * 3))
    on_disk = log.read(small.first_offset, 1 << 20).read_bytes()
    assert log.read_tail(small.first_offset, 1 << 20) == on_disk
    # not the batches before it, not past the high watermark, not over max_bytes
    assert log.read_tail(0, 1 << 20) is None
    assert log.read_tail(small.first_offset, 1 << 20, max_offset=small.last_offset) is None
    assert log.read_tail(small.first_offset, len(on_disk) - 1) is None
    # an append too large to copy is not kept, and clears the old copy
    big = log.append(make_batch([b"x" * TAIL_CACHE_BYTES]))
    assert log.read_tail(big.first_offset, 1 << 30) is None
    assert log.read_tail(small.first_offset, 1 << 30) is None
    # a truncation below the copy's end invalidates it; so does closing
    again = log.append(make_batch(2))
    assert log.read_tail(again.first_offset, 1 << 20) is not None
    log.truncate_to(again.first_offset + 1)
    assert log.read_tail(again.first_offset, 1 << 20) is None
    last = log.append(make_batch(1))
    log.close()
    assert log.read_tail(last.first_offset, 1 << 20) is None


def test_read_spans_segments(tmp_path):
    size = len(make_batch(2))
    log = open_log(tmp_path / "t-0", segment_bytes=2 * size)
    fill(log, 5)
    assert len(log.segments) == 3
    data = log.read(1, 1 << 20)
    assert len(data.slices) == 3
    assert [read_header(b).base_offset for b in split_batches(data.read_bytes())] == [
        0,
        2,
        4,
        6,
        8,
    ]
    data = log.read(3, 3 * size)
    assert [read_header(b).base_offset for b in split_batches(data.read_bytes())] == [2, 4, 6]
    log.close()


def test_read_uses_sparse_index(tmp_path):
    log = open_log(tmp_path / "t-0", index_interval_bytes=100)
    fill(log, 50)
    assert len(log.segments.last.offset_index) > 10
    for offset in range(100):
        data = log.read(offset, 1)
        assert read_header(data.read_bytes()).base_offset == offset - offset % 2
    log.close()


# --- timestamps -----------------------------------------------------------------------------


def test_offset_for_timestamp(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=400, index_interval_bytes=50)
    fill(log, 20)  # batch i: offsets 2i, 2i+1, timestamps 1000+10i, +1
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(0).offset == 0
    for i in range(20):
        r = log.offset_for_timestamp(1_000 + 10 * i)
        assert (r.offset, r.timestamp) == (2 * i, 1_001 + 10 * i)
        assert log.offset_for_timestamp(1_000 + 10 * i + 1).offset == 2 * i
        after = log.offset_for_timestamp(1_000 + 10 * i + 5)
        assert (after.offset if after else None) == (2 * i + 2 if i < 19 else None)
    assert log.offset_for_timestamp(5_000) is None
    assert log.offset_for_timestamp(-2).offset == 0
    assert log.offset_for_timestamp(-1).offset == 40
    assert log.offset_for_timestamp(-1, max_offset=7).offset == 7
    assert log.offset_for_timestamp(-3).offset == 38
    assert log.offset_for_timestamp(1_100, max_offset=10) is None
    log.close()


def test_offset_for_timestamp_with_out_of_order_timestamps(log):
    for ts in [100, 300, 200, 400]:
        log.append(make_batch(1, timestamp=ts))
    assert log.offset_for_timestamp(150).offset == 1
    assert log.offset_for_timestamp(250).offset == 1
    assert log.offset_for_timestamp(350).offset == 3


# --- high watermark -------------------------------------------------------------------------


def test_high_watermark_clamped(log):
    fill(log, 2)
    assert log.update_high_watermark(100) == 4
    assert log.update_high_watermark(-5) == 0
    log.update_high_watermark(3)
    assert log.high_watermark == 3


# --- roll -----------------------------------------------------------------------------------


def test_roll_by_size_puts_overflowing_batch_in_new_segment(tmp_path):
    size = len(make_batch(2))
    log = open_log(tmp_path / "t-0", segment_bytes=int(2.5 * size))
    fill(log, 2)
    assert len(log.segments) == 1
    fill(log, 1)
    assert log.segments.base_offsets == [0, 4]
    # one request spanning several segments is split at batch boundaries
    log.append(b"".join(make_batch(2) for _ in range(5)))
    assert log.segments.base_offsets == [0, 4, 8, 12]
    assert all(s.size <= 2.5 * size for s in log.segments)
    assert log.read(0, 1 << 30).size == 8 * size
    log.close()


def test_batch_larger_than_segment_gets_own_segment(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=100)
    log.append(make_batch([b"x" * 200]))
    log.append(make_batch([b"y" * 200]))
    assert log.segments.base_offsets == [0, 1]
    log.close()


def test_roll_by_time_uses_first_batch_timestamp(tmp_path):
    log = open_log(tmp_path / "t-0", segment_ms=1_000)
    log.append(make_batch(1, timestamp=10_000))
    log.append(make_batch(1, timestamp=10_900))
    assert len(log.segments) == 1
    log.append(make_batch(1, timestamp=11_001))
    assert log.segments.base_offsets == [0, 2]
    log.close()


def test_roll_by_time_uses_creation_time_without_timestamps(tmp_path):
    clock = Clock(5_000)
    log = open_log(tmp_path / "t-0", clock=clock, segment_ms=1_000)
    log.append(make_batch(1, timestamps=[-1]))
    clock.now += 999
    log.append(make_batch(1, timestamps=[-1]))
    assert len(log.segments) == 1
    clock.now += 2
    log.append(make_batch(1, timestamps=[-1]))
    assert log.segments.base_offsets == [0, 2]
    log.close()


def test_roll_when_index_full(tmp_path):
    log = open_log(tmp_path / "t-0", index_interval_bytes=1, segment_index_bytes=36)
    fill(log, 12)
    # time index (12-byte entries) holds 3 entries: it fills before the offset index
    assert len(log.segments) > 2
    for seg in log.segments:
        assert len(seg.time_index) <= 3 + 1  # + the entry added when it became inactive
    assert log.read(0, 1 << 20).size == 12 * len(make_batch(2))
    log.close()


def test_explicit_roll(log):
    assert log.roll() is log.segments.last  # empty active: no-op
    fill(log, 1)
    log.roll()
    assert log.segments.base_offsets == [0, 2]


# --- flush, recovery point, clean shutdown --------------------------------------------------


def test_flush_messages_advances_recovery_point(tmp_path):
    log = open_log(tmp_path / "t-0", flush_messages=5)
    fill(log, 2)
    assert log.recovery_point == 0
    fill(log, 1)
    assert log.recovery_point == 6
    log.close()


def test_flush_ms(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock=clock, flush_ms=1_000)
    fill(log, 1)
    assert log.recovery_point == 0
    assert not log.maybe_flush()
    clock.now += 1_000
    assert log.maybe_flush()
    assert log.recovery_point == 2
    clock.now += 1_000
    fill(log, 1)  # the append path checks flush.ms too
    assert log.recovery_point == 4
    log.close()


def test_recovery_point_checkpoint_and_roll_flush(tmp_path):
    size = len(make_batch(2))
    log = open_log(tmp_path / "t-0", segment_bytes=2 * size)
    fill(log, 3)
    log.wait_for_rolled_flush(10)
    assert log.recovery_point == 4  # the rolled segment was flushed (by a flusher thread)
    log.flush()
    assert log.recovery_point == 6
    with open(tmp_path / "t-0" / RECOVERY_POINT_CHECKPOINT) as f:
        assert f.read() == "0\n1\nt 0 6\n"
    log.close()


class _HeldFsync:
    """``os.fsync`` that blocks (up to 10 s) until released, and says when it started."""

    def __init__(self, real) -> None:
        self.real = real
        self.started = threading.Event()
        self.release = threading.Event()
        self.fds: list[int] = []

    def __call__(self, fd: int) -> None:
        self.fds.append(fd)
        self.started.set()
        self.release.wait(10)
        self.real(fd)


def _roll_and_hold(held, roll, *args):
    """Call ``roll(*args)`` (which rolls the log): it returns without waiting for the fsync
    of the rolled segment, which a flusher thread starts (and ``held`` holds)."""
    roll(*args)
    assert held.started.wait(10), "the rolled segment was not fsynced"


def test_a_rolled_segment_is_fsynced_in_the_background(tmp_path, monkeypatch):
    """The append that rolled the log returns at once, and appends, reads and timestamp
    lookups go on while a flusher thread fsyncs the old segment (up to a segment of dirty
    pages); the recovery point passes the rolled segment once that fsync is done."""
    size = len(make_batch(2))
    log = PartitionLog(
        tmp_path / "t-0", LogConfig(segment_bytes=2 * size), clock=Clock(), fsync=True
    )
    fill(log, 2)  # one full segment
    held = _HeldFsync(os.fsync)
    monkeypatch.setattr(os, "fsync", held)
    _roll_and_hold(held, log.append, make_batch(2))
    done = []
    worker = threading.Thread(
        target=lambda: done.append(
            (
                log.append(make_batch(1)).first_offset,
                log.read(0, 1 << 20).size,
                log.offset_for_timestamp(-1),
            )
        )
    )
    worker.start()
    worker.join(5)
    assert done and done[0][0] == 6, "the log waited for the rolled segment's fsync"
    assert log.recovery_point == 0  # not yet: the fsync is not done
    held.release.set()
    log.wait_for_rolled_flush(10)
    assert log.recovery_point == 4  # the rolled segment's end
    assert len(held.fds) == 3  # the log file and its two indexes
    log.close()


@pytest.mark.parametrize("flush", ["flush.messages", "explicit"])
def test_a_flush_fsyncs_without_holding_the_log(tmp_path, monkeypatch, flush):
    """An append under flush.messages=1 (and an explicit flush) returns once its data is
    on disk, but the fsync runs without the log's lock: reads and timestamp lookups (on the
    broker's event loop) do not wait for it; the recovery point passes the data after it."""
    messages = 1 if flush == "flush.messages" else LogConfig().flush_messages
    log = PartitionLog(
        tmp_path / "t-0", LogConfig(flush_messages=messages), clock=Clock(), fsync=True
    )
    fill(log, 2)
    if flush == "explicit":
        log.flush()
    assert log.recovery_point == 4
    held = _HeldFsync(os.fsync)
    monkeypatch.setattr(os, "fsync", held)
    if flush == "explicit":
        log.append(make_batch(2))
        worker = threading.Thread(target=log.flush)
    else:
        worker = threading.Thread(target=log.append, args=(make_batch(2),))
    worker.start()
    assert held.started.wait(10), "nothing was fsynced"
    done = []
    reader = threading.Thread(
        target=lambda: done.append((log.read(0, 1 << 20).size, log.offset_for_timestamp(-1)))
    )
    reader.start()
    reader.join(5)
    assert done, "a read waited for the fsync"
    assert worker.is_alive()  # the append or flush waits for its fsync
    assert log.recovery_point == 4
    held.release.set()
    worker.join(10)
    assert not worker.is_alive()
    assert log.recovery_point == 6
    log.close()


@pytest.mark.parametrize("flush", ["rolled", "flush.messages"])
def test_a_failed_fsync_takes_the_log_offline(tmp_path, monkeypatch, flush):
    """Kafka takes the log directory offline when a flush fails (and after a failed fsync a
    retry may succeed without writing the lost pages): the log refuses every call after it
    with KafkaStorageError, and the recovery point stays before the data."""
    size = len(make_batch(2))
    config = LogConfig(segment_bytes=2 * size) if flush == "rolled" else LogConfig(flush_messages=1)
    log = PartitionLog(tmp_path / "t-0", config, clock=Clock(), fsync=True)
    fill(log, 2)
    start = log.recovery_point

    def failing_fsync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    if flush == "rolled":
        log.append(make_batch(2))  # rolls; the append itself succeeds
        log.wait_for_rolled_flush(10)
    else:
        with pytest.raises(KafkaStorageError, match="offline"):
            log.append(make_batch(2))  # written, but not acknowledged as on disk
    assert log.recovery_point == start
    with pytest.raises(KafkaStorageError, match="offline") as failed:
        log.append(make_batch(1))
    assert is_disk_failure(failed.value)  # so the broker takes its log directory offline
    with pytest.raises(KafkaStorageError, match="offline"):
        log.read(0, 1 << 20)
    monkeypatch.undo()  # the disk works again; the log still is not trusted
    log.close()
    path = tmp_path / "t-0"
    assert not (path / CLEAN_SHUTDOWN_FILE).exists()  # so the next open recovers
    with open(path / RECOVERY_POINT_CHECKPOINT) as f:
        assert int(f.read().split()[-1]) <= start
    reopened = PartitionLog(path, config, clock=Clock(), fsync=True)
    assert reopened.log_end_offset == 6  # recovery validated what the page cache kept
    reopened.close()


def test_a_truncation_during_the_rolled_fsync_keeps_the_recovery_point(tmp_path, monkeypatch):
    """A follower truncated below the rolled segment while its fsync ran: the recovery point
    must not pass data appended after the truncation, which no fsync covered."""
    log = PartitionLog(tmp_path / "t-0", LogConfig(), clock=Clock(), fsync=True)
    fill(log, 2)
    held = _HeldFsync(os.fsync)
    monkeypatch.setattr(os, "fsync", held)
    _roll_and_hold(held, log.roll)  # the segment below offset 4
    monkeypatch.setattr(os, "fsync", held.real)  # the truncation's own fsyncs go through
    assert log.truncate_to(2)
    log.append(make_batch(3))  # back above the rolled segment's end, unflushed
    assert log.log_end_offset == 5
    held.release.set()
    log.wait_for_rolled_flush(10)
    assert log.recovery_point <= 2
    log.close()


def test_close_during_the_rolled_fsync_flushes_everything(tmp_path, monkeypatch):
    """A close while the rolled segment's fsync runs does not wait for it: it flushes
    everything itself and writes the full recovery point, which the flusher job finishing
    later does not change."""
    path = tmp_path / "t-0"
    log = PartitionLog(path, LogConfig(), clock=Clock(), fsync=True)
    fill(log, 2)
    held = _HeldFsync(os.fsync)
    monkeypatch.setattr(os, "fsync", held)
    _roll_and_hold(held, log.roll)
    monkeypatch.setattr(os, "fsync", held.real)
    fill(log, 1)  # into the new active segment
    log.close()
    held.release.set()
    log.wait_for_rolled_flush(10)
    assert (path / CLEAN_SHUTDOWN_FILE).exists()
    with open(path / RECOVERY_POINT_CHECKPOINT) as f:
        assert f.read() == "0\n1\nt 0 6\n"


def test_clean_shutdown_marker(tmp_path):
    path = tmp_path / "t-0"
    log = open_log(path)
    fill(log, 3)
    assert not (path / CLEAN_SHUTDOWN_FILE).exists()
    log.close()
    assert (path / CLEAN_SHUTDOWN_FILE).exists()
    log = open_log(path)
    assert not (path / CLEAN_SHUTDOWN_FILE).exists()
    assert log.log_end_offset == 6
    assert log.recovery_point == 6
    log.close()


def test_closed_log_refuses_calls(log):
    log.close()
    with pytest.raises(KafkaStorageError, match="closed"):
        log.append(make_batch(1))
    log.close()  # idempotent


def test_reopen_keeps_everything(tmp_path):
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=300, index_interval_bytes=50)
    fill(log, 20)
    before = log.read(0, 1 << 30).read_bytes()
    entries = [s.offset_index.entries() for s in log.segments]
    times = [s.time_index.entries() for s in log.segments]
    log.close()
    log = open_log(path, segment_bytes=300, index_interval_bytes=50)
    assert log.read(0, 1 << 30).read_bytes() == before
    assert [s.offset_index.entries() for s in log.segments] == entries
    assert [s.time_index.entries() for s in log.segments] == times
    fill(log, 1)
    assert log.log_end_offset == 42
    log.close()


# --- truncation -----------------------------------------------------------------------------


def test_truncate_to(tmp_path):
    size = len(make_batch(2))
    log = open_log(tmp_path / "t-0", segment_bytes=2 * size)
    log.append(make_batch(2), leader_epoch=1)
    log.append(make_batch(2), leader_epoch=2)
    log.append(make_batch(2), leader_epoch=3)
    log.append(make_batch(2), leader_epoch=3)
    log.update_high_watermark(8)
    assert log.segments.base_offsets == [0, 4]
    assert log.truncate_to(5)  # mid-batch: the whole batch [4,5] goes
    assert log.log_end_offset == 4
    assert log.high_watermark == 4
    assert log.leader_epoch_cache.entries == [(1, 0), (2, 2)]
    assert log.segments.base_offsets == [0, 4]
    assert not log.truncate_to(10)
    assert log.truncate_to(2)
    assert log.segments.base_offsets == [0]
    assert log.log_end_offset == 2
    log.append(make_batch(2), leader_epoch=4)
    assert log.read(0, 1 << 20).size == 2 * size
    log.close()
    log = open_log(tmp_path / "t-0", segment_bytes=2 * size)
    assert log.log_end_offset == 4
    assert log.leader_epoch_cache.entries == [(1, 0), (4, 2)]
    log.close()


def test_truncate_fully_and_start_at(log):
    fill(log, 3)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert log.segments.base_offsets == [100]
    assert log.leader_epoch_cache.entries == []
    info = log.append(make_batch(2))
    assert info.first_offset == 100
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)


def test_truncate_below_first_segment(log):
    log.truncate_fully_and_start_at(100)
    fill(log, 1)
    assert log.truncate_to(50)
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)


def test_encode_batch_from_records_package_is_accepted(log):
    data = records_batch.encode_batch(
        [records_batch.Record(timestamp=5, key=b"k", value=b"v", headers=[])], base_offset=9
    )
    info = log.append(data)
    assert info.first_offset == 0
    assert log.read(0, 100).read_bytes()[8:] == data[8:]


def test_compressed_batches_are_stored_as_they_came(log):
    records = [records_batch.Record(timestamp=10 + i, key=b"k", value=b"v" * 50) for i in range(20)]
    data = records_batch.encode_batch(records, compression=Compression.ZSTD)
    log.append(make_batch(3))
    info = log.append(data, leader_epoch=2)
    assert (info.first_offset, info.last_offset, info.max_timestamp) == (3, 22, 29)
    stored = log.read(3, 1).read_bytes()
    decoded = records_batch.decode_batch(stored)
    assert [r.offset for r in decoded.records] == list(range(3, 23))
    assert decoded.header.partition_leader_epoch == 2


def test_recovery_keeps_epoch_start_offsets_before_the_recovery_point(tmp_path):
    """A crash with the recovery point inside an older epoch must not move that epoch's start
    (recovery replays batches of epochs the checkpoint already knows)."""
    path = tmp_path / "topic-0"
    log = open_log(path)
    log.append(make_batch(3), leader_epoch=0)
    log.append(make_batch(3), leader_epoch=1)
    log.roll()
    log.append(make_batch(3), leader_epoch=1)
    log.append(make_batch(3), leader_epoch=2)
    log.flush(6)
    expected = [(0, 0), (1, 3), (2, 9)]
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == expected
    log.close_without_flush()
    reopened = open_log(path)
    assert [(e.epoch, e.start_offset) for e in reopened.leader_epoch_cache.entries] == expected
    assert reopened.log_end_offset == 12
    reopened.close()
