"""The Sluice producer: ``AsyncProducer`` on an event loop, ``Producer`` for plain threads.

This module is the accumulator side (steps 1-2: ``send``, sealing, ``flush``), metadata and
the producer id; steps 3-4 are the sender's (``sender.py``, a base class of
``AsyncProducer``), the batches and futures are ``accumulator.py``'s.

How a record travels (Kafka's producer, over the binary HTTP produce path):

1. ``send`` picks the partition (murmur2 of the key, KIP-480 sticky without one), appends a
   ``(timestamp, key, value, headers, None)`` tuple to the partition's open batch (no lock on
   the producer's own loop) and returns a ``RecordFuture``. No I/O,
   no per-record asyncio future.
2. A batch is sealed when the next record would take it over ``batch_size`` bytes, or when
   it is ``linger_ms`` old, or on ``flush``; while the partition's request is out it stays
   open (records arriving meanwhile join it) and is sealed when the answer comes.
3. The sender task takes up to ``MAX_BATCHES_PER_REQUEST`` sealed batches of a partition,
   encodes each once (RecordBatch v2, compressed, with producer id, epoch and base sequence)
   and POSTs them back to back in one request to the partition's leader. One request per
   partition is in flight at a time, which keeps a partition's batches in order over HTTP's
   several connections; up to ``max_in_flight`` requests (to different partitions) run at
   once per broker. With ``produce_mode="websocket"`` the same bytes go as one binary frame
   on an open produce stream per broker (``produce_stream``) instead of a POST: the
   lowest-latency path (the sender writes the frame in its own turn and the answer completes
   the batches from a callback), and the retries below are the same.
4. Retriable failures (no connection, timeouts, 5xx, NOT_ENOUGH_REPLICAS; and after a
   metadata refresh NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH: leadership moved) resend
   the very same bytes after a backoff, so with idempotence the
   broker answers a batch it already has with its original offsets instead of appending it
   twice. The broker remembers a producer's last 5 batches per partition; a request never
   holds more, and nothing else of that partition is in flight meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

from brokernodes.client._loop import LoopThread
from brokernodes.client.accumulator import (
    RECORD_OVERHEAD,
    PartitionQueue,
    ProducerBatch,
    RecordFuture,
    RecordMetadata,
)
from brokernodes.client.http import HttpTransport
from brokernodes.client.metadata import ClusterMetadata, bootstrap_urls, fetch_metadata
from brokernodes.client.partitioner import StickyPartitioner, murmur2
from brokernodes.client.produce_stream import ProduceStreams
from brokernodes.client.sender import Sender
from brokernodes.errors import (
    BrokerConnectionError,
    BufferFullError,
    ClientClosedError,
    ClientTimeoutError,
    SluiceError,
    UnknownTopicError,
)
from brokernodes.records.compression import Compression

__all__ = ["AsyncProducer", "Producer", "RecordFuture", "RecordMetadata"]

log = logging.getLogger("brokernodes.client.producer")

PRODUCER_IDS_PATH = "/sluice/v1/producer-ids"
PRODUCE_MODES = ("http", "websocket")
KEY_CACHE_SIZE = 65536
GIL_YIELD_EVERY = 1023  # Producer.send yields the GIL once per 1024 records (a mask)

_new_future = partial(tuple.__new__, RecordFuture)  # skips a Python-level __init__
_time_ns = time.time_ns


def parse_acks(acks: int | str) -> str:
    value = str(acks).strip().lower()
    if value in ("-1", "all"):
        return "all"
    if value in ("0", "1"):
        return value
    raise ValueError(f"acks must be 0, 1 or all, not {acks!r}")


def parse_compression(compression: str | int | Compression | None) -> Compression:
    if compression is None:
        return Compression.NONE
    if isinstance(compression, str):
        try:
            return Compression[compression.strip().upper()]
        except KeyError:
            raise ValueError(
                f"compression must be one of none, gzip, snappy, lz4, zstd, not {compression!r}"
            ) from None
    return Compression(compression)


def _to_bytes(value: Any, what: str) -> bytes | None:
    if value is None or type(value) is bytes:
        return value
    if type(value) is str:
        return value.encode()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"{what} must be bytes, str or None, not {type(value).__name__}")


def _headers(headers: Mapping | Iterable | None) -> tuple:
    if not headers:
        return ()
    items = headers.items() if isinstance(headers, Mapping) else headers
    return tuple((str(k), _to_bytes(v, "a header value")) for k, v in items)


class _TopicState:
    __slots__ = ("key_queues", "num_partitions", "queues", "sticky")

    def __init__(self, name: str, num_partitions: int) -> None:
        self.num_partitions = num_partitions
        # key -> its partition's queue: murmur2 is ~1.5 us a key
        self.key_queues: dict[bytes, PartitionQueue] = {}
        self.sticky = StickyPartitioner()
        self.queues = [PartitionQueue(name, p) for p in range(num_partitions)]

    def resize(self, name: str, num_partitions: int) -> None:
        if num_partitions > len(self.queues):
            self.queues.extend(
                PartitionQueue(name, p) for p in range(len(self.queues), num_partitions)
            )
        self.num_partitions = num_partitions
        self.key_queues = {}


class AsyncProducer(Sender):
    """Asynchronous producer. Use ``async with AsyncProducer(url, api_key=...) as p:`` or
    ``await p.start()`` / ``await p.close()``.

    ``send`` never blocks: it returns a ``RecordFuture`` (``await`` it for the
    ``RecordMetadata``) and raises ``BufferFullError`` when ``buffer_memory`` bytes are
    already waiting; ``await produce(...)`` is ``send`` that waits for room instead.
    """

    def __init__(
        self,
        url: str | list[str],
        api_key: str | None = None,
        *,
        acks: int | str = 1,
        compression: str | int | None = "none",
        compression_level: int | None = None,
        batch_size: int = 16384,
        linger_ms: float = 5,
        max_in_flight: int = 5,
        enable_idempotence: bool | None = None,
        retries: int = 2**31 - 1,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 1000,
        delivery_timeout_ms: float = 120_000,
        request_timeout_ms: float = 30_000,
        max_request_size: int = 1_048_576,
        buffer_memory: int = 32 * 1024 * 1024,
        metadata_max_age_ms: float = 300_000,
        produce_mode: str = "http",
        transport: HttpTransport | None = None,
    ) -> None:
        self._urls = bootstrap_urls(url)
        self.acks = parse_acks(acks)
        self.compression = parse_compression(compression)
        self.compression_level = compression_level
        if enable_idempotence is None:
            enable_idempotence = self.acks != "0"
        elif enable_idempotence and self.acks == "0":
            raise ValueError("enable_idempotence needs acks=1 or acks=all, not acks=0")
        self.idempotent = enable_idempotence
        if produce_mode not in PRODUCE_MODES:
            raise ValueError(
                f"produce_mode must be one of {', '.join(PRODUCE_MODES)}, not {produce_mode!r}"
            )
        if produce_mode == "websocket" and self.acks == "0":
            raise ValueError(
                "produce_mode='websocket' needs acks=1 or acks=all (its answers are the "
                "acknowledgements); use produce_mode='http' for acks=0"
            )
        self.produce_mode = produce_mode
        if batch_size <= 0 or max_in_flight <= 0:
            raise ValueError("batch_size and max_in_flight must be positive")
        self.batch_size = batch_size
        self.linger_s = max(0.0, linger_ms / 1000)
        self.max_in_flight = max_in_flight
        self.retries = retries
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.retry_backoff_max_s = max(retry_backoff_ms, retry_backoff_max_ms) / 1000
        self.delivery_timeout_s = delivery_timeout_ms / 1000
        self.request_timeout_s = request_timeout_ms / 1000
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory
        self.metadata_max_age_s = metadata_max_age_ms / 1000
        # the binary produce's query; a transactional producer adds its transactional_id
        self._produce_params: dict[str, str] = {"acks": self.acks}
        self._transactional = False  # batches carry the transactional bit (transactional.py)
        self._transport = transport or HttpTransport(
            api_key,
            max_connections_per_host=max_in_flight,
            request_timeout_s=self.request_timeout_s,
        )
        self._owns_transport = transport is None
        self._streams = (
            ProduceStreams(self._transport, self.acks, self.request_timeout_s)
            if produce_mode == "websocket"
            else None
        )

        self._lock = threading.Lock()
        self._sync = False  # set by Producer: batches get a threading.Event, wakeups cross threads
        self._topics: dict[str, _TopicState] = {}
        self._queues_with_data: set[PartitionQueue] = set()
        self._incomplete: set[ProducerBatch] = set()
        self._buffered = 0
        self._room = threading.Condition(self._lock)  # Producer.send waits on it when full
        self._room_async: asyncio.Event | None = None
        self._flushing = 0
        self._metadata: ClusterMetadata | None = None
        self._metadata_time = 0.0
        self._metadata_refresh: asyncio.Future | None = None
        self._producer_id = -1
        self._producer_epoch = -1
        self._pid_generation = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake_event: asyncio.Event | None = None
        self._wake_pending = False
        self._sender: asyncio.Task | None = None
        self._requests: set[asyncio.Task] = set()
        self._started = False
        self._closed = False
        self._running = False  # started and not closed: send may take the fast path

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Fetch metadata and (with idempotence) a producer id; start the sender."""
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        self._wake_event = asyncio.Event()
        self._room_async = asyncio.Event()
        try:
            await self._refresh_metadata()
            if self.idempotent:
                await self._init_producer_id()
        except BaseException:
            await self._close_transport()
            raise
        self._sender = self._loop.create_task(self._run_sender(), name="sluice-producer-sender")
        self._started = True
        self._running = True

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self, timeout: float | None = None) -> None:
        """Deliver what is buffered (up to ``timeout`` seconds), then stop."""
        if self._closed:
            return
        if self._started:
            try:
                await self.flush(timeout)
            except ClientTimeoutError:
                log.warning("close: records still undelivered after %ss; failing them", timeout)
        self._closed = True
        self._running = False
        if self._sender is not None:
            self._sender.cancel()
            await asyncio.gather(self._sender, return_exceptions=True)
        for task in list(self._requests):
            task.cancel()
        await asyncio.gather(*self._requests, return_exceptions=True)
        error = ClientClosedError("the producer was closed before the record was delivered")
        with self._lock:
            batches = list(self._incomplete)
            self._incomplete.clear()
        for batch in batches:
            batch.fail(error)
        await self._close_transport()

    async def _close_transport(self) -> None:
        if self._streams is not None:
            await self._streams.close()
        if self._owns_transport:
            await self._transport.close()

    @property
    def metadata(self) -> ClusterMetadata | None:
        return self._metadata

    @property
    def producer_id(self) -> int:
        return self._producer_id

    @property
    def buffered_bytes(self) -> int:
        return self._buffered

    # --- send ------------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        headers: Mapping[str, bytes | str | None]
        | Iterable[tuple[str, bytes | str | None]]
        | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        on_delivery: Callable[[BaseException | None, RecordMetadata | None], Any] | None = None,
    ) -> RecordFuture:
        """Queue one record; returns its ``RecordFuture`` at once.

        ``timestamp`` is epoch milliseconds (default: now). ``on_delivery(error, metadata)``
        runs on the producer's event loop once the record is acknowledged or has failed.
        """
        if type(value) is not bytes and value is not None:
            value = _to_bytes(value, "value")
        if type(key) is not bytes and key is not None:
            key = _to_bytes(key, "key")
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        if headers:
            headers = _headers(headers)
            size = RECORD_OVERHEAD + sum(len(k) + (len(v) if v else 0) + 4 for k, v in headers)
        else:
            headers = ()
            size = RECORD_OVERHEAD
        if key is not None:
            size += len(key)
        if value is not None:
            size += len(value)
        state = self._topics.get(topic)
        if state is None or not self._running:
            return self._send_slow(topic, value, key, headers, partition, timestamp, on_delivery)
        if self._sync:
            with self._lock:
                batch, index = self._add(
                    topic, state, key, value, headers, partition, timestamp, size
                )
        else:
            # On the producer's own loop nothing else touches the queues: no lock.
            buffered = self._buffered
            if buffered + size > self.buffer_memory and buffered:
                self._buffer_full()
            # Fast path: a keyed record that fits its partition's open batch.
            if partition is None and key is not None:
                queue = state.key_queues.get(key)
                if queue is not None:
                    batch = queue.open
                    if batch is not None and batch.size + size <= self.batch_size:
                        records = batch.records
                        records.append((timestamp, key, value, headers, None))
                        batch.size += size
                        self._buffered = buffered + size
                        future = _new_future((batch, len(records) - 1))
                        if on_delivery is not None:
                            batch.add_callback(future[1], on_delivery)
                        return future
            batch, index = self._add(topic, state, key, value, headers, partition, timestamp, size)
        future = _new_future((batch, index))
        if on_delivery is not None:
            batch.add_callback(index, on_delivery)
        return future

    def _buffer_full(self) -> None:
        raise BufferFullError(
            f"{self._buffered} bytes already wait to be sent (buffer_memory="
            f"{self.buffer_memory}); await produce(), flush(), or raise buffer_memory"
        )

    def _add(
        self,
        topic: str,
        state: _TopicState,
        key: bytes | None,
        value: bytes | None,
        headers: tuple,
        partition: int | None,
        timestamp: int,
        size: int,
    ) -> tuple[ProducerBatch, int]:
        """The rest of ``send`` (with the lock held in a sync producer): buffer check, the
        partition, then the record appended to its open batch."""
        if self._buffered + size > self.buffer_memory and self._buffered:
            self._buffer_full()
        if partition is None and key is not None:
            queue = state.key_queues.get(key)
            if queue is None:
                partition = (murmur2(key) & 0x7FFFFFFF) % state.num_partitions
                if len(state.key_queues) >= KEY_CACHE_SIZE:
                    state.key_queues.clear()
                queue = state.key_queues[key] = state.queues[partition]
            batch = queue.open
            if batch is not None and batch.size + size <= self.batch_size:
                records = batch.records
                records.append((timestamp, key, value, headers, None))
                batch.size += size
                self._buffered += size
                return batch, len(records) - 1
            partition = queue.partition
        return self._append(topic, state, key, value, headers, partition, timestamp, size)

    async def produce(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        headers: Any = None,
        partition: int | None = None,
        timestamp: int | None = None,
        on_delivery: Callable | None = None,
    ) -> RecordFuture:
        """``send``, waiting while the buffer is full and while the topic's metadata loads."""
        while True:
            if topic not in self._topics and self._started and not self._closed:
                await self._refresh_metadata()
                if topic not in self._topics:
                    self._metadata.topic(topic)  # raises UnknownTopicError
            try:
                return self.send(topic, value, key, headers, partition, timestamp, on_delivery)
            except BufferFullError:
                assert self._room_async is not None
                self._room_async.clear()
                await self._room_async.wait()

    async def send_and_wait(self, topic: str, value: Any = None, **kwargs: Any) -> RecordMetadata:
        """Send one record and wait for its acknowledgement."""
        future = await self.produce(topic, value, **kwargs)
        return await future

    def _append(
        self,
        topic: str,
        state: _TopicState,
        key: bytes | None,
        value: bytes | None,
        headers: tuple,
        partition: int | None,
        timestamp: int,
        size: int,
    ) -> tuple[ProducerBatch, int]:
        """Add a record to its partition's open batch (call with the lock held)."""
        n = state.num_partitions
        sticky = False
        if partition is None:
            if key is not None:
                partition = (murmur2(key) & 0x7FFFFFFF) % n
            else:
                partition = state.sticky.partition(None, n)
                sticky = True
        elif not 0 <= partition < n:
            raise UnknownTopicError(
                f"partition {partition} does not exist: topic {topic!r} has {n} partitions"
            )
        queue = state.queues[partition]
        batch = queue.open
        if batch is None or (batch.size + size > self.batch_size and batch.records):
            if batch is not None:
                self._seal(queue)
            if sticky:
                partition = state.sticky.on_new_batch(partition, n)
                queue = state.queues[partition]
                batch = queue.open
                if batch is not None and batch.size + size > self.batch_size and batch.records:
                    self._seal(queue)
                    batch = None
            else:
                batch = None
            if batch is None:
                batch = queue.open = ProducerBatch(
                    topic, partition, time.monotonic(), self._sync, self._lock
                )
                self._incomplete.add(batch)
                self._queues_with_data.add(queue)
                self._wake()
        records = batch.records
        records.append((timestamp, key, value, headers, None))
        batch.size += size
        self._buffered += size
        return batch, len(records) - 1

    def _seal(self, queue: PartitionQueue) -> None:
        batch = queue.open
        if batch is not None:
            queue.open = None
            queue.sealed.append(batch)
            self._wake()

    def _send_slow(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: tuple,
        partition: int | None,
        timestamp: int,
        on_delivery: Callable | None,
    ) -> Any:
        if self._closed:
            raise ClientClosedError("the producer is closed")
        if not self._started:
            raise SluiceError("the producer is not started: await producer.start() first")
        # Unknown topic: load metadata in the background, then send (records keep their order
        # because the tasks resume in the order they were created).
        future = asyncio.ensure_future(
            self._send_after_metadata(topic, value, key, headers, partition, timestamp)
        )
        if on_delivery is not None:

            def done(task: asyncio.Future) -> None:
                if task.cancelled():
                    on_delivery(ClientClosedError("cancelled"), None)
                elif task.exception() is not None:
                    on_delivery(task.exception(), None)
                else:
                    on_delivery(None, task.result())

            future.add_done_callback(done)
        return future

    async def _send_after_metadata(self, topic, value, key, headers, partition, timestamp):
        future = await self.produce(topic, value, key, headers, partition, timestamp)
        return await future

    # --- flush -----------------------------------------------------------------------------

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until each of those records is delivered or
        failed. Raises ``ClientTimeoutError`` after ``timeout`` seconds."""
        if not self._started:
            return
        with self._lock:
            batches = list(self._incomplete)
            self._flushing += 1
        self._wake()
        try:
            waiting = [b.wait() for b in batches if not b.done]
            if waiting:
                try:
                    async with asyncio.timeout(timeout):
                        await asyncio.gather(*waiting)
                except TimeoutError:
                    raise ClientTimeoutError(
                        f"flush: records still undelivered after {timeout:g}s"
                    ) from None
        finally:
            self._flushing -= 1

    # --- metadata and producer id ----------------------------------------------------------

    async def _refresh_metadata(self) -> ClusterMetadata:
        """One refresh at a time; concurrent callers share it."""
        if self._metadata_refresh is not None:
            return await asyncio.shield(self._metadata_refresh)
        loop = asyncio.get_running_loop()
        self._metadata_refresh = future = loop.create_future()
        try:
            metadata = await fetch_metadata(self._transport, self._urls)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved
            raise
        finally:
            self._metadata_refresh = None
        self._metadata = metadata
        self._metadata_time = time.monotonic()
        with self._lock:
            for name, info in metadata.topics.items():
                state = self._topics.get(name)
                if state is None:
                    self._topics[name] = _TopicState(name, info.num_partitions)
                elif state.num_partitions != info.num_partitions:
                    state.resize(name, info.num_partitions)
        future.set_result(metadata)
        return metadata

    async def _refresh_metadata_quietly(self) -> None:
        self._metadata_time = time.monotonic()
        try:
            await self._refresh_metadata()
        except SluiceError as exc:
            log.info("producer: periodic metadata refresh failed: %s", exc)

    async def _init_producer_id(self) -> None:
        error: Exception | None = None
        for url in self._urls:
            try:
                response = await self._transport.request("POST", url + PRODUCER_IDS_PATH, json={})
            except (BrokerConnectionError, ClientTimeoutError) as exc:
                error = exc
                continue
            doc = response.json()
            self._producer_id = int(doc["producer_id"])
            self._producer_epoch = int(doc["producer_epoch"])
            self._pid_generation += 1
            return
        assert error is not None
        raise error

    async def _reset_producer_id(self, cause: BaseException) -> None:
        log.warning("producer: %s; requesting a new producer id", cause)
        try:
            await self._init_producer_id()
        except SluiceError as exc:
            log.warning("producer: could not get a new producer id: %s", exc)


class Producer:
    """Blocking producer: the ``AsyncProducer`` runs on a private event loop thread.

    ``send`` appends in the caller's thread (no thread hop per record) and returns a
    ``RecordFuture`` whose ``result(timeout)`` blocks. When ``buffer_memory`` is full, ``send``
    waits up to ``max_block_ms`` for room. Thread-safe.
    """

    _async_class: type[AsyncProducer] = AsyncProducer  # what runs on the loop thread

    def __init__(
        self,
        url: str | list[str],
        api_key: str | None = None,
        *,
        max_block_ms: float = 60_000,
        **config: Any,
    ) -> None:
        self.max_block_s = max_block_ms / 1000
        self._thread = LoopThread("sluice-producer")
        try:

            async def create() -> AsyncProducer:
                producer = self._async_class(url, api_key, **config)
                producer._sync = True
                await producer.start()
                return producer

            self._producer = self._thread.run(create())
        except BaseException:
            self._thread.stop()
            raise
        self._closed = False
        self._sends = 0

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def metadata(self) -> ClusterMetadata | None:
        return self._producer.metadata

    def send(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        headers: Any = None,
        partition: int | None = None,
        timestamp: int | None = None,
        on_delivery: Callable[[BaseException | None, RecordMetadata | None], Any] | None = None,
    ) -> RecordFuture:
        """Queue one record; see ``AsyncProducer.send``. Callbacks run on the producer's
        thread, so keep them short."""
        producer = self._producer
        self._sends += 1
        if not self._sends & GIL_YIELD_EVERY:
            # Let the sender thread run now: a caller in a tight loop would otherwise hold
            # the GIL for whole switch intervals (5 ms) while answers wait to be read.
            time.sleep(0)
        if topic not in producer._topics and not self._closed:
            self._thread.run(producer._refresh_metadata(), self.max_block_s)
            if topic not in producer._topics:
                producer.metadata.topic(topic)  # raises UnknownTopicError
        try:
            return producer.send(topic, value, key, headers, partition, timestamp, on_delivery)
        except BufferFullError:
            pass
        deadline = time.monotonic() + self.max_block_s
        while True:
            with producer._room:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BufferFullError(
                        f"send blocked {self.max_block_s:g}s (max_block_ms) on a full buffer"
                    )
                if producer._buffered > producer.buffer_memory // 2:
                    producer._room.wait(min(remaining, 0.1))
            try:
                return producer.send(topic, value, key, headers, partition, timestamp, on_delivery)
            except BufferFullError:
                continue

    def flush(self, timeout: float | None = None) -> None:
        self._thread.run(self._producer.flush(timeout))

    def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._thread.run(self._producer.close(timeout))
        finally:
            self._thread.stop()
