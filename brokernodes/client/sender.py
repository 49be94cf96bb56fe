"""The producer's sender (Kafka's ``Sender``): sends sealed batches, retries, completes them.

``Sender`` is the half of ``AsyncProducer`` that does the I/O of delivery; the producer
(``producer.py``) keeps the accumulator side (``send``, sealing, flush), metadata and the
producer id, and both halves share one object's state so a record costs no extra hop.

1. The sender task wakes when a batch is sealed or lingered long enough, and takes up to
   ``MAX_BATCHES_PER_REQUEST`` sealed batches of each partition with no request out.
2. It encodes each batch once (RecordBatch v2, compressed, with producer id, epoch and base
   sequence) and sends them back to back in one request to the partition's leader: a POST,
   or one binary frame on the leader's produce stream (written in the sender's own turn).
3. Retriable failures resend the very same bytes after a jittered exponential backoff
   (refreshing metadata first when leadership may have moved), so with idempotence the
   broker answers a batch it already has with its original offsets; a request too large is
   split into one batch per request; a fatal sequence error gets a new producer id.
4. Each batch is completed from what the broker said about that batch, and its bytes are
   given back to ``buffer_memory``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from functools import partial
from typing import Any
from urllib.parse import quote

from brokernodes.client.accumulator import PartitionQueue, ProducerBatch
from brokernodes.client.http import BATCH_CONTENT_TYPE, normalize_url
from brokernodes.errors import (
    BrokerConnectionError,
    BrokerError,
    ClientTimeoutError,
    SluiceError,
    UnknownTopicError,
)
from brokernodes.records.batch import encode_batch

__all__ = ["MAX_BATCHES_PER_REQUEST", "Sender"]

log = logging.getLogger("brokernodes.client.producer")

MAX_BATCHES_PER_REQUEST = 5  # the broker's dedup window per producer and partition
MAX_SEQUENCE = (1 << 31) - 1
FATAL_SEQUENCE_CODES = frozenset({"OUT_OF_ORDER_SEQUENCE_NUMBER", "INVALID_PRODUCER_EPOCH"})
SPLIT_CODES = frozenset({"REQUEST_TOO_LARGE", "MESSAGE_TOO_LARGE"})
# Answers that mean "the leader may have moved": refresh metadata before the retry (a
# timeout too: a paused or partitioned leader answers nothing).
REFRESH_CODES = frozenset(
    {
        "NOT_LEADER_OR_FOLLOWER",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "LEADER_NOT_AVAILABLE",
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_LEADER_EPOCH",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "KAFKA_STORAGE_ERROR",  # the leader's disk failed: leadership is moving away
    }
)


class Sender:
    """The delivery methods of ``AsyncProducer`` (its base class).

    They use the producer's state: the lock, the partition queues with data, the
    configuration, the metadata (``_refresh_metadata``), the transport or produce streams,
    the producer id (``_reset_producer_id``) and the buffer accounting. ``_seal`` is the
    producer's (the accumulator side seals batches too).
    """

    def _wake(self) -> None:
        event = self._wake_event
        if event is None or event.is_set():
            return
        if not self._sync:
            event.set()
        elif not self._wake_pending:
            self._wake_pending = True
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._wake_now)

    def _wake_now(self) -> None:
        self._wake_pending = False
        assert self._wake_event is not None
        self._wake_event.set()

    async def _run_sender(self) -> None:
        wake = self._wake_event
        assert wake is not None
        while True:
            wake.clear()
            now = time.monotonic()
            if now - self._metadata_time > self.metadata_max_age_s:
                self._spawn(self._refresh_metadata_quietly())
            next_deadline, ready = self._drain(now)
            for queue, batches in ready:
                await self._start_request(queue, batches)
            if next_deadline is None:
                await wake.wait()
            else:
                timeout = max(0.0, next_deadline - time.monotonic())
                try:
                    async with asyncio.timeout(timeout):
                        await wake.wait()
                except TimeoutError:
                    pass

    def _drain(
        self, now: float
    ) -> tuple[float | None, list[tuple[PartitionQueue, list[ProducerBatch]]]]:
        """The batches of every partition with something to send and nothing in flight (now
        marked in flight), and when the sender must look again (the first linger deadline,
        or None)."""
        next_deadline: float | None = None
        linger = self.linger_s
        flushing = self._flushing > 0
        ready: list[tuple[PartitionQueue, list[ProducerBatch]]] = []
        with self._lock:
            for queue in list(self._queues_with_data):
                # Kafka's muted partition: the open batch is not sealed while the
                # partition's request is out, so the records that arrive meanwhile join one
                # batch (sealed and sent when the answer comes, or when full) instead of one
                # small batch per sender wake-up
                batch = None if queue.in_flight else queue.open
                if batch is not None and (flushing or now - batch.created >= linger):
                    self._seal(queue)
                elif batch is not None:
                    deadline = batch.created + linger
                    if next_deadline is None or deadline < next_deadline:
                        next_deadline = deadline
                if queue.in_flight or not queue.sealed:
                    if queue.open is None and not queue.sealed and not queue.in_flight:
                        self._queues_with_data.discard(queue)
                    continue
                batches = [queue.sealed.popleft()]
                size = batches[0].size
                while (
                    queue.sealed
                    and len(batches) < MAX_BATCHES_PER_REQUEST
                    and size + queue.sealed[0].size <= self.max_request_size
                ):
                    batch = queue.sealed.popleft()
                    size += batch.size
                    batches.append(batch)
                queue.in_flight = True
                ready.append((queue, batches))
        return next_deadline, ready

    async def _start_request(self, queue: PartitionQueue, batches: list[ProducerBatch]) -> None:
        """Send one partition's batches. On the WebSocket path with the leader's stream open,
        the frame is written here, in the sender's own turn, and its answer completes the
        batches from a callback: no task and no loop turn between the sender and the socket.
        Otherwise, and for every retry, a request task runs ``_deliver``."""
        stream = None
        failed = None
        if self._streams is not None and self._metadata is not None:
            leader = self._metadata.leader_url(queue.topic, queue.partition)
            stream = self._streams.get(leader) if leader is not None else None
        if stream is not None:
            try:
                body = self._body(queue, batches)
                answer = await stream.write(queue.topic, queue.partition, body)
            except Exception as exc:  # the stream broke, or a batch cannot be encoded
                failed = exc  # the request task retries or fails the batches, as for an answer
            else:
                for batch in batches:
                    batch.attempts = 1
                answer.add_done_callback(partial(self._on_answer, queue, batches))
                return
        self._spawn(self._send_request(queue, batches, failed))

    def _on_answer(
        self, queue: PartitionQueue, batches: list[ProducerBatch], answer: asyncio.Future
    ) -> None:
        """The answer to a request ``_start_request`` wrote: done, or on to the retries."""
        error = answer.exception()  # retrieved even when closed: no "never retrieved" log
        if self._closed:
            return  # close() failed the batches already
        if error is not None:
            self._spawn(self._send_request(queue, batches, error))
            return
        with self._request_ends(queue, batches, "completing"):
            self._complete_ok(batches, answer.result())

    @contextlib.contextmanager
    def _request_ends(self, queue: PartitionQueue, batches: list[ProducerBatch], doing: str):
        """Around the end of a partition's request: an unexpected error fails its batches
        (never let a batch hang), and the partition may send its next request."""
        try:
            yield
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.exception(
                "producer: unexpected error %s %s-%s", doing, queue.topic, queue.partition
            )
            self._complete_failed(batches, exc)
        finally:
            queue.in_flight = False
            self._wake()

    def _spawn(self, coro: Any) -> None:
        assert self._loop is not None
        task = self._loop.create_task(coro)
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    def _encode(self, queue: PartitionQueue, batch: ProducerBatch) -> None:
        if batch.encoded is not None:
            return
        producer_id, epoch = -1, -1
        sequence = -1
        if self.idempotent:
            producer_id, epoch = self._producer_id, self._producer_epoch
            if queue.producer_id != producer_id:
                queue.producer_id = producer_id
                queue.next_sequence = 0
            sequence = queue.next_sequence
        batch.encoded = encode_batch(
            batch.records,
            compression=self.compression,
            compression_level=self.compression_level,
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=sequence,
            is_transactional=self._transactional,
        )
        # taken only once the batch encodes: a batch that cannot leaves no sequence gap
        if self.idempotent:
            queue.next_sequence = (sequence + len(batch.records)) & MAX_SEQUENCE
        batch.producer_id = producer_id
        batch.base_sequence = sequence

    def _unencode(self, queue: PartitionQueue, batches: list[ProducerBatch]) -> None:
        """These batches were refused and will not be resent as they are: give back their
        sequence numbers (they were the partition's last) so the next batch fills the gap."""
        first = batches[0]
        if first.encoded is not None and first.producer_id == queue.producer_id >= 0:
            queue.next_sequence = first.base_sequence
        for batch in batches:
            batch.encoded = None

    async def _send_request(
        self,
        queue: PartitionQueue,
        batches: list[ProducerBatch],
        failed: BaseException | None = None,
    ) -> None:
        """Deliver ``batches`` (retrying as needed); ``failed``: how a first attempt that
        ``_start_request`` made went wrong."""
        with self._request_ends(queue, batches, "sending to"):
            await self._deliver(queue, batches, failed)

    def _body(self, queue: PartitionQueue, batches: list[ProducerBatch]) -> bytes:
        """The request body: the batches encoded (once; a retry resends the same bytes)."""
        for batch in batches:
            self._encode(queue, batch)
        return batches[0].encoded if len(batches) == 1 else b"".join(b.encoded for b in batches)

    async def _deliver(
        self,
        queue: PartitionQueue,
        batches: list[ProducerBatch],
        failed: BaseException | None = None,
    ) -> None:
        body = self._body(queue, batches)
        path = (
            f"/sluice/v1/topics/{quote(queue.topic, safe='')}/partitions/{queue.partition}/batches"
        )
        params = self._produce_params
        deadline = min(b.created for b in batches) + self.delivery_timeout_s
        attempt = 0
        hinted_leader: str | None = None  # from a NOT_LEADER_OR_FOLLOWER answer's leader_url
        while True:
            attempt += 1
            for batch in batches:
                batch.attempts = attempt
            leader = hinted_leader or (
                self._metadata.leader_url(queue.topic, queue.partition) if self._metadata else None
            )
            hinted_leader = None
            try:
                if failed is not None:
                    error, failed = failed, None
                    raise error
                if leader is None:
                    raise BrokerError(
                        "LEADER_NOT_AVAILABLE",
                        f"partition {queue.topic}-{queue.partition} has no leader in metadata",
                    )
                if self._streams is not None:
                    answer = await self._streams.send(leader, queue.topic, queue.partition, body)
                else:
                    response = await self._transport.request(
                        "POST",
                        leader + path,
                        params=params,
                        body=body,
                        content_type=BATCH_CONTENT_TYPE,
                    )
                    answer = None if response.status == 202 or self.acks == "0" else response.json()
            except (BrokerConnectionError, ClientTimeoutError, BrokerError) as exc:
                code = exc.error_code
                retriable = bool(getattr(exc, "retriable", False))
                if code == "UNKNOWN_TOPIC_OR_PARTITION":
                    retriable = True  # metadata may be ahead of this broker; checked below
                if code in SPLIT_CODES and len(batches) > 1:
                    # Send them one at a time: requeue all but the first, in order.
                    self._unencode(queue, batches)
                    with self._lock:
                        queue.sealed.extendleft(reversed(batches[1:]))
                    return await self._deliver(queue, batches[:1])
                if code in FATAL_SEQUENCE_CODES and self.idempotent:
                    self._complete_failed(batches, exc)
                    await self._reset_producer_id(exc)
                    return
                if not retriable or attempt > self.retries:
                    self._unencode(queue, batches)
                    self._complete_failed(batches, exc)
                    return
                backoff = min(self.retry_backoff_max_s, self.retry_backoff_s * 2 ** (attempt - 1))
                backoff *= random.uniform(0.8, 1.2)
                if time.monotonic() + backoff > deadline:
                    self._complete_failed(
                        batches,
                        ClientTimeoutError(
                            f"delivery to {queue.topic}-{queue.partition} timed out after "
                            f"{attempt} attempts ({self.delivery_timeout_s:g}s); last error: {exc}"
                        ),
                    )
                    return
                log.info(
                    "producer: retrying %s-%s (attempt %d) after %s",
                    queue.topic,
                    queue.partition,
                    attempt,
                    exc,
                )
                if code == "NOT_LEADER_OR_FOLLOWER" and isinstance(exc, BrokerError):
                    hint = exc.details.get("leader_url")
                    if isinstance(hint, str) and hint and normalize_url(hint) != leader:
                        hinted_leader = normalize_url(hint)
                if code in REFRESH_CODES or isinstance(
                    exc, BrokerConnectionError | ClientTimeoutError
                ):
                    await asyncio.sleep(backoff)
                    try:
                        await self._refresh_metadata()
                    except SluiceError as meta_exc:
                        log.info("producer: metadata refresh failed: %s", meta_exc)
                    if self._metadata is not None and queue.topic not in self._metadata.topics:
                        self._unencode(queue, batches)
                        self._complete_failed(batches, self._metadata_topic_error(queue.topic))
                        return
                else:
                    await asyncio.sleep(backoff)
                continue
            self._complete_ok(batches, answer)
            return

    def _metadata_topic_error(self, topic: str) -> SluiceError:
        try:
            self._metadata.topic(topic)
        except SluiceError as exc:
            return exc
        return UnknownTopicError(f"topic {topic!r} does not exist")

    def _complete_ok(self, batches: list[ProducerBatch], answer: dict[str, Any] | None) -> None:
        """``answer``: the broker's JSON answer (None for acks=0).

        Each batch is acknowledged from what the broker said about that batch: its own
        entry in ``batches`` for a request of several (a retry may find the first ones in
        the log and append the rest), the answer itself for one batch. A several-batch
        answer without per-batch entries acknowledges them only when it covers exactly
        their records and none was a duplicate; otherwise they fail (never acknowledged
        without being in the log)."""
        if answer is None:
            starts = [-1] * len(batches)
            append_time = -1
        else:
            append_time = int(answer.get("log_append_time", -1) or -1)
            starts = _batch_starts(batches, answer)
        released = 0
        for batch, start in zip(batches, starts, strict=True):
            if start is None:
                batch.fail(
                    BrokerError(
                        "UNKNOWN_SERVER_ERROR",
                        "the broker's answer does not say where this batch was written; "
                        "it is not acknowledged (it may or may not be in the log)",
                    )
                )
            else:
                batch.complete(start, append_time)
            released += batch.size
        self._release(batches, released)

    def _complete_failed(self, batches: list[ProducerBatch], error: BaseException) -> None:
        released = 0
        for batch in batches:
            batch.fail(error)
            released += batch.size
        self._release(batches, released)

    def _release(self, batches: list[ProducerBatch], released: int) -> None:
        with self._lock:
            for batch in batches:
                self._incomplete.discard(batch)
            self._buffered -= released
            if self._sync:
                self._room.notify_all()
        if self._room_async is not None:
            self._room_async.set()


def _batch_starts(batches: list[ProducerBatch], answer: dict[str, Any]) -> list[int | None]:
    """Each batch's base offset from a produce answer, or None where the answer does not
    establish it (see ``_complete_ok``)."""
    per = answer.get("batches")
    if isinstance(per, list) and len(per) == len(batches):
        starts: list[int | None] = []
        for batch, outcome in zip(batches, per, strict=True):
            try:
                base, last = int(outcome["base_offset"]), int(outcome["last_offset"])
            except (KeyError, TypeError, ValueError):
                starts.append(None)
                continue
            starts.append(base if last - base + 1 == len(batch.records) else None)
        return starts
    base = int(answer.get("base_offset", -1))
    if len(batches) == 1:
        return [base]
    last = int(answer.get("last_offset", -1))
    if answer.get("duplicate") or last - base + 1 != sum(len(b.records) for b in batches):
        return [None] * len(batches)
    starts = []
    for batch in batches:
        starts.append(base)
        base += len(batch.records)
    return starts
