"""Property test: random appends, reads, rolls, retention, truncation and reopen of a
PartitionLog against an in-memory model (a list of batches with their final offsets)."""

from __future__ import annotations

import shutil
import struct
import tempfile

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from brokernodes.errors import InvalidRecordError
from brokernodes.records.header import read_header
from brokernodes.storage.config import LogConfig
from brokernodes.storage.log import PartitionLog
from tests.unit.storage.batches import make_batch

CONFIG = LogConfig(
    segment_bytes=700,
    index_interval_bytes=100,
    segment_index_bytes=48,
    retention_ms=5_000,
    retention_bytes=1_500,
)

batch_specs = st.lists(
    st.tuples(st.integers(1, 4), st.integers(0, 80)),  # (records, value size)
    min_size=1,
    max_size=4,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="sluice-model-")
        self.clock = Clock()
        self.log = self._open()
        # every stored batch (final offsets and epochs), also those below the log start
        # offset that DeleteRecords hid but whose segment is still there
        self.batches: list[bytes] = []
        self.start = 0
        self.end = 0
        self.hw = 0
        self.epoch = 0

    def _open(self) -> PartitionLog:
        return PartitionLog(
            self.dir + "/t-0", CONFIG, clock=self.clock, fsync=False, checkpoint_interval_ms=0
        )

    def teardown(self) -> None:
        self.log.close_without_flush()
        shutil.rmtree(self.dir, ignore_errors=True)

    def visible(self) -> list[bytes]:
        return [b for b in self.batches if read_header(b).last_offset >= self.start]

    # --- operations -------------------------------------------------------------------------

    def _make(self, specs, base: int, epoch: int) -> list[bytes]:
        out = []
        for count, size in specs:
            b = make_batch([b"v" * size] * count, base_offset=base, timestamp=self.clock.now)
            b = b[:12] + struct.pack(">i", epoch) + b[16:]
            out.append(b)
            base += count
        return out

    @rule(specs=batch_specs, new_epoch=st.booleans())
    def append_leader(self, specs, new_epoch):
        self.epoch += new_epoch
        batches = self._make(specs, self.end, self.epoch)
        info = self.log.append(b"".join(self._make(specs, 12345, -1)), leader_epoch=self.epoch)
        assert info.first_offset == self.end
        self.batches += batches
        self.end = read_header(batches[-1]).next_offset
        assert info.last_offset == self.end - 1
        # the batches just appended are the live tail, served from memory as written
        assert self.log.read_tail(info.first_offset, 1 << 20) == b"".join(batches)

    @rule(specs=batch_specs, gap=st.integers(0, 5))
    def append_follower(self, specs, gap):
        batches = self._make(specs, self.end + gap, self.epoch)
        if gap:  # a replica never skips offsets (the log is not compacted): refused whole
            with pytest.raises(InvalidRecordError, match="without a gap"):
                self.log.append(b"".join(batches), assign_offsets=False)
            assert self.log.log_end_offset == self.end
            return
        self.log.append(b"".join(batches), assign_offsets=False, expected_offset=self.end)
        self.batches += batches
        self.end = read_header(batches[-1]).next_offset

    @rule(data=st.data())
    def read(self, data):
        offset = data.draw(st.integers(self.start, self.end))
        max_bytes = data.draw(st.integers(1, 2_000))
        max_offset = data.draw(st.one_of(st.none(), st.integers(self.start, self.end)))
        limit = self.end if max_offset is None else max_offset
        expected = []
        total = 0
        for b in self.visible():
            h = read_header(b)
            if h.last_offset < offset:
                continue
            if h.last_offset >= limit or (expected and total + len(b) > max_bytes):
                break
            expected.append(b)
            total += len(b)
            if total >= max_bytes:
                break
        data = self.log.read(offset, max_bytes, max_offset=max_offset)
        got = data.read_bytes()
        assert got == b"".join(expected)
        # next_offset: a fetch from it starts at the batch right after those returned
        if not expected:
            assert data.next_offset == offset
        else:
            visible = self.visible()
            after = visible[visible.index(expected[-1]) + 1 :]
            assert data.next_offset > read_header(expected[-1]).last_offset
            assert data.next_offset <= (read_header(after[0]).last_offset if after else self.end)
        tail = self.log.read_tail(offset, max_bytes, max_offset=max_offset)
        assert tail is None or tail == got

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def read_tail(self, data):
        """From memory only what the files hold: after truncation, retention, DeleteRecords
        or a reopen, the copy of the last append is served only if it is still the log's
        end (or not at all)."""
        offset = read_header(data.draw(st.sampled_from(self.batches[-4:]))).base_offset
        max_bytes = data.draw(st.integers(1, 2_000))
        max_offset = data.draw(st.one_of(st.none(), st.integers(self.start, self.end)))
        tail = self.log.read_tail(offset, max_bytes, max_offset=max_offset)
        if tail is not None:
            assert offset >= self.start
            assert tail == self.log.read(offset, max_bytes, max_offset=max_offset).read_bytes()

    @rule(data=st.data())
    def offset_for_timestamp(self, data):
        if not self.batches:
            return
        target = data.draw(st.integers(self.clock.now - 10_000, self.clock.now + 1))
        found = self.log.offset_for_timestamp(target)
        expected = next(
            (
                read_header(b)
                for b in self.batches
                if read_header(b).max_timestamp >= target
                and read_header(b).last_offset >= self.start
            ),
            None,
        )
        if expected is None:
            assert found is None
        else:
            assert found.offset == max(expected.base_offset, self.start)

    @rule()
    def roll(self):
        self.log.roll()

    @rule(ms=st.integers(0, 3_000))
    def tick(self, ms):
        self.clock.now += ms

    @rule(data=st.data())
    def advance_high_watermark(self, data):
        self.hw = self.log.update_high_watermark(data.draw(st.integers(self.start, self.end)))

    def _drop_deleted_segments(self):
        first_base = self.log.segments.first.base_offset
        self.batches = [b for b in self.batches if read_header(b).base_offset >= first_base]
        return first_base

    @rule()
    def retention(self):
        before = self.start
        self.log.apply_retention()
        first_base = self._drop_deleted_segments()
        # whole segments go, and only below the high watermark
        self.start = max(self.start, first_base)
        assert self.start <= max(self.hw, before)

    @precondition(lambda self: self.hw > self.start)
    @rule(data=st.data())
    def delete_records(self, data):
        offset = data.draw(st.integers(self.start, self.hw))
        self.log.delete_records(offset)
        self.start = offset
        # batches stay in their segment (self.batches holds every stored batch) unless the
        # whole segment is below the new log start
        self._drop_deleted_segments()

    @rule(data=st.data())
    def truncate_to(self, data):
        offset = data.draw(st.integers(max(self.start - 3, 0), self.end + 2))
        first_base = self.log.segments.first.base_offset
        floor = self.log.segments.floor(offset)
        self.log.truncate_to(offset)
        if offset >= self.end:
            return
        if offset < first_base:
            self.batches, self.start, self.end = [], offset, offset
        else:
            # The log ends after the last batch kept, or at the base of the segment holding
            # the offset if none of its batches is kept (a batch straddling the offset goes).
            self.batches = [b for b in self.batches if read_header(b).last_offset < offset]
            in_floor = [b for b in self.batches if read_header(b).base_offset >= floor.base_offset]
            self.end = read_header(in_floor[-1]).next_offset if in_floor else floor.base_offset
            self.start = min(self.start, self.end)
        self.hw = min(self.hw, self.end)

    @rule(offset=st.integers(0, 400))
    def truncate_fully(self, offset):
        self.log.truncate_fully_and_start_at(offset)
        self.batches, self.start, self.end, self.hw = [], offset, offset, offset

    @rule(clean=st.booleans())
    def reopen(self, clean):
        if clean:
            self.log.close()
        else:
            self.log.close_without_flush()
        self.log = self._open()
        self.hw = self.start  # the high watermark is the replica manager's, not persisted

    # --- checks -----------------------------------------------------------------------------

    @invariant()
    def offsets_match(self):
        assert self.log.log_start_offset == self.start
        assert self.log.log_end_offset == self.end
        assert self.log.high_watermark == self.hw

    @invariant()
    def contents_match(self):
        got = self.log.read(self.start, 1 << 30).read_bytes()
        assert got == b"".join(self.visible())


TestLogModel = LogModel.TestCase
TestLogModel.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.slow
class TestLogModelLonger(LogModel.TestCase):
    settings = settings(
        max_examples=200,
        stateful_step_count=60,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
