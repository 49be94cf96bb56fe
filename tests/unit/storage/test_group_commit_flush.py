"""The group commit's fsync (``PartitionLog.flush_policy_to``) covers the active segment's
log file alone: its indexes are rebuilt by recovery after a crash, so they are fsynced
only when the segment rolls or the log closes. The recovery point never stands past a
segment whose indexes are not on disk (a roll right at it steps it back inside), and a
crash that loses the active segment's index writes loses nothing."""

from __future__ import annotations

import os
import threading

from brokernodes.storage.config import LogConfig
from brokernodes.storage.log import PartitionLog
from tests.unit.storage.batches import make_batch

FLUSHER = "sluice-log-flusher"


class Clock:
    def __call__(self) -> int:
        return 1_000_000


def _log(path, **config) -> PartitionLog:
    config.setdefault("flush_messages", 1)
    config.setdefault("index_interval_bytes", 1)  # an index entry per batch
    return PartitionLog(path, LogConfig(**config), clock=Clock(), fsync=True)


def _commit(log: PartitionLog, n: int, start: int = 0) -> None:
    """``n`` two-record batches, each appended with ``defer_flush`` and then fsynced by the
    group commit's call, as ``Partition._group_commit`` does."""
    for i in range(start, start + n):
        info = log.append(make_batch(2, timestamp=1_000 + 10 * i), leader_epoch=0, defer_flush=True)
        assert info.flush_to is not None
        log.flush_policy_to(info.flush_to)


class _Fsyncs:
    """``os.fsync`` that notes the name of each segment file it syncs, with the thread's
    name, and holds the threads whose names start with a key of ``held`` until that key's
    event is set (``started[key]`` says one got there)."""

    def __init__(self, real, *held: str) -> None:
        self.real = real
        self.names: list[tuple[str, str]] = []
        self.held = {prefix: threading.Event() for prefix in held}
        self.started = {prefix: threading.Event() for prefix in held}

    def __call__(self, fd: int) -> None:
        thread = threading.current_thread().name
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        if name[:1].isdigit():  # segment files, not checkpoints
            self.names.append((thread, name))
        for prefix, release in self.held.items():
            if thread.startswith(prefix):
                self.started[prefix].set()
                release.wait(10)
        self.real(fd)


def test_the_group_commit_fsyncs_the_active_log_file_alone(tmp_path, monkeypatch):
    log = _log(tmp_path / "t-0")
    fsyncs = _Fsyncs(os.fsync)
    monkeypatch.setattr(os, "fsync", fsyncs)
    _commit(log, 3)
    assert log.recovery_point == 6
    assert [n for _, n in fsyncs.names] == ["00000000000000000000.log"] * 3
    fsyncs.names.clear()
    log.flush()  # an explicit flush still covers everything it passes (nothing new here)
    log.close()  # the close fsyncs the indexes the group commits left
    names = {n for _, n in fsyncs.names}
    assert {"00000000000000000000.index", "00000000000000000000.timeindex"} <= names


def test_a_crash_losing_the_active_segments_index_writes_loses_nothing(tmp_path):
    path = tmp_path / "t-0"
    log = _log(path)
    _commit(log, 20)
    before = log.read(0, 1 << 30).read_bytes()
    entries = [s.offset_index.entries() for s in log.segments]
    times = [s.time_index.entries() for s in log.segments]
    lookup = log.offset_for_timestamp(1_000 + 10 * 7)
    log.close_without_flush()  # a crash: no clean-shutdown marker
    for suffix in (".index", ".timeindex"):  # the index writes no fsync covered: gone
        os.truncate(path / f"00000000000000000000{suffix}", 0)
    log = _log(path)
    assert log.log_end_offset == 40
    assert log.read(0, 1 << 30).read_bytes() == before
    assert [s.offset_index.entries() for s in log.segments] == entries
    assert [s.time_index.entries() for s in log.segments] == times
    assert log.offset_for_timestamp(1_000 + 10 * 7) == lookup
    log.close()


def test_a_roll_at_the_recovery_point_steps_it_back_until_the_segment_is_fsynced(
    tmp_path, monkeypatch
):
    """The group commit fsynced the active segment to its end (log file only); the roll
    that follows puts the next segment's base at the recovery point, where recovery would
    no longer rebuild the old segment's indexes: the recovery point steps back inside it
    until the flusher has fsynced the old segment whole."""
    size = len(make_batch(2))
    log = _log(tmp_path / "t-0", segment_bytes=2 * size)
    _commit(log, 2)  # the first segment full, fsynced to its end
    assert log.recovery_point == 4
    fsyncs = _Fsyncs(os.fsync, FLUSHER)
    monkeypatch.setattr(os, "fsync", fsyncs)
    # rolls (its own fsync is the group commit's, later); the flusher's fsync is held
    log.append(make_batch(2), leader_epoch=0, defer_flush=True)
    assert fsyncs.started[FLUSHER].wait(10)
    assert log.recovery_point == 3
    fsyncs.held[FLUSHER].set()
    log.wait_for_rolled_flush(10)
    assert log.recovery_point == 4
    flushed = {n for t, n in fsyncs.names if t.startswith(FLUSHER)}
    assert flushed == {
        "00000000000000000000.log",
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
    }
    log.close()


def test_a_roll_during_the_group_commits_fsync_keeps_the_recovery_point_inside(
    tmp_path, monkeypatch
):
    """The segment rolls while the group commit's fsync of its log file runs: the
    recovery point stops one short of the new segment's base, inside the segment whose
    indexes no fsync covered yet, until the flusher has fsynced that segment whole."""
    size = len(make_batch(2))
    log = _log(tmp_path / "t-0", segment_bytes=2 * size)
    _commit(log, 1)
    info = log.append(make_batch(2), leader_epoch=0, defer_flush=True)  # fills the segment
    fsyncs = _Fsyncs(os.fsync, "group-commit", FLUSHER)
    monkeypatch.setattr(os, "fsync", fsyncs)
    commit = threading.Thread(
        target=log.flush_policy_to, args=(info.flush_to,), name="group-commit"
    )
    commit.start()
    assert fsyncs.started["group-commit"].wait(10)
    log.roll()  # the next segment starts at the target; the flusher's fsync is held
    fsyncs.held["group-commit"].set()
    commit.join(10)
    assert not commit.is_alive()
    assert log.recovery_point == 3
    fsyncs.held[FLUSHER].set()
    log.wait_for_rolled_flush(10)
    assert log.recovery_point == 4  # once the flusher fsynced the rolled segment whole
    log.close()


def test_a_policy_flush_in_the_append_fsyncs_the_active_log_file_alone(tmp_path, monkeypatch):
    """``flush.messages`` without ``defer_flush`` (a follower's append, the storage tools):
    the same single fsync as the group commit's, and a crash that loses the index writes
    loses nothing."""
    path = tmp_path / "t-0"
    log = _log(path)
    fsyncs = _Fsyncs(os.fsync)
    monkeypatch.setattr(os, "fsync", fsyncs)
    for i in range(5):
        log.append(make_batch(2, timestamp=1_000 + 10 * i), leader_epoch=0)
        assert log.recovery_point == 2 * (i + 1)  # on disk before the append returned
    assert [n for _, n in fsyncs.names] == ["00000000000000000000.log"] * 5
    before = log.read(0, 1 << 30).read_bytes()
    entries = [s.offset_index.entries() for s in log.segments]
    log.close_without_flush()
    for suffix in (".index", ".timeindex"):
        os.truncate(path / f"00000000000000000000{suffix}", 0)
    log = _log(path)
    assert log.log_end_offset == 10
    assert log.read(0, 1 << 30).read_bytes() == before
    assert [s.offset_index.entries() for s in log.segments] == entries
    log.close()
