"""``Broker``: one broker node's state, shared by every HTTP and WebSocket handler.

It owns the metadata source, the replica manager (partitions), the producer id allocator,
the metrics registry and the keyless-record partitioners, and offers the operations handlers
share (``authorize``, ``produce_entries``). The aiohttp app is built by ``app.build_app``
from the route handlers in ``http/`` and ``ws/``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from brokernodes.errors import SluiceError, UnknownTopicOrPartitionError
from brokernodes.records.batch import Record, encode_batch
from brokernodes.records.partitioner import StickyPartitioner, partition_for_key
from brokernodes.server.auth import DecisionCache, Principal, authorize, current_client_host
from brokernodes.server.config import BrokerConfig
from brokernodes.server.connections import ConnectionQuotas, current_connection
from brokernodes.server.coordinator.group_coordinator import GroupCoordinator
from brokernodes.server.key_use import KeyUseLog
from brokernodes.server.metadata.cluster import (
    ClusterMetadata,
    MetadataSource,
    TopicInfo,
    current_tenant,
)
from brokernodes.server.metrics import BrokerMetrics
from brokernodes.server.operator import operator_principal
from brokernodes.server.producer_ids import ProducerIdManager
from brokernodes.server.protocol.json_records import ProduceEntry
from brokernodes.server.replica.manager import ReplicaManager
from brokernodes.server.replica.partition import AppendResult, Partition
from brokernodes.server.throttle import QuotaEnforcer, tenant_stored_bytes
from brokernodes.server.transactions.coordinator import TransactionCoordinator
from brokernodes.server.usage import UsageMeter
from brokernodes.server.ws_registry import WebSocketRegistry

CLOSE_STEP_TIMEOUT_S = 5.0
logger = logging.getLogger("sluice.broker")


@dataclass(slots=True)
class EntryResult:
    """The outcome of one JSON-produced record: an offset or an error."""

    entry: ProduceEntry
    partition: int | None = None
    offset: int | None = None
    timestamp: int = -1
    error: SluiceError | None = None


class Broker:
    def __init__(self, config: BrokerConfig, metadata: MetadataSource) -> None:
        self.config = config
        self.metadata = metadata
        self._decisions = DecisionCache()  # authorizations made against the current image
        self.replicas = ReplicaManager(config, metadata)
        self.metrics = BrokerMetrics()
        # per tenant/principal/topic usage, appended to __usage (docs/analytics.md)
        self.usage = self.metrics.usage = UsageMeter(
            metadata.global_image, self.replicas.append, cluster_secret=config.cluster_secret
        )
        # quotas from the metadata (tenant views): rate throttling and storage refusals
        self.quotas = QuotaEnforcer(
            metadata.global_image,
            tenant_stored_bytes(metadata.global_image, self.replicas.partitions),
            self.metrics,
        )
        self.connection_quotas = ConnectionQuotas(self.quotas.refresh)
        # open WebSocket streams by API key: close_all on shutdown, close_key on revocation
        self.websockets = WebSocketRegistry()
        # consumer groups coordinated here (docs/consumer-groups.md)
        self.groups = GroupCoordinator(metadata, self.replicas)
        self._producer_ids: ProducerIdManager | None = None
        # transactions coordinated here (docs/transactions.md)
        self.transactions = TransactionCoordinator(
            metadata, self.replicas, self.groups, self.init_producer_id, config.cluster_secret
        )
        self._sticky: dict[str, StickyPartitioner] = defaultdict(StickyPartitioner)
        # topic id -> (the TopicInfo it was computed from, partitions this broker leads)
        self._led: dict[str, tuple[TopicInfo, list[int]]] = {}
        self._producer_id_lock = asyncio.Lock()
        self.started_at = time.time()
        # keys used here, sent with heartbeats for the control plane's "last used"
        self.key_use = KeyUseLog()
        self.stopping = False

    @property
    def image(self) -> ClusterMetadata:
        return self.metadata.current()

    @property
    def ready(self) -> bool:
        return self.replicas.ready and not self.stopping

    async def start(self) -> None:
        image = self.image
        self._producer_ids = await asyncio.to_thread(
            ProducerIdManager, self.config.data_dir, image.broker_id
        )
        await self.replicas.start()
        await self.groups.start()
        await self.transactions.start()
        self.usage.start()

    async def close(self) -> None:
        """Stop the coordinator and the usage meter (each bounded: a final write waiting on
        replicas that are stopping too must not keep the process), then close the logs with
        their clean-shutdown markers."""
        self.stopping = True
        for name, step in (
            ("transaction coordinator", self.transactions.close),
            ("group coordinator", self.groups.close),
            ("usage", self.usage.close),
        ):
            try:
                await asyncio.wait_for(step(), CLOSE_STEP_TIMEOUT_S)
            except TimeoutError:
                logger.warning("%s did not close within %g s; going on", name, CLOSE_STEP_TIMEOUT_S)
        await self.replicas.close()

    # --- auth --------------------------------------------------------------------------

    def authorize(
        self,
        authorization: str | None,
        operation: str,
        resource_type: str = "cluster",
        resource_name: str = "",
        *,
        count: bool = True,
    ) -> Principal:
        """The single authorization choke point (see ``auth.authorize``). ``count=False``
        checks without metering a request: for probes inside one request (which of these
        topics may the caller see, which operations may it perform). A decision already
        made against the current global image is reused (``auth.DecisionCache``); the
        connection quota, key use and usage metering run for every request all the same."""
        image = self.metadata.global_image()
        key = (authorization, operation, resource_type, resource_name, current_client_host.get())
        decided = self._decisions.get(image, key)
        if decided is not None:
            principal, tenant = decided
            current_tenant.set(tenant)
        else:
            principal = operator_principal(
                self.config.cluster_secret,
                authorization,
                operation,
                resource_type,
                resource_name,
                image,
            ) or authorize(self.image, authorization, operation, resource_type, resource_name)
            self._decisions.put(key, principal, current_tenant.get())
        self.connection_quotas.admit(current_connection.get(), principal)
        self.key_use.note(principal.key_id)
        if count:
            self.usage.on_request(principal, resource_type, resource_name)
        return principal

    # --- producer ids ------------------------------------------------------------------

    async def init_producer_id(self) -> tuple[int, int]:
        """A fresh (producer id, epoch 0)."""
        assert self._producer_ids is not None
        async with self._producer_id_lock:
            ids = self._producer_ids
            pid = await asyncio.to_thread(ids.next_id) if ids.needs_io() else ids.next_id()
        return pid, 0

    # --- JSON produce ------------------------------------------------------------------

    def choose_partition(self, topic: TopicInfo, entry: ProduceEntry) -> int:
        """Explicit partition, else murmur2 of the key, else the topic's sticky partition
        among the partitions this broker leads."""
        n = len(topic.partitions)
        if entry.partition is not None:
            if entry.partition >= n:
                raise UnknownTopicOrPartitionError(
                    f"topic {topic.name!r} has partitions 0..{n - 1}; there is no partition "
                    f"{entry.partition}"
                )
            return entry.partition
        if entry.key is not None:
            return partition_for_key(entry.key, n)
        return self._sticky[topic.topic_id].partition(None, n, self._led_partitions(topic) or None)

    def _led_partitions(self, topic: TopicInfo) -> list[int]:
        """The partitions of ``topic`` this broker leads, computed once per metadata image's
        ``TopicInfo`` (not once per keyless record)."""
        cached = self._led.get(topic.topic_id)
        if cached is not None and cached[0] is topic:
            return cached[1]
        broker_id = self.image.broker_id
        led = [p.partition for p in topic.partitions if p.leader == broker_id]
        self._led[topic.topic_id] = (topic, led)
        return led

    async def produce_entries(
        self, topic_name: str, entries: Sequence[ProduceEntry], *, acks: int = 1
    ) -> list[EntryResult]:
        """Append JSON-produced records: one batch (one append) per partition, partitions
        in parallel. Errors are per partition; nothing raises except a bad topic."""
        topic = self.image.topic(topic_name)
        by_partition: dict[int, list[EntryResult]] = defaultdict(list)
        results: list[EntryResult] = []
        for entry in entries:
            result = EntryResult(entry)
            results.append(result)
            try:
                result.partition = self.choose_partition(topic, entry)
            except SluiceError as e:
                result.error = e
                continue
            by_partition[result.partition].append(result)
        codec = topic.log_config.compression_codec or 0  # producer: the batch as built
        if len(by_partition) == 1:  # the common case: no task per partition to gather
            ((p, rs),) = by_partition.items()
            await self._append_entries(topic_name, p, rs, acks, codec)
        elif by_partition:
            await asyncio.gather(
                *(
                    self._append_entries(topic_name, p, rs, acks, codec)
                    for p, rs in by_partition.items()
                )
            )
        sticky = self._sticky.get(topic.topic_id)
        if sticky is not None and sticky.sticky_partition is not None:
            led = self._led_partitions(topic) or None
            sticky.on_new_batch(sticky.sticky_partition, len(topic.partitions), led)
        return results

    async def append_batches(
        self,
        principal: Principal | None,
        partition: Partition,
        topic: str,
        batches: bytearray,
        *,
        acks: int,
        timeout: float | None = None,
    ) -> AppendResult:
        """A binary produce (an HTTP body, a WebSocket frame or a Kafka Produce partition):
        the storage quota, the leader append, and the bytes-in counters for what was newly
        appended. ``timeout`` (an acks=all wait, e.g. a Kafka request's ``timeout_ms``) is
        capped at the broker's ``acks_all_timeout_s``."""
        self.quotas.check_storage(principal)
        limit = self.config.acks_all_timeout_s
        result = await partition.append_as_leader(
            batches, acks=acks, timeout=limit if timeout is None else min(timeout, limit)
        )
        if not result.duplicate:
            self.metrics.record_in(topic, result.bytes, result.record_count)
        return result

    async def _append_entries(
        self, topic: str, partition: int, results: list[EntryResult], acks: int, codec: int
    ) -> None:
        """One batch of JSON records in the topic's codec; on a LogAppendTime topic each
        record's answered timestamp is the append time."""
        now = int(time.time() * 1000)
        records = []
        for r in results:
            e = r.entry
            r.timestamp = now if e.timestamp is None else e.timestamp
            records.append(Record(r.timestamp, e.key, e.value, e.headers))
        try:
            batch = bytearray(encode_batch(records, compression=codec))
            appended = await self.replicas.append(topic, partition, batch, acks=acks)
        except SluiceError as e:
            for r in results:
                r.error = e
            return
        self.metrics.record_in(topic, appended.bytes, appended.record_count)
        append_time = appended.log_append_time
        for i, r in enumerate(results):
            r.offset = appended.base_offset + i
            if append_time >= 0:
                r.timestamp = append_time
