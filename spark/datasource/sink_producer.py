"""The Spark sink's producer: the SDK's idempotent producer with an identity the task chose.

``FixedIdentityProducer`` is ``AsyncProducer`` with three changes, all so that a record's
sequence number is a function of its position in the task's input and nothing else:

- the producer id and epoch are given (``sink_identity.producer_id_for``), not asked of the
  broker, so every attempt of a task writes as the same producer;
- ``resume(topic, partition, sequence)`` makes a partition's first batch start at
  ``sequence`` (after what an earlier attempt appended) instead of 0;
- once a batch of a partition has failed, no later batch of that partition is encoded (the
  SDK would hand the failed batch's sequences to the next one) and a fatal sequence error
  never takes a new producer id: either would append a record under another record's
  sequence. The later batches fail too, and so does the task.

``SinkProducer`` is the blocking ``Producer`` around it (the writer runs in a plain thread),
plus ``describe`` (the broker's view of this producer on a partition).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

from brokernodes.client._loop import LoopThread
from brokernodes.client.producer import AsyncProducer, Producer
from brokernodes.errors import BrokerError, SluiceError

log = logging.getLogger("sluice.spark.sink")
FETCH_BYTES = 4 * 1024 * 1024


class FixedIdentityProducer(AsyncProducer):
    def __init__(self, url, api_key, *, producer_id: int, producer_epoch: int = 0, **config):
        super().__init__(url, api_key, enable_idempotence=True, **config)
        self._fixed_identity = (producer_id, producer_epoch)
        self._failed_partitions: set[tuple[str, int]] = set()

    async def _init_producer_id(self) -> None:
        self._producer_id, self._producer_epoch = self._fixed_identity
        self._pid_generation += 1

    async def _reset_producer_id(self, cause: BaseException) -> None:
        log.warning("sink producer %d: %s; the task fails", self._producer_id, cause)

    def _complete_failed(self, batches, error: BaseException) -> None:
        for batch in batches:
            self._failed_partitions.add((batch.topic, batch.partition))
        super()._complete_failed(batches, error)

    def _encode(self, queue, batch) -> None:
        if batch.encoded is None and (queue.topic, queue.partition) in self._failed_partitions:
            raise SluiceError(
                f"an earlier batch to {queue.topic}-{queue.partition} failed; "
                "nothing more is sent there by this task attempt"
            )
        super()._encode(queue, batch)

    def resume(self, topic: str, partition: int, next_sequence: int) -> None:
        """The partition's next batch starts at ``next_sequence`` (call before any record
        of this producer goes to it)."""
        with self._lock:
            queue = self._topics[topic].queues[partition]
            queue.producer_id = self._producer_id
            queue.next_sequence = next_sequence

    async def _leader(self, topic: str, partition: int) -> str:
        leader = self._metadata.leader_url(topic, partition) if self._metadata else None
        if leader is None:
            await self._refresh_metadata()
            leader = self._metadata.leader_url(topic, partition)
        if leader is None:
            raise BrokerError(
                "LEADER_NOT_AVAILABLE", f"{topic}-{partition} has no leader right now"
            )
        return leader + f"/sluice/v1/topics/{quote(topic, safe='')}/partitions/{partition}"

    async def describe(self, topic: str, partition: int) -> dict[str, Any]:
        """``GET .../producers/{id}`` on the partition's leader (docs/data-plane-api.md)."""
        base = await self._leader(topic, partition)
        response = await self._transport.request("GET", f"{base}/producers/{self._producer_id}")
        return response.json()

    async def fetch(self, topic: str, partition: int, offset: int) -> bytes:
        """Raw batches from ``offset`` on the partition's leader (to read one back)."""
        base = await self._leader(topic, partition)
        response = await self._transport.request(
            "GET", f"{base}/batches?offset={offset}&max_bytes={FETCH_BYTES}"
        )
        return response.body


class SinkProducer(Producer):
    """``Producer`` over a ``FixedIdentityProducer`` (same ``send``, ``flush``, ``close``)."""

    def __init__(
        self,
        url: str | list[str],
        api_key: str | None,
        *,
        producer_id: int,
        max_block_ms: float = 60_000,
        **config: Any,
    ) -> None:
        self.max_block_s = max_block_ms / 1000
        self._thread = LoopThread("sluice-spark-sink")
        try:

            async def create() -> FixedIdentityProducer:
                producer = FixedIdentityProducer(url, api_key, producer_id=producer_id, **config)
                producer._sync = True
                await producer.start()
                return producer

            self._producer = self._thread.run(create())
        except BaseException:
            self._thread.stop()
            raise
        self._closed = False
        self._sends = 0

    @property
    def producer_id(self) -> int:
        return self._producer.producer_id

    def partitions_of(self, topic: str) -> int:
        """The topic's partition count (metadata loaded on first use; UnknownTopicError)."""
        producer = self._producer
        if topic not in producer._topics:
            self._thread.run(producer._refresh_metadata(), self.max_block_s)
            if topic not in producer._topics:
                producer.metadata.topic(topic)  # raises UnknownTopicError
        return producer._topics[topic].num_partitions

    def describe(self, topic: str, partition: int) -> dict[str, Any]:
        return self._thread.run(self._producer.describe(topic, partition), self.max_block_s)

    def resume(self, topic: str, partition: int, next_sequence: int) -> None:
        self._producer.resume(topic, partition, next_sequence)

    def fetch(self, topic: str, partition: int, offset: int) -> bytes:
        return self._thread.run(self._producer.fetch(topic, partition, offset), self.max_block_s)
