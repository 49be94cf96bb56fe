"""``Partition``: one hosted partition's log, producer state, high watermark and fetch
waiters (Kafka's ``Partition``), driven from the event loop.

The request path is shaped for replication:

- ``append_as_leader`` checks leadership and the producer state, appends with the leader
  epoch from metadata, then calls ``maybe_advance_high_watermark``. With one replica the
  high watermark is the log end offset; with followers it becomes the minimum log end offset
  over the ISR, fed by ``record_follower_fetch`` (replica fetches pass ``replica_id``).
- ``read`` caps consumers at the high watermark and lets replicas read to the log end.
- acks=all waits on the high watermark passing the append (``wait_for_high_watermark``);
  with one replica that is immediate.

Threading: producer state and waiters live on the event loop. ``PartitionLog`` is
thread-safe; appends that may fsync (a finite flush policy, or a segment roll due) run in a
worker thread so the loop never blocks on the disk.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass

from brokernodes.errors import InvalidRecordError, RequestTimedOutError
from brokernodes.records.batch import decode_batch
from brokernodes.records.header import BatchHeader, iter_batches
from brokernodes.server.metadata import PartitionInfo
from brokernodes.storage.config import MAX_LONG
from brokernodes.storage.log import AppendInfo, FetchData, PartitionLog
from brokernodes.storage.producer_state import ProducerStateManager

logger = logging.getLogger("sluice.broker.partition")

ROLL_MARGIN_MS = 1000
THREAD_APPEND_BYTES = int(os.environ.get("SLUICE_THREAD_APPEND_BYTES", 4 * 1024 * 1024))


@dataclass(slots=True)
class AppendResult:
    """What a produce answers: offsets of the first and last record, and the log start."""

    base_offset: int
    last_offset: int
    log_start_offset: int
    record_count: int
    bytes: int
    duplicate: bool = False


class Partition:
    """One partition hosted by this broker (see the module docstring)."""

    def __init__(
        self,
        info: PartitionInfo,
        log: PartitionLog,
        broker_id: int,
        producer_state: ProducerStateManager,
    ) -> None:
        self.topic = info.topic
        self.partition = info.partition
        self.log = log
        self.broker_id = broker_id
        self.producer_state = producer_state
        self.info = info
        self._append_lock = asyncio.Lock()
        self._data_arrived: asyncio.Future[None] | None = None
        self._follower_leo: dict[int, int] = {}
        self.closed = False
        self.maybe_advance_high_watermark()

    # --- opening -----------------------------------------------------------------------

    @staticmethod
    def open_log(directory: str, info: PartitionInfo, config, *, fsync: bool) -> tuple:
        """Open (recovering) the log and rebuild producer state from its batch headers.

        Blocking: call in a worker thread. Returns (log, producer state).
        """
        started = time.monotonic()
        log = PartitionLog(directory, config, fsync=fsync)
        state = ProducerStateManager()
        with log.lock:
            headers = (h for seg in list(log.segments) for h in seg.iter_headers())
            state.rebuild(headers, log_start_offset=log.log_start_offset)
        logger.info(
            "opened %s-%d: offsets [%d, %d), %d producers, %.1f ms",
            info.topic,
            info.partition,
            log.log_start_offset,
            log.log_end_offset,
            len(state),
            (time.monotonic() - started) * 1000,
        )
        return log, state

    # --- leadership --------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.info.leader == self.broker_id

    @property
    def leader_epoch(self) -> int:
        return self.info.leader_epoch

    def update_info(self, info: PartitionInfo) -> None:
        """New metadata for this partition (leader, epoch, replicas, ISR)."""
        self.info = info
        self.maybe_advance_high_watermark()

    # --- high watermark ----------------------------------------------------------------

    def maybe_advance_high_watermark(self) -> bool:
        """HW = min log end offset over the in-sync replicas this broker knows of.

        Until replication lands there are no follower fetches, so the HW is the leader's log
        end offset (acks=all answers as acks=1; see docs/data-plane-api.md).
        """
        leo = self.log.log_end_offset
        followers = [
            self._follower_leo[r]
            for r in self.info.isr
            if r != self.broker_id and r in self._follower_leo
        ]
        new_hw = min([leo, *followers])
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            self._wake_fetchers()
            return True
        return False

    def record_follower_fetch(self, replica_id: int, fetch_offset: int) -> None:
        """A follower fetching from ``fetch_offset`` has everything below it (replication)."""
        self._follower_leo[replica_id] = fetch_offset
        self.maybe_advance_high_watermark()

    # --- append ------------------------------------------------------------------------

    def _may_block(self, nbytes: int, headers: list[BatchHeader]) -> bool:
        """Could this append fsync (flush policy), roll a segment (which fsyncs the old
        one), or copy so much into the page cache that the loop would stall?"""
        if nbytes >= THREAD_APPEND_BYTES:
            return True
        c = self.log.config
        if c.flush_messages != MAX_LONG or c.flush_ms != MAX_LONG:
            return True
        active = self.log.segments.last
        if active is None or active.size == 0:
            return False
        if active.size + nbytes > c.segment_bytes:
            return True
        # segment.ms: measured from the first batch's timestamp (or creation), as the log does
        rolling = active.rolling_timestamp
        newest = max(h.max_timestamp for h in headers)
        waited = newest - rolling if rolling >= 0 else int(time.time() * 1000) - active.created_ms
        return waited + ROLL_MARGIN_MS > c.segment_ms

    def _check_compacted(self, buf: bytearray, headers: list[BatchHeader]) -> None:
        """Compacted topics refuse keyless records (Kafka decodes these batches too)."""
        for h in headers:
            for r in decode_batch(buf, h.position, verify_crc=False).records:
                if r.key is None:
                    raise InvalidRecordError(
                        f"topic {self.topic!r} is compacted (cleanup.policy="
                        f"{self.log.config.cleanup_policy}): every record needs a key; "
                        f"the record at offset delta {r.offset - h.base_offset} of the batch "
                        f"at byte {h.position} has none"
                    )

    async def append_as_leader(
        self, buf: bytearray, *, acks: int = 1, timeout: float = 30.0
    ) -> AppendResult:
        """Validate, deduplicate and append a request's batches; advance the HW.

        ``buf`` is rewritten in place (base offsets, leader epoch). Raises the storage and
        producer-state errors (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, OUT_OF_ORDER_SEQUENCE_NUMBER,
        INVALID_PRODUCER_EPOCH, ...); nothing is appended then.
        """
        config = self.log.config
        # Header walk without CRC: the log checks CRCs during its own validation.
        headers = list(
            iter_batches(buf, max_batch_bytes=config.max_message_bytes, verify_crc=False)
        )
        if not headers:
            raise InvalidRecordError("the request holds no record batch")
        idempotent = any(h.producer_id >= 0 for h in headers)
        if config.compact_enabled:
            self._check_compacted(buf, headers)
        async with self._append_lock:
            if idempotent:
                dup = self.producer_state.check_batches(headers)
                if dup is not None:
                    return AppendResult(
                        dup.first_offset,
                        dup.last_offset,
                        self.log.log_start_offset,
                        0,
                        0,
                        duplicate=True,
                    )
            if self._may_block(len(buf), headers):
                info = await asyncio.to_thread(self.log.append, buf, leader_epoch=self.leader_epoch)
            else:
                info = self.log.append(buf, leader_epoch=self.leader_epoch)
            if idempotent:
                self._update_producer_state(headers, info)
        self.maybe_advance_high_watermark()
        if acks == -1:
            await self.wait_for_high_watermark(info.last_offset + 1, timeout)
        return AppendResult(
            info.first_offset,
            info.last_offset,
            info.log_start_offset,
            info.record_count,
            info.valid_bytes,
        )

    def _update_producer_state(self, headers: list[BatchHeader], info: AppendInfo) -> None:
        base = info.first_offset
        state = self.producer_state
        for h in headers:
            state.update(h, base_offset=base)
            base += h.last_offset_delta + 1

    # --- read --------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, replica_id: int | None = None) -> FetchData:
        """Whole batches from ``offset``: consumers up to the HW, replicas to the log end."""
        max_offset = None if replica_id is not None else self.log.high_watermark
        return self.log.read(offset, max_bytes, max_offset=max_offset)

    # --- long poll ---------------------------------------------------------------------

    def _wake_fetchers(self) -> None:
        fut = self._data_arrived
        if fut is not None:
            self._data_arrived = None
            if not fut.done():
                fut.set_result(None)

    async def wait_for_data(self, timeout: float) -> None:
        """Return when new data becomes readable (HW moved), on close, or after ``timeout``."""
        if self.closed or timeout <= 0:
            return
        fut = self._data_arrived
        if fut is None:
            fut = self._data_arrived = asyncio.get_running_loop().create_future()
        await asyncio.wait((fut,), timeout=timeout)

    async def wait_for_high_watermark(self, offset: int, timeout: float) -> None:
        """acks=all: wait until the HW reaches ``offset`` (every ISR member has the
        append). Immediate with one replica."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.log.high_watermark < offset:
            remaining = deadline - loop.time()
            if remaining <= 0 or self.closed:
                raise RequestTimedOutError(
                    f"{self.topic}-{self.partition}: the in-sync replicas did not confirm "
                    f"offset {offset - 1} within {timeout:g} s (acks=all)"
                )
            await self.wait_for_data(remaining)

    def wake_all(self) -> None:
        """Release every waiting fetch (shutdown)."""
        self.closed = True
        self._wake_fetchers()
