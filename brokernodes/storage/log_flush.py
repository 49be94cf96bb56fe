"""``PartitionLog``'s flushes: when a log is fsynced, and how, without stalling its readers.

- Policy (``flush.messages``, ``flush.ms``): an append that reaches either marks a flush due
  and, once it has released the log's lock, fsyncs up to its end before it returns;
  ``maybe_flush`` is the ``flush.ms`` ticker for logs nobody appends to. A policy flush
  (and the group commit's, ``flush_policy_to``) fsyncs the active segment's log file
  without its indexes, which recovery rebuilds (``_fsync_to``); an explicit ``flush``
  fsyncs them too.
- ``flush``: fsync up to an offset (default: the log end) and write the recovery-point
  checkpoint at once; policy flushes write it at most every checkpoint interval.
- Rolled segments: a roll does not fsync the segment it closes; a ``flusher`` thread does
  (Kafka's ``flush-log`` task), and the recovery point passes that segment once it is done.
- Every fsync runs on duplicated file descriptors outside the lock (``_fsync_to``), so
  appends, reads, retention and the broker's loop go on meanwhile. A failed fsync takes the
  log offline (KAFKA_STORAGE_ERROR on every call until it is reopened and recovered).
"""

from __future__ import annotations

import logging
import os
from typing import Literal

from brokernodes.errors import KafkaStorageError
from brokernodes.storage import flusher
from brokernodes.storage.files import close_fds

__all__ = ["LogFlush"]

logger = logging.getLogger("sluice.storage")


class LogFlush:
    """The flush methods of ``PartitionLog`` (its base class). They use the log's lock,
    segments, offsets (log end, recovery point), the last roll (``_rolled_to``), the
    truncation count and the recovery-point checkpoint file."""

    def flush(self, offset: int | None = None) -> None:
        """fsync everything below ``offset`` (default: the log end), advance the recovery
        point and write the recovery-point checkpoint (policy-driven flushes throttle that
        write, see the class docstring; an explicit flush does not). The fsync runs without
        the log's lock (``_fsync_to``)."""
        with self._lock:
            self._check_open()
            now = self._clock()
            self._last_flush_ms = now
            target = self._log_end_offset if offset is None else offset
        self._fsync_to(target, now, checkpoint="always")

    def flush_policy_to(self, offset: int) -> None:
        """fsync everything below ``offset`` for a deferred policy flush (``append`` with
        ``defer_flush``: the group commit); nothing to do if the recovery point is past it
        already. The recovery-point checkpoint is written as a policy flush writes it. The
        active segment's log file is fsynced without its indexes (``_fsync_to``)."""
        self._fsync_to(offset, checkpoint="policy", active_indexes=False)

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """The ``flush.ms`` ticker: flush if ``flush.ms`` passed since the last flush."""
        with self._lock:
            self._check_open()
            now = self._clock() if now_ms is None else now_ms
            if now - self._last_flush_ms < self._config.flush_ms:
                return False
            self._last_flush_ms = now
            target = self._log_end_offset
        self._fsync_to(target, now, checkpoint="policy", active_indexes=False)
        return True

    def _flush_segments(self, from_offset: int, to_offset: int | None = None) -> None:
        for seg in self._segments.from_floor(from_offset):
            if to_offset is not None and seg.base_offset >= to_offset:
                break
            seg.flush()

    def _flush_all_locked(self) -> None:
        """fsync everything above the recovery point under the lock (``close`` only: nothing
        may append or read meanwhile)."""
        if self._log_end_offset > self._recovery_point:
            self._flush_segments(self._recovery_point, self._log_end_offset)
            self._recovery_point = self._log_end_offset

    def _checkpoint_recovery_point(self, now: int | None = None) -> None:
        self._write_offset(self._rp_file, self._recovery_point)
        self._last_checkpoint_ms = self._clock() if now is None else now

    def _schedule_rolled_flush(self) -> None:
        """Have a flusher thread fsync the rolled segments (``flusher``; Kafka's ``flush-log``
        task), unless a job for this log is queued and not yet started: that one will see
        this roll. A job that has started may have read ``_rolled_to`` before this roll, so
        it does not count."""
        with self._lock:
            if self._closed or self._rolled_flush_queued:
                return
            self._rolled_flush_queued = True
            self._rolled_flush = flusher.submit(self._rolled_flush_job)

    def _rolled_flush_job(self) -> None:
        """On a flusher thread: fsync the segments below the last roll and advance the
        recovery point past them."""
        with self._lock:
            self._rolled_flush_queued = False  # a roll from now on queues another job
            target = self._rolled_to
        try:
            self._fsync_to(target, checkpoint="never", what="a rolled segment")
        except KafkaStorageError as e:
            logger.error("%s", e)  # the log is offline now (``_fsync_to``)
            if self.on_offline is not None:
                self.on_offline(e)

    def wait_for_rolled_flush(self, timeout: float | None = None) -> None:
        """Wait until the rolled segments' last scheduled fsync is done (tests, tools)."""
        with self._lock:
            job = self._rolled_flush
        if job is not None:
            job.result(timeout)

    def _fsync_to(
        self,
        target: int,
        now: int | None = None,
        *,
        checkpoint: Literal["always", "policy", "never"],
        what: str = "the log",
        active_indexes: bool = True,
    ) -> None:
        """fsync everything below ``target`` without holding the log's lock (Kafka's
        ``LocalLog.flush`` does not hold it either), then advance the recovery point to it.

        The files are duplicated under the lock (a close or a deletion meanwhile cannot
        pull them away) and fsynced after it is released: reads, appends, retention and the
        broker's loop go on meanwhile. A truncation meanwhile (the log cut below ``target``,
        which this fsync may not cover any more) leaves the recovery point alone; a close
        meanwhile flushes everything itself. ``checkpoint``: write the recovery-point
        checkpoint ``"always"`` (explicit flush), at most every checkpoint interval
        (``"policy"``), or ``"never"`` (rolled segments).

        Without ``active_indexes`` the active segment's log file is fsynced alone: the
        recovery point then stays inside that segment, and after a crash recovery rebuilds
        the indexes of every segment from the one holding the recovery point on, so they
        need no fsync of their own; they are fsynced when the segment rolls (the flusher)
        or the log closes. Should the segment roll between the fsync and the recovery
        point's advance, leaving the target on the next segment's base, the recovery point
        stops one short of it (that segment's indexes are not on disk yet); a later flush
        fsyncs the rolled segment whole."""
        with self._lock:
            if self._closed:
                return
            target = min(target, self._log_end_offset)
            truncations = self._truncations
            fds: list[int] = []
            log_only = None  # the segment fsynced without its indexes
            if target > self._recovery_point:
                try:
                    active = self._segments.last
                    for seg in self._segments.from_floor(self._recovery_point):
                        if seg.base_offset >= target:
                            break
                        if not active_indexes and seg is active:
                            log_only = seg
                            fds.extend(seg.dup_log())
                        else:
                            fds.extend(seg.dup_files())
                except OSError as e:
                    close_fds(fds)
                    raise KafkaStorageError(f"cannot flush {self.directory}: {e}") from e
        try:
            for fd in fds:
                os.fsync(fd)
        except OSError as e:
            # Kafka takes the log directory offline. After a failed fsync the kernel may
            # have dropped the dirty pages, and a retry could succeed without writing them,
            # so the log refuses every call from now on (KAFKA_STORAGE_ERROR, the OSError as
            # its cause for the broker's disk-failure check) until it is reopened, which
            # recovers from the recovery point.
            offline = KafkaStorageError(
                f"cannot fsync {what} of {self.directory}: {e}; the log is offline"
            )
            with self._lock:
                self._flush_error = self._flush_error or offline
            raise offline from e
        finally:
            close_fds(fds)
        with self._lock:
            if self._closed:
                return
            if log_only is not None and self._segments.floor(target) is not log_only:
                target -= 1  # rolled at the target meanwhile (docstring)
            if (
                truncations == self._truncations
                and self._recovery_point < target <= self._log_end_offset
            ):
                self._recovery_point = target
            now = self._clock() if now is None else now
            if checkpoint == "always" or (
                checkpoint == "policy"
                and now - self._last_checkpoint_ms >= self._checkpoint_interval_ms
            ):
                self._checkpoint_recovery_point(now)
