"""``ReplicaManager``: the partitions this broker hosts, by (log key, partition).

Opens each hosted partition's log under ``<data_dir>/<log key>-<partition>`` at start
(recovering it), routes produce and fetch to the leader ``Partition`` (or answers
NOT_LEADER_OR_FOLLOWER naming the leader), long-polls fetches, and runs the background work
(flush ticker, retention, compaction) in worker threads so the event loop never waits on
fsync or unlink. The log key is the topic name with static metadata and the ``topic_id`` with
the control plane's, so a re-created topic name never reads the old topic's data.

``reconcile(image)`` follows metadata changes: opens newly hosted partitions, passes new
leaders, epochs, replicas, ISRs and log configs to the hosted ones (become-leader /
become-follower: followers are handed to the ``ReplicaFetcherManager``), and closes (and
deletes the data of) partitions no longer hosted here, e.g. of a deleted topic.

Replication (docs/replication.md): replica fetches (``fetch(replica_id=...)``) go through
``Partition.on_replica_fetch`` and long-poll on the log end offset; the ISR expiration task
runs every ``replica.lag.time.max.ms / 2``; ISR proposals go to the controller through
``MetadataSource.alter_partition``, one in flight per partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time

from brokernodes.errors import (
    KafkaStorageError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from brokernodes.replication import errors as codes
from brokernodes.replication.leader import AlterPartitionRequest, AlterPartitionResponse
from brokernodes.server.config import BrokerConfig
from brokernodes.server.metadata.cluster import ClusterMetadata, MetadataSource, PartitionInfo
from brokernodes.server.replica.fetcher import ReplicaFetcherManager
from brokernodes.server.replica.partition import AppendResult, Partition
from brokernodes.server.replica.scrubber import find_corruption, sealed_segments
from brokernodes.storage.cleaner import LogCleaner
from brokernodes.storage.log import FetchData, TimestampOffset

logger = logging.getLogger("sluice.broker.replicas")

OPEN_CONCURRENCY = 8
HW_CHECKPOINT_INTERVAL_S = 5.0  # Kafka's replica.high.watermark.checkpoint.interval.ms


class PartitionLedElsewhereError(NotLeaderOrFollowerError):
    """``NOT_LEADER_OR_FOLLOWER`` from the lookup, before anything was appended or read: a
    broker may forward the call to the leader (``http/forward.py``). The same code raised
    later (leadership lost while an acks=all append waited) may follow an append and is
    never forwarded."""


class ReplicaManager:
    def __init__(self, config: BrokerConfig, metadata: MetadataSource) -> None:
        self.config = config
        self.metadata = metadata
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._tasks: list[asyncio.Task] = []
        self._cleaner = LogCleaner()
        self._reconcile_lock = asyncio.Lock()
        self._alters: set[asyncio.Task] = set()
        self.fetchers: ReplicaFetcherManager | None = None
        self.corrupt_batches_found = 0
        # the data directory failed (disk full, I/O error): every partition here answers
        # KAFKA_STORAGE_ERROR and the broker shuts down (Kafka halts when its last log
        # directory fails); main waits on this event
        self.log_dir_failed = asyncio.Event()
        self.ready = False

    def _fetcher_manager(self, broker_id: int) -> ReplicaFetcherManager:
        if self.fetchers is None:
            self.fetchers = ReplicaFetcherManager(
                broker_id=broker_id,
                secret=self.config.cluster_secret,
                leader_url=lambda b: self.metadata.global_image().broker_url(b),
                broker_epoch=lambda: self.metadata.broker_epoch,
                max_wait_ms=self.config.replica_fetch_wait_max_ms,
                max_bytes=self.config.replica_fetch_max_bytes,
            )
        return self.fetchers

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Open every hosted partition (in threads, a few at a time), then background work."""
        os.makedirs(self.config.data_dir, exist_ok=True)
        image = self.metadata.global_image()
        await self.reconcile(image, starting=True)
        while self.metadata.global_image() is not image:  # changed while opening
            image = self.metadata.global_image()
            await self.reconcile(image, starting=True)
        self._tasks = [
            asyncio.create_task(self._ticker(self.config.flush_interval_s, self._flush_pass)),
            asyncio.create_task(
                self._ticker(self.config.housekeeping_interval_s, self._housekeeping_pass)
            ),
            asyncio.create_task(
                self._ticker(
                    max(0.05, self.config.replica_lag_time_max_ms / 2000), self._isr_expiration
                )
            ),
            asyncio.create_task(self._ticker(HW_CHECKPOINT_INTERVAL_S, self._checkpoint_pass)),
        ]
        if self.config.scrub_interval_s > 0:
            self._tasks.append(
                asyncio.create_task(self._ticker(self.config.scrub_interval_s, self._scrub_pass))
            )
        self.ready = True

    async def reconcile(self, image: ClusterMetadata, *, starting: bool = False) -> None:
        """Make the hosted partitions match ``image`` (see the module docstring)."""
        async with self._reconcile_lock:
            if not starting and not self.ready:
                return  # start() reconciles with the newest image itself
            wanted = {(p.log_key, p.partition): p for p in image.hosted_partitions()}
            sem = asyncio.Semaphore(OPEN_CONCURRENCY)

            async def open_one(info: PartitionInfo) -> None:
                topic = image.topics[info.topic]
                directory = os.path.join(self.config.data_dir, f"{info.log_key}-{info.partition}")
                async with sem:
                    log, state = await asyncio.to_thread(
                        Partition.open_log,
                        directory,
                        info,
                        topic.log_config,
                        fsync=self.config.fsync,
                    )
                p = Partition(
                    info,
                    log,
                    image.broker_id,
                    state,
                    min_insync_replicas=image.min_insync_replicas(info.topic),
                    replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
                    broker_epoch=self.metadata.broker_epoch,
                )
                p.inflation_ratio = self.config.max_inflation_ratio
                p.alter_sink = self._send_alter_partition
                p.on_disk_failure = self._on_disk_failure
                self.partitions[(info.log_key, info.partition)] = p
                await self._follow(p, "follower" if p.follower is not None else None)

            new = [info for key, info in wanted.items() if key not in self.partitions]
            await asyncio.gather(*(open_one(info) for info in new))
            fenced = frozenset(b.id for b in image.brokers.values() if b.fenced)
            for key, info in wanted.items():
                p = self.partitions[key]
                config = image.topics[info.topic].log_config
                if p.log.config != config:
                    p.log.update_config(config)
                p.broker_epoch = self.metadata.broker_epoch
                change = p.apply_metadata(
                    info,
                    min_insync_replicas=image.min_insync_replicas(info.topic),
                    ineligible=fenced & frozenset(info.replicas),
                )
                await self._follow(p, change)
            gone = [key for key in self.partitions if key not in wanted]
            for key in gone:
                await self._remove(key)

    async def _follow(self, p: Partition, change: str | None) -> None:
        """Hand a partition to the replica fetchers (or take it away) after a role change."""
        if change is None:
            return
        manager = self._fetcher_manager(p.broker_id)
        if change == "follower":
            await manager.follow(p)
        else:
            await manager.unfollow(p)

    async def _remove(self, key: tuple[str, int]) -> None:
        """Stop hosting a partition: release its waiters, close the log, delete its data."""
        p = self.partitions.pop(key)
        p.closed = True
        p.wake_all()
        if self.fetchers is not None:
            await self.fetchers.unfollow(p)
        directory = os.path.join(self.config.data_dir, f"{key[0]}-{key[1]}")

        def close_and_delete() -> None:
            try:
                p.log.close()
            finally:
                trash = f"{directory}.deleted"
                if os.path.isdir(directory):
                    os.replace(directory, trash)
                    shutil.rmtree(trash, ignore_errors=True)

        await asyncio.to_thread(close_and_delete)
        logger.info("stopped hosting %s-%d; its data is deleted", key[0], key[1])

    async def close(self) -> None:
        """Stop background work, release long polls, close every log (flush + marker)."""
        self.ready = False
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self.fetchers is not None:
            await self.fetchers.close()
        for t in list(self._alters):
            t.cancel()
        for p in self.partitions.values():
            p.wake_all()

        failed = self.log_dir_failed.is_set()

        def close_all() -> None:
            for p in self.partitions.values():
                try:
                    if failed:  # no clean-shutdown marker: recovery checks it all next time
                        p.log.close_without_flush()
                    else:
                        p.checkpoint_high_watermark()
                        p.log.close()
                except Exception:
                    logger.exception("closing %s-%d failed", p.topic, p.partition)

        await asyncio.to_thread(close_all)

    # --- lookup ------------------------------------------------------------------------

    def get_partition(self, topic: str, partition: int) -> Partition:
        """The partition if it exists and is hosted here; 404 or 421 otherwise.

        ``topic`` is the name the caller knows (tenant-relative with the control plane); the
        request's metadata view resolves it to the log key."""
        if self.log_dir_failed.is_set():
            raise KafkaStorageError(
                f"the log directory of broker {self.metadata.global_image().broker_id} failed "
                f"(disk full or I/O error); it is shutting down: retry on the new leader"
            )
        image = self.metadata.current()
        info = image.partition(topic, partition)  # raises UNKNOWN_TOPIC_OR_PARTITION
        p = self.partitions.get((info.log_key, partition))
        if p is not None and p.is_leader:
            return p
        if info.leader != image.broker_id:
            url = image.broker_url(info.leader)
            raise PartitionLedElsewhereError(
                f"broker {image.broker_id} does not lead {topic}-{partition}; "
                + (f"send it to broker {info.leader} at {url}" if url else "no leader is known"),
                leader_id=info.leader if info.leader >= 0 else None,
                leader_url=url,
            )
        raise UnknownTopicOrPartitionError(
            f"{topic}-{partition} is not loaded on this broker yet; retry shortly"
        )

    # --- produce -----------------------------------------------------------------------

    async def append(
        self, topic: str, partition: int, buf: bytearray, *, acks: int = 1
    ) -> AppendResult:
        return await self.get_partition(topic, partition).append_as_leader(
            buf, acks=acks, timeout=self.config.acks_all_timeout_s
        )

    # --- fetch -------------------------------------------------------------------------

    async def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        replica_id: int | None = None,
        current_leader_epoch: int = -1,
        broker_epoch: int = -1,
        min_one_batch: bool = True,
        read_committed: bool = False,
    ) -> FetchData:
        """Read whole batches from ``offset``; long-poll up to ``max_wait_ms`` for
        ``min_bytes``. Raises OFFSET_OUT_OF_RANGE with the log's bounds attached.
        ``min_one_batch`` (consumers): the first batch even if over ``max_bytes`` (a Kafka
        fetch of several partitions grants it to the first partition with data only).
        ``read_committed`` consumers read below the last stable offset only.

        A replica fetch (``replica_id``) is validated and recorded first (its offset is the
        follower's log end offset: HW and ISR follow), reads past the HW and long-polls on
        the log end offset."""
        p = self.get_partition(topic, partition)
        # no loop lookup without a wait (3.11's get_running_loop makes a getpid syscall)
        loop = asyncio.get_running_loop() if max_wait_ms > 0 else None
        deadline = loop.time() + max_wait_ms / 1000 if loop is not None else 0.0
        if replica_id is not None:
            p.on_replica_fetch(replica_id, offset, current_leader_epoch, broker_epoch)
            while True:
                data = p.read(offset, max_bytes, replica_id=replica_id)
                remaining = deadline - loop.time() if loop is not None else 0.0
                if data.size > 0 or remaining <= 0 or p.closed or not p.is_leader:
                    return data
                await p.wait_for_append(remaining)
                if p.closed:  # released by close: the log may be closed already
                    return data
        while True:
            try:
                data = p.read(
                    offset, max_bytes, min_one_batch=min_one_batch, read_committed=read_committed
                )
            except OffsetOutOfRangeError as e:
                e.details = {  # type: ignore[attr-defined]
                    "log_start_offset": p.log.log_start_offset,
                    "log_end_offset": p.log.log_end_offset,
                }
                raise
            remaining = deadline - loop.time() if loop is not None else 0.0
            if data.size >= min_bytes or remaining <= 0 or p.closed:
                return data
            await p.wait_for_data(remaining)
            if p.closed:  # released by close: the log may be closed already
                return data

    def list_offsets(
        self, topic: str, partition: int, timestamp: int, *, read_committed: bool = False
    ) -> TimestampOffset:
        """Kafka's ListOffsets for consumers (bounded by the high watermark, or by the last
        stable offset for read_committed: latest is then the LSO)."""
        p = self.get_partition(topic, partition)
        hw = p.last_stable_offset if read_committed else p.log.high_watermark
        found = p.log.offset_for_timestamp(timestamp, max_offset=hw)
        return found if found is not None else TimestampOffset(-1, hw)

    # --- background work ---------------------------------------------------------------

    async def _ticker(self, interval: float, work) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await work()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("background pass %s failed", work.__name__)

    # --- replication -------------------------------------------------------------------

    def _on_disk_failure(self, p: Partition, error: BaseException) -> None:
        if self.log_dir_failed.is_set():
            return
        logger.critical(
            "log directory %s failed writing %s-%d (%s): every partition here goes offline "
            "and the broker shuts down",
            self.config.data_dir,
            p.topic,
            p.partition,
            error,
        )
        self.log_dir_failed.set()
        for q in self.partitions.values():
            q.wake_all()  # waiting produces and fetches answer now

    async def _isr_expiration(self) -> None:
        for p in list(self.partitions.values()):
            if p.is_leader and not p.closed:
                p.maybe_shrink_isr()

    async def _scrub_pass(self) -> None:
        """Verify the sealed segments of followed partitions; re-fetch from a bad batch on
        (``scrubber``). A leader's corruption is logged only."""
        for p in list(self.partitions.values()):
            if p.closed:
                continue
            for path, base, size in sealed_segments(p.log):
                try:
                    bad = await asyncio.to_thread(find_corruption, path, base, size)
                except FileNotFoundError:
                    continue  # retention or a roll raced the scan
                if bad is None:
                    continue
                # confirm against the current segment (a truncation may have raced the read)
                if (path, base, size) not in sealed_segments(p.log):
                    continue
                bad = await asyncio.to_thread(find_corruption, path, base, size)
                if bad is None:
                    continue
                position, offset = bad
                if p.follower is None:
                    logger.error(
                        "%s-%d: corrupt batch at byte %d of %s, and this broker leads it: "
                        "nothing to re-fetch from (consumers verify CRCs and refuse it)",
                        p.topic,
                        p.partition,
                        position,
                        path,
                    )
                    break
                logger.error(
                    "%s-%d: corrupt batch at byte %d of %s: truncating to offset %d and "
                    "fetching the rest from the leader again",
                    p.topic,
                    p.partition,
                    position,
                    path,
                    offset,
                )
                self.corrupt_batches_found += 1
                await p.truncate_to(offset)
                break

    def _send_alter_partition(self, p: Partition, request: AlterPartitionRequest) -> None:
        task = asyncio.create_task(self._alter_partition(p, request))
        self._alters.add(task)
        task.add_done_callback(self._alters.discard)

    async def _alter_partition(self, p: Partition, request: AlterPartitionRequest) -> None:
        try:
            response = await self.metadata.alter_partition(p.info, request)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            logger.warning(
                "%s-%d: AlterPartition failed (%s); proposing again later",
                p.topic,
                p.partition,
                e,
            )
            await asyncio.sleep(0.2)  # let the controller recover before the next proposal
            response = AlterPartitionResponse(error=codes.OPERATION_NOT_ATTEMPTED)
        p.on_alter_partition_response(request, response)

    async def _checkpoint_pass(self) -> None:
        """Persist the high watermarks that moved (``hw_checkpoint``)."""
        due = [
            p
            for p in self.partitions.values()
            if not p.closed and p.log.high_watermark != p.checkpointed_hw
        ]
        if not due:
            return

        def write() -> None:
            for p in due:
                try:
                    p.checkpoint_high_watermark()
                except (OSError, KafkaStorageError) as e:  # e.g. the partition was deleted
                    logger.warning("%s-%d: HW checkpoint failed: %s", p.topic, p.partition, e)

        await asyncio.to_thread(write)

    async def _flush_pass(self) -> None:
        """The flush.ms ticker (only partitions with a finite flush.ms do anything)."""
        due = [p for p in self.partitions.values() if p.log.config.flush_ms < 2**62]
        if due:
            await asyncio.to_thread(lambda: [p.log.maybe_flush() for p in due])

    async def _housekeeping_pass(self) -> None:
        """Retention (delete) and compaction, one partition at a time in a thread."""
        now_ms = int(time.time() * 1000)
        for p in list(self.partitions.values()):
            if p.closed:
                return
            p.producer_state.remove_expired_producers(now_ms)
            started = time.monotonic()
            config = p.log.config
            if config.delete_enabled:
                removed = await asyncio.to_thread(p.log.apply_retention)
                if removed:
                    p.producer_state.on_log_start_advanced(p.log.log_start_offset)
            if config.compact_enabled:
                await asyncio.to_thread(self._cleaner.clean, p.log)
            elapsed = time.monotonic() - started
            if elapsed > 1:
                logger.info("housekeeping %s-%d took %.1f s", p.topic, p.partition, elapsed)
