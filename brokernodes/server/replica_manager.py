"""``ReplicaManager``: the partitions this broker hosts, by (log key, partition).

Opens each hosted partition's log under ``<data_dir>/<log key>-<partition>`` at start
(recovering it), routes produce and fetch to the leader ``Partition`` (or answers
NOT_LEADER_OR_FOLLOWER naming the leader), long-polls fetches, and runs the background work
(flush ticker, retention, compaction) in worker threads so the event loop never waits on
fsync or unlink. The log key is the topic name with static metadata and the ``topic_id`` with
the control plane's, so a re-created topic name never reads the old topic's data.

``reconcile(image)`` follows metadata changes: opens newly hosted partitions, passes new
leaders, epochs, replicas and log configs to the hosted ones, and closes (and deletes the
data of) partitions no longer hosted here, e.g. of a deleted topic.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time

from brokernodes.errors import (
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from brokernodes.server.config import BrokerConfig
from brokernodes.server.metadata import ClusterMetadata, MetadataSource, PartitionInfo
from brokernodes.server.partition import AppendResult, Partition
from brokernodes.storage.cleaner import LogCleaner
from brokernodes.storage.log import FetchData, TimestampOffset

logger = logging.getLogger("sluice.broker.replicas")

OPEN_CONCURRENCY = 8


class ReplicaManager:
    def __init__(self, config: BrokerConfig, metadata: MetadataSource) -> None:
        self.config = config
        self.metadata = metadata
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._tasks: list[asyncio.Task] = []
        self._cleaner = LogCleaner()
        self._reconcile_lock = asyncio.Lock()
        self.ready = False

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
        ]
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
                self.partitions[(info.log_key, info.partition)] = Partition(
                    info, log, image.broker_id, state
                )

            await asyncio.gather(
                *(open_one(info) for key, info in wanted.items() if key not in self.partitions)
            )
            for key, info in wanted.items():
                p = self.partitions[key]
                if p.info != info:
                    p.update_info(info)
                config = image.topics[info.topic].log_config
                if p.log.config != config:
                    p.log.update_config(config)
            gone = [key for key in self.partitions if key not in wanted]
            for key in gone:
                await self._remove(key)

    async def _remove(self, key: tuple[str, int]) -> None:
        """Stop hosting a partition: release its waiters, close the log, delete its data."""
        p = self.partitions.pop(key)
        p.closed = True
        p.wake_all()
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
        for p in self.partitions.values():
            p.wake_all()

        def close_all() -> None:
            for p in self.partitions.values():
                try:
                    p.log.close()
                except Exception:
                    logger.exception("closing %s-%d failed", p.topic, p.partition)

        await asyncio.to_thread(close_all)

    # --- lookup ------------------------------------------------------------------------

    def get_partition(self, topic: str, partition: int) -> Partition:
        """The partition if it exists and is hosted here; 404 or 421 otherwise.

        ``topic`` is the name the caller knows (tenant-relative with the control plane); the
        request's metadata view resolves it to the log key."""
        image = self.metadata.current()
        info = image.partition(topic, partition)  # raises UNKNOWN_TOPIC_OR_PARTITION
        p = self.partitions.get((info.log_key, partition))
        if p is not None and p.is_leader:
            return p
        if info.leader != image.broker_id:
            url = image.broker_url(info.leader)
            raise NotLeaderOrFollowerError(
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
        return await self.get_partition(topic, partition).append_as_leader(buf, acks=acks)

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
    ) -> FetchData:
        """Read whole batches from ``offset``; long-poll up to ``max_wait_ms`` for
        ``min_bytes``. Raises OFFSET_OUT_OF_RANGE with the log's bounds attached."""
        p = self.get_partition(topic, partition)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000
        while True:
            try:
                data = p.read(offset, max_bytes, replica_id=replica_id)
            except OffsetOutOfRangeError as e:
                e.details = {  # type: ignore[attr-defined]
                    "log_start_offset": p.log.log_start_offset,
                    "log_end_offset": p.log.log_end_offset,
                }
                raise
            remaining = deadline - loop.time()
            if data.size >= min_bytes or remaining <= 0 or p.closed:
                return data
            await p.wait_for_data(remaining)

    def list_offsets(self, topic: str, partition: int, timestamp: int) -> TimestampOffset:
        """Kafka's ListOffsets for consumers (bounded by the high watermark)."""
        p = self.get_partition(topic, partition)
        hw = p.log.high_watermark
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
