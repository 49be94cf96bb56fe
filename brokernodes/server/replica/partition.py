"""``Partition``: one hosted partition's log, producer state, replication role and waiters
(Kafka's ``Partition``), driven from the event loop.

A partition is the **leader** (``leader_state``, a ``replication.LeaderState``), a
**follower** (``follower``, a ``replication.FollowerState`` the replica fetcher drives), or
neither (no leader: offline). ``apply_metadata`` moves between the roles when the metadata's
leader or leader epoch changes (become-leader assigns the new epoch at the log end offset in
the epoch cache, Kafka's ``maybeAssignEpochStartOffset``).

As leader:

- ``append_as_leader`` refuses acks=all with NOT_ENOUGH_REPLICAS while the committed ISR is
  under ``min.insync.replicas``, deduplicates idempotent batches one by one (a retried
  request whose first batches are here already answers those from the producer state and
  appends the rest; each batch of a several-batch request gets its own offsets), stamps or
  recompresses batches for a LogAppendTime or ``compression.type`` topic
  (``produce_rewrite``; the answer's ``log_append_time``), appends with this leader's epoch
  stamped on every batch, and for acks=all waits until the high watermark passes the append
  (a duplicate waits for its original offsets too), failing with
  NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR falls under min ISR, NOT_LEADER_OR_FOLLOWER if
  leadership moves, REQUEST_TIMED_OUT after the timeout: never an acknowledgement then.
- Group commit: under a flush policy (``flush.messages``, ``flush.ms``) an append does not
  fsync under the append lock; its request waits in ``_group_commit`` after the lock, and
  one fsync at a time per partition covers every append made before it started. Requests
  that arrive while an fsync runs append meanwhile and share the next one, so a partition
  fsyncs once per group of waiting requests instead of once per request; no request is
  answered before the fsync that covers its records. Once the append lock is released the
  request signals ``append_order.appended()``: a pipelining HTTP connection then starts its
  next request, whose append joins the same or the next fsync.
- ``on_replica_fetch`` validates a follower's fetch (leader epoch, KIP-320) and feeds its
  log end offset to ``LeaderState``: the high watermark (min LEO over the ISR) and ISR
  expansions follow. ISR changes go out through ``alter_sink`` (the replica manager sends
  them to the controller) and take effect only when committed.
- ``read`` caps consumers at the high watermark (read_committed ones at the last stable
  offset, ``last_stable_offset``); replicas read to the log end.
- ``write_txn_marker`` appends a transaction's COMMIT or ABORT marker (for the transaction
  coordinator) like an acks=all produce and records an abort in the ``.txnindex``.

As follower: ``append_as_follower`` keeps the leader's offsets and epochs
(``PartitionLog.append(assign_offsets=False)``) and applies a fetch answer only while the
log end still equals the offset it was fetched from (Kafka's fetcher check): a truncation in
between (``truncate_to`` / ``truncate_fully_and_start_at`` for the fetcher's KIP-101/279
decisions, or the scrubber's repair) bumps ``log_generation`` and wakes the fetch in flight,
whose answer is then dropped and fetched again. The producer state follows appends and
truncations (with transactions, a truncation rebuilds it from the log: a truncated marker
reopens its transaction), and a follower folds in the markers it copies and writes its own
``.txnindex``, so a follower that becomes leader deduplicates retries and has the same LSO.

Threading: producer state, roles and waiters live on the event loop. ``PartitionLog`` is
thread-safe; appends and truncations that may fsync run in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from brokernodes.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaStorageError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
)
from brokernodes.records.compression import INFLATION_RATIO
from brokernodes.records.control import (
    TxnMarker,
    decode_txn_marker,
    encode_txn_marker,
    marker_is_commit,
)
from brokernodes.records.header import LOG_OVERHEAD, BatchHeader, iter_batches
from brokernodes.replication import errors as codes
from brokernodes.replication.errors import NotEnoughReplicasAfterAppendError
from brokernodes.replication.follower import FollowerState
from brokernodes.replication.leader import (
    AckStatus,
    AlterPartitionRequest,
    AlterPartitionResponse,
    LeaderState,
)
from brokernodes.server.metadata.cluster import PartitionInfo
from brokernodes.server.protocol.append_order import appended
from brokernodes.server.replica.errors import error_for
from brokernodes.server.replica.hw_checkpoint import read_high_watermark, write_high_watermark
from brokernodes.server.replica.produce_checks import check_produce
from brokernodes.server.replica.produce_rewrite import rewrite_produce
from brokernodes.storage.config import MAX_LONG, LogConfig
from brokernodes.storage.log import AppendInfo, FetchData, PartitionLog
from brokernodes.storage.producer_state import BatchMetadata, CompletedTxn, ProducerStateManager
from brokernodes.storage.txn_index import AbortedTxn

logger = logging.getLogger("sluice.broker.partition")

ROLL_MARGIN_MS = 1000
# write failures that mean the disk (log directory) failed, not this request
DISK_FAILURE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})
THREAD_APPEND_BYTES = int(os.environ.get("SLUICE_THREAD_APPEND_BYTES", 4 * 1024 * 1024))


def _expire(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def now_ms() -> int:
    return int(time.monotonic() * 1000)


def is_disk_failure(error: BaseException) -> bool:
    """A storage error caused by the disk itself (full, quota, I/O error, read-only)."""
    e: BaseException | None = error
    while e is not None:
        if isinstance(e, OSError) and e.errno in DISK_FAILURE_ERRNOS:
            return True
        e = e.__cause__
    return False


@dataclass(slots=True)
class AppendResult:
    """What a produce answers: offsets of the first and last record, and the log start."""

    base_offset: int
    last_offset: int
    log_start_offset: int
    record_count: int
    bytes: int
    duplicate: bool = False
    # one (base offset, last offset, duplicate) per batch of a request of several batches,
    # in request order: each batch's own outcome (None for a one-batch request)
    batches: list[tuple[int, int, bool]] | None = None
    # LogAppendTime topics: the time the leader stamped on the batches (a duplicate's from
    # its original append); -1 for CreateTime topics, as Kafka answers
    log_append_time: int = -1


def batch_offsets(
    headers: list[BatchHeader], outcomes: list[BatchMetadata | None], base: int
) -> list[tuple[int, int, bool]]:
    """(base offset, last offset, duplicate) per batch of a request: a duplicate's from the
    producer state, each new batch's from ``base``, where the new batches were appended
    together in request order."""
    out = []
    for h, o in zip(headers, outcomes, strict=True):
        if o is not None:
            out.append((o.first_offset, o.last_offset, True))
        else:
            out.append((base, base + h.last_offset_delta, False))
            base += h.last_offset_delta + 1
    return out


class Partition:
    """One partition hosted by this broker (see the module docstring)."""

    def __init__(
        self,
        info: PartitionInfo,
        log: PartitionLog,
        broker_id: int,
        producer_state: ProducerStateManager,
        *,
        min_insync_replicas: int = 1,
        replica_lag_time_max_ms: int = 30_000,
        broker_epoch: int = -1,
    ) -> None:
        self.topic = info.topic
        self.partition = info.partition
        self.log = log
        self.broker_id = broker_id
        self.producer_state = producer_state
        self.info = info
        self.broker_epoch = broker_epoch
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.inflation_ratio = INFLATION_RATIO  # the broker's max.inflation.ratio
        self.leader_state: LeaderState | None = None
        self.follower: FollowerState | None = None
        # ISR changes to send to the controller (set by the replica manager)
        self.alter_sink: Callable[[Partition, AlterPartitionRequest], None] | None = None
        # called once a write fails because of the disk (the replica manager takes the log
        # directory offline)
        self.on_disk_failure: Callable[[Partition, BaseException], None] | None = None
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # built outside a loop: a failed background fsync is then
            self._loop = None  # noticed at the next append
        log.on_offline = self._log_offline
        self._append_lock = asyncio.Lock()
        # the group commit: the fsync in flight (its target; None: none) and the futures of
        # the requests it covers, then those of requests that need the next one
        self._commit_target: int | None = None
        self._inflight_waiters: list[asyncio.Future[None]] = []  # the fsync in flight's
        self._next_waiters: list[asyncio.Future[None]] = []
        self._plain_config: LogConfig | None = None  # the last config seen not to rewrite
        # waiters, one future each: HW moved (consumers), LEO moved (replica fetches), HW /
        # ISR / role changed (acks=all)
        self._data_arrived: list[asyncio.Future[None]] | None = None
        self._appended: list[asyncio.Future[None]] | None = None
        self._changed: list[asyncio.Future[None]] | None = None
        # bumped by every truncation; a replica fetch answer is applied only in the
        # generation it was fetched in (append_as_follower)
        self.log_generation = 0
        self._truncated: list[asyncio.Future[None]] | None = None
        self.closed = False
        self.checkpointed_hw = log.high_watermark
        self.apply_metadata(info, min_insync_replicas=min_insync_replicas)

    # --- opening -----------------------------------------------------------------------

    @staticmethod
    def open_log(directory: str, info: PartitionInfo, config, *, fsync: bool) -> tuple:
        """Open (recovering) the log and rebuild producer state from its batch headers.

        Blocking: call in a worker thread. Returns (log, producer state).
        """
        started = time.monotonic()
        log = PartitionLog(directory, config, fsync=fsync)
        hw = read_high_watermark(directory)
        if hw is not None:
            log.update_high_watermark(hw)  # clamped to the log's bounds
        state, aborted = Partition.rebuild_producer_state(log)
        rewritten = log.replace_aborted_txns(aborted)
        if rewritten:
            logger.warning(
                "%s-%d: rewrote %d .txnindex file(s) from the log's markers",
                info.topic,
                info.partition,
                rewritten,
            )
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

    @staticmethod
    def rebuild_producer_state(log: PartitionLog) -> tuple[ProducerStateManager, list[AbortedTxn]]:
        """Producer state from a replay of every batch header from the log start (markers'
        types read from their records), and the aborted transactions the markers ended.
        Blocking: a worker thread."""
        state = ProducerStateManager()
        with log.lock:
            segments = list(log.segments)
            current: list = [None]

            def headers():
                for seg in segments:
                    current[0] = seg
                    yield from seg.iter_headers()

            def marker_of(h: BatchHeader) -> TxnMarker | None:
                try:
                    return decode_txn_marker(current[0].read_bytes(h.position, h.size))
                except CorruptRecordError as e:
                    logger.warning("%s; it ends no transaction", e)
                    return None

            aborted = state.rebuild(
                headers(),
                log_start_offset=log.log_start_offset,
                marker_of=marker_of,
                high_watermark=log.high_watermark,
            )
        return state, aborted

    def checkpoint_high_watermark(self) -> None:
        """Persist the HW if it moved since the last time (blocking: a worker thread)."""
        hw = self.log.high_watermark
        if hw != self.checkpointed_hw:
            write_high_watermark(self.log.directory, self.log.topic, self.log.partition, hw)
            self.checkpointed_hw = hw

    # --- roles -------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_state is not None

    @property
    def leader_epoch(self) -> int:
        ls = self.leader_state
        return ls.leader_epoch if ls is not None else self.info.leader_epoch

    @property
    def isr(self) -> tuple[int, ...]:
        """The committed ISR (the leader's own view, which may be ahead of metadata)."""
        ls = self.leader_state
        return tuple(sorted(ls.isr)) if ls is not None else self.info.isr

    @property
    def under_replicated(self) -> bool:
        ls = self.leader_state
        return ls is not None and ls.under_replicated

    @property
    def under_min_isr(self) -> bool:
        ls = self.leader_state
        return ls is not None and ls.under_min_isr

    def apply_metadata(
        self,
        info: PartitionInfo,
        *,
        min_insync_replicas: int = 1,
        ineligible: frozenset[int] = frozenset(),
    ) -> str | None:
        """New metadata for this partition. Returns ``"leader"`` when this broker became
        leader, ``"follower"`` when it must (re)start fetching from a new leader or epoch,
        ``"offline"`` when there is no leader to follow, None when the role is unchanged."""
        self.info = info
        me = self.broker_id
        if info.leader == me:
            self.follower = None
            ls = self.leader_state
            if ls is None or info.leader_epoch > ls.leader_epoch:
                self._become_leader(info, min_insync_replicas, ineligible)
                return "leader"
            if info.leader_epoch == ls.leader_epoch:
                ls.min_insync_replicas = min_insync_replicas
                ls.update_from_metadata(
                    isr=info.isr,
                    leader_epoch=info.leader_epoch,
                    partition_epoch=info.partition_epoch,
                    replicas=info.replicas or (me,),
                    ineligible=ineligible,
                    now_ms=now_ms(),
                )
                self._after_leader_change()
            return None
        if self.leader_state is not None:
            if info.leader_epoch < self.leader_state.leader_epoch:
                return None  # stale metadata
            logger.info(
                "%s-%d: no longer the leader (leader %d, epoch %d)",
                self.topic,
                self.partition,
                info.leader,
                info.leader_epoch,
            )
            self.leader_state = None
            self._wake_changed()
        if info.leader < 0 or me not in info.replicas:
            return "offline"
        if self.follower is None:
            self.follower = FollowerState(replica_id=me, broker_epoch=self.broker_epoch)
        self.follower.broker_epoch = self.broker_epoch
        if self.follower.become_follower(info.leader, info.leader_epoch):
            return "follower"
        return None

    def _become_leader(self, info: PartitionInfo, min_isr: int, ineligible: frozenset[int]) -> None:
        log = self.log
        with log.lock:
            leo = log.log_end_offset
            cache = log.leader_epoch_cache
            latest = cache.latest_epoch
            if latest is None or info.leader_epoch > latest:
                cache.assign(info.leader_epoch, leo)
        replicas = info.replicas or (self.broker_id,)
        isr = info.isr if self.broker_id in info.isr else (self.broker_id,)
        self.leader_state = LeaderState(
            broker_id=self.broker_id,
            replicas=replicas,
            isr=isr,
            leader_epoch=info.leader_epoch,
            partition_epoch=info.partition_epoch,
            log_end_offset=leo,
            high_watermark=log.high_watermark,
            now_ms=now_ms(),
            min_insync_replicas=min_isr,
            replica_lag_time_max_ms=self.replica_lag_time_max_ms,
            leader_epoch_start_offset=leo,
        )
        self.leader_state.ineligible = ineligible
        logger.info(
            "%s-%d: leader in epoch %d at offset %d (replicas %s, ISR %s)",
            self.topic,
            self.partition,
            info.leader_epoch,
            leo,
            list(replicas),
            list(isr),
        )
        self._after_leader_change()

    def _after_leader_change(self) -> None:
        ls = self.leader_state
        if ls is not None:
            ls.maybe_advance_high_watermark()
        self._sync_high_watermark()
        self._wake_changed()

    def _sync_high_watermark(self) -> None:
        """Copy the leader's HW into the log (which clamps it) and wake consumers."""
        ls = self.leader_state
        if ls is not None and ls.high_watermark > self.log.high_watermark:
            self.log.update_high_watermark(ls.high_watermark)
            self.producer_state.on_high_watermark(self.log.high_watermark)
            self._wake_fetchers()
            self._wake_changed()

    def _require_leader(self) -> LeaderState:
        ls = self.leader_state
        if ls is None or self.closed:
            raise NotLeaderOrFollowerError(
                f"broker {self.broker_id} does not lead {self.topic}-{self.partition} (any "
                f"more); refresh metadata and send it to the leader",
                leader_id=self.info.leader if self.info.leader >= 0 else None,
            )
        return ls

    # --- ISR changes -------------------------------------------------------------------

    def maybe_shrink_isr(self) -> None:
        """The ISR expiration pass (every ``replica.lag.time.max.ms / 2``)."""
        ls = self.leader_state
        if ls is None:
            return
        request = ls.maybe_shrink_isr(now_ms())
        if request is not None:
            logger.info(
                "%s-%d: proposing ISR %s (shrink: followers lag more than %d ms)",
                self.topic,
                self.partition,
                list(request.isr),
                ls.replica_lag_time_max_ms,
            )
            self._propose(request)

    def _propose(self, request: AlterPartitionRequest) -> None:
        self._wake_changed()  # the maximal ISR changed
        if self.alter_sink is not None:
            self.alter_sink(self, request)

    def on_alter_partition_response(
        self, request: AlterPartitionRequest, response: AlterPartitionResponse
    ) -> None:
        ls = self.leader_state
        if ls is None or ls.pending is not request:
            return  # a newer leadership or proposal took over
        ls.on_alter_partition_response(response, now_ms())
        if response.error == codes.NONE:
            logger.info(
                "%s-%d: ISR now %s (partition epoch %d)",
                self.topic,
                self.partition,
                list(response.isr),
                response.partition_epoch,
            )
        else:
            logger.warning(
                "%s-%d: ISR change to %s refused: %s",
                self.topic,
                self.partition,
                list(request.isr),
                response.error,
            )
        self._after_leader_change()

    # --- append (leader) ---------------------------------------------------------------

    def _rewrites(self, config: LogConfig) -> bool:
        """Whether appends under ``config`` rewrite batches (LogAppendTime or a topic codec,
        ``produce_rewrite``); a config that does not is remembered, so the default path
        costs one identity check per append."""
        if config.rewrites_batches:
            return True
        self._plain_config = config
        return False

    def _may_block(self, nbytes: int, headers: list[BatchHeader], *, fsyncs: bool = True) -> bool:
        """Could this append fsync (flush policy; not ``fsyncs`` for a leader's append,
        whose fsync is the group commit's, after the append), roll a segment (new files; the
        old one's fsync is a flusher thread's), or copy so much into the page cache that the
        loop would stall?"""
        if nbytes >= THREAD_APPEND_BYTES:
            return True
        c = self.log.config
        if fsyncs and (c.flush_messages != MAX_LONG or c.flush_ms != MAX_LONG):
            return True
        active = self.log.segments.last
        if active is None or active.size == 0:
            return False
        if active.size + nbytes > c.segment_bytes:
            return True
        # segment.ms: measured from the first batch's timestamp (or creation), as the log does
        rolling = active.rolling_timestamp
        newest = (
            headers[0].max_timestamp if len(headers) == 1 else max(h.max_timestamp for h in headers)
        )
        waited = newest - rolling if rolling >= 0 else int(time.time() * 1000) - active.created_ms
        return waited + ROLL_MARGIN_MS > self.log.roll_ms

    async def append_as_leader(
        self, buf: bytearray, *, acks: int = 1, timeout: float = 30.0
    ) -> AppendResult:
        """Validate, deduplicate and append a request's batches; for acks=all wait until the
        ISR has them (module docstring).

        ``buf`` is rewritten in place (base offsets, leader epoch). Raises the storage and
        producer-state errors (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, OUT_OF_ORDER_SEQUENCE_NUMBER,
        INVALID_PRODUCER_EPOCH, ...) and NOT_ENOUGH_REPLICAS; nothing is appended then.
        """
        config = self.log.config
        # Header walk without CRC: the log checks CRCs during its own validation.
        headers = list(
            iter_batches(buf, max_batch_bytes=config.max_message_bytes, verify_crc=False)
        )
        if not headers:
            raise InvalidRecordError("the request holds no record batch")
        idempotent = any(h.producer_id >= 0 for h in headers)
        append_time = -1
        outcomes: list[BatchMetadata | None] | None = None
        info: AppendInfo | None = None
        async with self._append_lock:
            # records inside each batch (Kafka's LogValidator); under the lock: keeps order
            await check_produce(buf, headers, config, self.inflation_ratio)
            if config is not self._plain_config and self._rewrites(config):
                rewritten = await rewrite_produce(buf, headers, config, self.inflation_ratio)
                buf, headers = rewritten.buf, rewritten.headers
                append_time = rewritten.log_append_time
            ls = self._require_leader()
            if ls.check_append(acks) != codes.NONE:
                raise NotEnoughReplicasError(
                    f"{self.topic}-{self.partition} has {len(ls.isr)} in-sync replicas "
                    f"{sorted(ls.isr)}, fewer than min.insync.replicas="
                    f"{ls.min_insync_replicas}; an acks=all produce is refused (nothing was "
                    f"appended). Retry when the replicas catch up, or use acks=1"
                )
            if idempotent:
                outcomes = self.producer_state.analyze_batches(headers)
                if not any(o is not None for o in outcomes):
                    outcomes = None  # every batch is new: the usual append
            if outcomes is None:
                info = await self._append_locked(ls, buf, headers, idempotent)
            elif not all(o is not None for o in outcomes):
                # a retry whose first batches are here already: append only the new ones
                fresh = bytearray().join(
                    buf[h.position : h.position + h.batch_length + LOG_OVERHEAD]
                    for h, o in zip(headers, outcomes, strict=True)
                    if o is None
                )
                info = await self._append_locked(ls, fresh, list(iter_batches(fresh)), True)
        appended()  # a pipelining connection may start its next request (append_order)
        if info is not None:
            self._wake_appended()
            if info.flush_to is not None:
                await self._group_commit(info.flush_to)
        if outcomes is None:
            assert info is not None
            if acks == -1:
                await self._wait_acks(ls, info.last_offset, timeout)
            return AppendResult(
                info.first_offset,
                info.last_offset,
                info.log_start_offset,
                info.record_count,
                info.valid_bytes,
                batches=self._contiguous_outcomes(headers, info.first_offset),
                log_append_time=append_time,
            )
        result = await self._answer_with_duplicates(ls, headers, outcomes, info, acks, timeout)
        if append_time >= 0 and info is None:  # only duplicates: their original append time
            append_time = max(o.timestamp for o in outcomes if o is not None)
        result.log_append_time = append_time
        return result

    @staticmethod
    def _contiguous_outcomes(
        headers: list[BatchHeader], base: int
    ) -> list[tuple[int, int, bool]] | None:
        """Per-batch offsets of batches appended together (None for a single batch)."""
        if len(headers) == 1:
            return None
        return batch_offsets(headers, [None] * len(headers), base)

    async def _answer_with_duplicates(
        self,
        ls: LeaderState,
        headers: list[BatchHeader],
        outcomes: list[BatchMetadata | None],
        info: AppendInfo | None,
        acks: int,
        timeout: float,
    ) -> AppendResult:
        """A request some of whose batches are already in the log: each duplicate answers
        with its original offsets (from the producer state), each new batch with the offsets
        it was appended at; for acks=all only once every one of them is committed (Kafka's
        delayed produce waits for a duplicate too)."""
        batches = batch_offsets(headers, outcomes, info.first_offset if info else -1)
        c = self.log.config
        if c.flush_messages != MAX_LONG or c.flush_ms != MAX_LONG:
            # a retry may arrive while its original still waits for the group commit
            await self._group_commit(max(b[1] for b in batches) + 1)
        if acks == -1:
            await self._wait_acks(ls, max(b[1] for b in batches), timeout)
        return AppendResult(
            batches[0][0],
            batches[-1][1],
            self.log.log_start_offset,
            info.record_count if info is not None else 0,
            info.valid_bytes if info is not None else 0,
            info is None,
            batches if len(batches) > 1 else None,
        )

    async def _append_locked(
        self, ls: LeaderState, buf: bytearray, headers: list[BatchHeader], idempotent: bool
    ) -> AppendInfo:
        """The append itself, under the append lock: this leader's epoch on every batch."""
        epoch = ls.leader_epoch
        try:
            # deferred: the fsync a flush policy makes due is the group commit's, after the
            # append lock (an append under a policy no longer pays a thread hop of its own)
            # one batch: the log checks its CRC without parsing the header again
            header = headers[0] if len(headers) == 1 else None
            if self._may_block(len(buf), headers, fsyncs=False):
                info = await asyncio.to_thread(
                    self.log.append, buf, leader_epoch=epoch, defer_flush=True, header=header
                )
            else:
                info = self.log.append(buf, leader_epoch=epoch, defer_flush=True, header=header)
        except KafkaStorageError as e:
            self._storage_failed(e)
            raise
        if idempotent:
            self._update_producer_state(headers, info, buf)
        if self.leader_state is ls:
            ls.on_leader_append(self.log.log_end_offset)
            self._sync_high_watermark()
        return info

    async def _group_commit(self, end: int) -> None:
        """Return once the log is fsynced below ``end`` (module docstring, "Group
        commit"). One fsync is in flight at a time: a request it covers waits for it, a
        request appended after it started waits for the next, which starts as soon as it
        ends and covers the log end as it is then. Each request awaits a future of its own,
        released straight from the fsync's end (one hop from the worker thread to the
        loop), so a cancelled request cancels nothing but itself."""
        log = self.log
        while log.recovery_point < end:
            if log.log_end_offset < end:
                raise NotLeaderOrFollowerError(
                    f"{self.topic}-{self.partition}: the log was truncated below offset "
                    f"{end} before it was fsynced; those records were not acknowledged: retry"
                )
            if self.closed:
                raise NotLeaderOrFollowerError(
                    f"{self.topic}-{self.partition}: the log closed before the records were "
                    f"fsynced; they were not acknowledged: retry"
                )
            loop = self._running_loop()
            fut = loop.create_future()
            if self._commit_target is None:
                self._start_commit(loop, [fut])
            elif end <= self._commit_target:
                # the fsync in flight covers it: released with that fsync's own requests
                self._inflight_waiters.append(fut)
            else:
                self._next_waiters.append(fut)
            await fut

    def _start_commit(
        self, loop: asyncio.AbstractEventLoop, waiters: list[asyncio.Future[None]]
    ) -> None:
        """Start one group-commit fsync in a worker thread: everything below the log end."""
        target = self._commit_target = self.log.log_end_offset
        self._inflight_waiters = waiters  # on the loop only: the worker just hands it back
        loop.run_in_executor(None, self._commit, loop, target, waiters)

    def _commit(
        self, loop: asyncio.AbstractEventLoop, target: int, waiters: list[asyncio.Future[None]]
    ) -> None:
        """In the worker thread: the fsync, then its outcome to the loop (``_committed``);
        whatever it raises fails its requests rather than leaving them waiting."""
        error: Exception | None = None
        try:
            self.log.flush_policy_to(target)
        except Exception as e:  # handed to every request waiting on it
            error = e
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(self._committed, loop, target, waiters, error)

    def _committed(
        self,
        loop: asyncio.AbstractEventLoop,
        target: int,
        waiters: list[asyncio.Future[None]],
        error: Exception | None,
    ) -> None:
        """On the loop: release the requests the fsync covered (failing them if it failed,
        or if the partition closed before it ran) and start the next fsync for those
        waiting. A request whose records the fsync left short of the recovery point (a
        segment rolled at the target meanwhile: the log's ``_fsync_to``) is released too; it
        finds the recovery point short and waits for the next fsync."""
        log = self.log
        if isinstance(error, KafkaStorageError):
            self._storage_failed(error)
        elif error is None and self.closed and log.recovery_point < min(target, log.log_end_offset):
            error = NotLeaderOrFollowerError(  # closed meanwhile: the fsync did not happen
                f"{self.topic}-{self.partition}: the log closed before the records were "
                f"fsynced; they were not acknowledged: retry"
            )
        for fut in waiters:
            if not fut.done():
                if error is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(error)
        self._commit_target = None
        if self._next_waiters:
            waiters, self._next_waiters = self._next_waiters, []
            if error is None:
                self._start_commit(loop, waiters)
            else:  # as a failed fsync's own waiters: the log is offline
                for fut in waiters:
                    if not fut.done():
                        fut.set_exception(error)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        """The loop the partition was built in (the broker's), without asking asyncio: on
        CPython 3.11 ``get_running_loop`` costs a getpid() system call, and it runs per
        long-poll wait and per acks=all produce. A partition built outside a loop, or whose
        loop has closed (tests), asks."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return asyncio.get_running_loop()
        return loop

    async def _wait_acks(self, ls: LeaderState, last_offset: int, timeout: float) -> None:
        """acks=all: wait until the HW passes ``last_offset`` with the ISR at min ISR."""
        loop = self._running_loop()
        deadline = loop.time() + timeout
        where = f"{self.topic}-{self.partition}"
        while True:
            if self.leader_state is not ls or self.closed:
                raise NotLeaderOrFollowerError(
                    f"{where}: leadership moved while an acks=all produce waited; the records "
                    f"may or may not be committed: retry (idempotent producers do not "
                    f"duplicate)",
                    leader_id=self.info.leader if self.info.leader >= 0 else None,
                )
            status = ls.check_acks_all(last_offset)
            if status is AckStatus.COMPLETE:
                return
            if status is AckStatus.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
                raise NotEnoughReplicasAfterAppendError(
                    f"{where}: the ISR fell to {sorted(ls.maximal_isr)}, under "
                    f"min.insync.replicas={ls.min_insync_replicas}, while an acks=all "
                    f"produce waited; the records may or may not be committed: retry"
                )
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise RequestTimedOutError(
                    f"{where}: the in-sync replicas {sorted(ls.maximal_isr)} did not confirm "
                    f"offset {last_offset} within {timeout:g} s (acks=all); it may or may "
                    f"not be committed: retry"
                )
            await self._wait_changed(remaining)

    def _storage_failed(self, error: KafkaStorageError) -> None:
        if is_disk_failure(error) and self.on_disk_failure is not None:
            self.on_disk_failure(self, error)

    def _log_offline(self, error: KafkaStorageError) -> None:
        """From a flusher thread: the fsync of a rolled segment failed and the log is
        offline; the broker hears of it now (on its loop), not at the next append."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._storage_failed, error)

    def _update_producer_state(
        self, headers: list[BatchHeader], info: AppendInfo | None, buf: bytes | bytearray
    ) -> None:
        """Fold appended batches into the producer state (at the offsets the append gave
        them, or their own without ``info``); a marker ending an aborted transaction puts its
        entry in the ``.txnindex``."""
        base = info.first_offset if info is not None else None
        state = self.producer_state
        for h in headers:
            commit = None
            if h.is_control and h.producer_id >= 0:
                try:
                    commit = marker_is_commit(h, buf)
                except CorruptRecordError as e:  # in the log already: it ends nothing
                    logger.warning(
                        "%s-%d: %s; it ends no transaction", self.topic, self.partition, e
                    )
            txn = state.update(h, base_offset=base, commit=commit)
            if txn is not None:
                self._txn_ended(txn)
            if base is not None:
                base += h.last_offset_delta + 1

    def _txn_ended(self, txn: CompletedTxn) -> None:
        if txn.aborted:
            try:
                self.log.append_aborted_txn(self.producer_state.aborted_entry(txn))
            except KafkaStorageError as e:
                self._storage_failed(e)
                raise

    # --- transactions (leader) ---------------------------------------------------------

    @property
    def last_stable_offset(self) -> int:
        """The LSO: below it every transaction is decided (read_committed reads stop here);
        the high watermark when no transaction is open or awaiting its marker's
        replication."""
        return self.producer_state.last_stable_offset(self.log.high_watermark)

    def aborted_transactions(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [``start_offset``, ``upper_bound``): what a
        read_committed fetch of that range tells its client to drop."""
        return self.log.aborted_transactions(start_offset, upper_bound)

    async def write_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        *,
        timeout: float = 30.0,
    ) -> int:
        """Append the COMMIT or ABORT marker of ``producer_id``'s transaction here and wait
        until the ISR has it (as acks=all); returns the marker's offset.

        Raises NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
        REQUEST_TIMED_OUT and storage errors as a produce does, INVALID_PRODUCER_EPOCH for
        an epoch older than the producer's here, PRODUCER_FENCED for a coordinator epoch
        older than the last marker's. A retried marker after a timeout appends a second
        marker, which ends nothing (no transaction is open) and is harmless, as in Kafka.
        """
        buf = bytearray(
            encode_txn_marker(
                producer_id, producer_epoch, commit, coordinator_epoch, int(time.time() * 1000)
            )
        )
        headers = list(iter_batches(buf, verify_crc=False))
        async with self._append_lock:
            ls = self._require_leader()
            if ls.check_append(-1) != codes.NONE:
                raise NotEnoughReplicasError(
                    f"{self.topic}-{self.partition} has {len(ls.isr)} in-sync replicas "
                    f"{sorted(ls.isr)}, fewer than min.insync.replicas="
                    f"{ls.min_insync_replicas}; the transaction marker was not written: retry "
                    f"when the replicas catch up"
                )
            self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
            info = await self._append_locked(ls, buf, headers, False)
            txn = self.producer_state.update(
                headers[0],
                base_offset=info.first_offset,
                commit=commit,
                coordinator_epoch=coordinator_epoch,
            )
            if txn is not None:
                self._txn_ended(txn)
        self._wake_appended()
        if info.flush_to is not None:  # a flush policy: fsynced before it is answered
            await self._group_commit(info.flush_to)
        await self._wait_acks(ls, info.first_offset, timeout)
        return info.first_offset

    # --- replica fetches (leader) ------------------------------------------------------

    def on_replica_fetch(
        self, replica_id: int, fetch_offset: int, current_leader_epoch: int, broker_epoch: int
    ) -> None:
        """Validate a follower's fetch and record its progress (before reading)."""
        ls = self._require_leader()
        error = ls.validate_fetch(replica_id, current_leader_epoch)
        if error != codes.NONE:
            raise error_for(
                error,
                f"{self.topic}-{self.partition}: replica {replica_id} fetched in leader epoch "
                f"{current_leader_epoch}; this leader is in epoch {ls.leader_epoch}",
            )
        log = self.log
        if fetch_offset > log.log_end_offset or fetch_offset < log.log_start_offset:
            e = OffsetOutOfRangeError(
                f"replica fetch offset {fetch_offset} is outside [{log.log_start_offset}, "
                f"{log.log_end_offset}] of {self.topic}-{self.partition}"
            )
            e.details = {  # type: ignore[attr-defined]
                "log_start_offset": log.log_start_offset,
                "log_end_offset": log.log_end_offset,
            }
            raise e
        update = ls.update_follower_fetch(replica_id, fetch_offset, now_ms(), broker_epoch)
        if update.alter_partition is not None:
            logger.info(
                "%s-%d: proposing ISR %s (replica %d caught up)",
                self.topic,
                self.partition,
                list(update.alter_partition.isr),
                replica_id,
            )
            self._propose(update.alter_partition)
        if update.high_watermark_changed:
            self._sync_high_watermark()

    # --- follower ----------------------------------------------------------------------

    async def append_as_follower(
        self, buf: bytes | bytearray, fetch_offset: int, log_generation: int
    ) -> bool:
        """Append the leader's batches as they are (offsets and epochs kept), answered to a
        fetch from ``fetch_offset`` sent while the log was at ``log_generation``.

        Returns False, appending nothing, when the log moved since (a truncation, or its end
        is no longer ``fetch_offset``): the caller fetches again from the new log end.
        Storage refuses a batch that does not start at the log end (a gap) in any case.
        """
        headers = list(iter_batches(buf, verify_crc=False))
        async with self._append_lock:
            if self.leader_state is not None:
                raise NotLeaderOrFollowerError(
                    f"{self.topic}-{self.partition} is led here; a follower append is refused"
                )
            if self.log_generation != log_generation or self.log.log_end_offset != fetch_offset:
                return False
            if not headers:
                return True
            try:
                if self._may_block(len(buf), headers):
                    await asyncio.to_thread(
                        self.log.append, buf, assign_offsets=False, expected_offset=fetch_offset
                    )
                else:
                    self.log.append(buf, assign_offsets=False, expected_offset=fetch_offset)
            except KafkaStorageError as e:
                self._storage_failed(e)
                raise
            self._update_producer_state(headers, None, buf)
        self._wake_appended()
        return True

    def _log_truncated(self) -> None:
        """A truncation moved the log end back: fence every fetch answer in flight."""
        self.log_generation += 1
        self._release(self._truncated)
        self._truncated = None

    async def wait_for_truncation(self) -> None:
        """Returns when the log is next truncated (the fetcher races its fetch with it)."""
        if self._truncated is None:
            self._truncated = []
        fut = asyncio.get_running_loop().create_future()
        self._truncated.append(fut)
        try:
            await fut
        finally:
            if self._truncated is not None and fut in self._truncated:
                self._truncated.remove(fut)

    async def truncate_to(self, offset: int) -> None:
        async with self._append_lock:
            if self.leader_state is not None:
                return
            if await asyncio.to_thread(self.log.truncate_to, offset):
                self._log_truncated()
                if self.producer_state.has_transactions:
                    # a truncated marker reopens its transaction: replay the log exactly
                    state, _ = await asyncio.to_thread(self.rebuild_producer_state, self.log)
                    self.producer_state = state
                else:
                    self.producer_state.truncate_to(self.log.log_end_offset)
                logger.info("%s-%d: truncated to offset %d", self.topic, self.partition, offset)

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        async with self._append_lock:
            if self.leader_state is not None:
                return
            await asyncio.to_thread(self.log.truncate_fully_and_start_at, offset)
            self._log_truncated()
            self.producer_state.truncate_fully_and_start_at(offset)
            logger.info(
                "%s-%d: log restarted empty at offset %d", self.topic, self.partition, offset
            )

    def set_follower_high_watermark(self, leader_high_watermark: int) -> None:
        follower = self.follower
        if follower is None:
            return
        hw = follower.on_fetch_response(leader_high_watermark, self.log.log_end_offset)
        if hw > self.log.high_watermark:
            self.log.update_high_watermark(hw)
            self.producer_state.on_high_watermark(self.log.high_watermark)

    # --- read --------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        replica_id: int | None = None,
        min_one_batch: bool = True,
        read_committed: bool = False,
    ) -> FetchData:
        """Whole batches from ``offset``: consumers up to the HW (``read_committed`` ones up
        to the LSO), replicas to the log end (``min_one_batch``: the first batch even if
        over ``max_bytes``, KIP-74)."""
        if replica_id is not None:
            max_offset = None
        elif read_committed:
            max_offset = self.last_stable_offset
        else:
            max_offset = self.log.high_watermark
        return self.log.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch)

    def read_tail(
        self, offset: int, max_bytes: int, *, read_committed: bool = False
    ) -> bytes | None:
        """A consumer's read at the log end from memory (``PartitionLog.read_tail``): the
        batches just appended, if they are what ``read`` would return; else None."""
        limit = self.last_stable_offset if read_committed else self.log.high_watermark
        return self.log.read_tail(offset, max_bytes, max_offset=limit)

    # --- waiters -----------------------------------------------------------------------

    @staticmethod
    def _release(waiters: list[asyncio.Future[None]] | None) -> None:
        for fut in waiters or ():
            if not fut.done():
                fut.set_result(None)

    def _wake_fetchers(self) -> None:
        fut, self._data_arrived = self._data_arrived, None
        self._release(fut)

    def _wake_appended(self) -> None:
        fut, self._appended = self._appended, None
        self._release(fut)

    def _wake_changed(self) -> None:
        fut, self._changed = self._changed, None
        self._release(fut)

    async def _wait(self, attr: str, timeout: float) -> None:
        """Until the next wake of ``attr``, close, or ``timeout``. Each waiter awaits its own
        future, released by the wake directly (one loop turn to the waiter; ``asyncio.wait``
        on a shared future took two, on the live tail's path), and a timer of its own."""
        if self.closed or timeout <= 0:
            return
        loop = self._running_loop()
        waiters = getattr(self, attr)
        if waiters is None:
            waiters = []
            setattr(self, attr, waiters)
        fut = loop.create_future()
        waiters.append(fut)
        timer = loop.call_later(timeout, _expire, fut)
        try:
            await fut
        finally:
            timer.cancel()
            if getattr(self, attr) is waiters:
                # timed out or cancelled with no wake since: leave the list (a wake drops
                # the whole list it releases)
                with contextlib.suppress(ValueError):
                    waiters.remove(fut)

    async def wait_for_data(self, timeout: float) -> None:
        """Return when new data becomes readable (HW moved), on close, or after ``timeout``."""
        await self._wait("_data_arrived", timeout)

    async def wait_for_append(self, timeout: float) -> None:
        """Replica long poll: return when the log end offset moves, on close, or timeout."""
        await self._wait("_appended", timeout)

    async def _wait_changed(self, timeout: float) -> None:
        await self._wait("_changed", timeout)

    def wake_all(self) -> None:
        """Release every waiter (shutdown, or the partition leaves this broker)."""
        self.closed = True
        self._wake_fetchers()
        self._wake_appended()
        self._wake_changed()
        self._release(self._truncated)
        self._truncated = None
