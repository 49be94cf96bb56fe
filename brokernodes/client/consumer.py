"""The Sluice consumer: ``AsyncConsumer`` on an event loop, ``Consumer`` for plain threads.

Manual assignment (consumer groups come with their own issue): ``assign`` partitions,
``seek`` them (to an offset, the beginning, the end, or a timestamp), ``poll`` records.

Each assigned partition has one fetch task that keeps one binary fetch outstanding
(``GET .../batches?offset=&max_wait_ms=``, a long poll) while earlier records wait in the
partition's buffer for ``poll``: fetching runs ahead of processing, bounded by
``max_buffered_bytes`` per partition. A fetch outside the log (OFFSET_OUT_OF_RANGE) resets the
position per ``auto_offset_reset``: ``earliest``, ``latest``, or ``none`` (``poll`` raises).

With ``fetch_mode="websocket"`` the fetch task holds a ``/ws/consume`` stream (binary)
instead: the broker pushes batches as they are appended, within the byte credit the task
grants (``max_buffered_bytes``, given back as ``poll`` makes room).

Requests to one broker share ``max_connections_per_broker`` connections (64). Partitions
beyond that take turns: the transport serves requests first come, first served, so a queued
fetch waits about one long poll (``fetch_max_wait_ms``) per ``max_connections_per_broker``
requests ahead of it. WebSocket streams are not counted (one per partition).

``isolation_level="read_committed"`` reads only below each partition's last stable offset
and drops the batches of aborted transactions (the long-poll fetch names them in its
``Sluice-Aborted-Transactions`` header; the WebSocket stream leaves them out), as Kafka's
``isolation.level``; ``seek_to_end`` and a ``latest`` reset then go to the LSO.

The fetch tasks are ``fetcher.py``'s (``Fetcher``, a base class of ``AsyncConsumer``); this
module keeps assignment, positions and offset lookups, ``poll``, and the blocking wrapper.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any, NamedTuple

from brokernodes.client._loop import LoopThread
from brokernodes.client.fetcher import ConsumerRecord, Fetcher, _partition_path, _PartitionState
from brokernodes.client.http import HttpTransport
from brokernodes.client.metadata import (
    ClusterMetadata,
    TopicPartition,
    bootstrap_urls,
    fetch_metadata,
)
from brokernodes.errors import (
    BrokerConnectionError,
    BrokerError,
    ClientClosedError,
    ClientTimeoutError,
    SluiceError,
    UnknownTopicError,
)

__all__ = ["AsyncConsumer", "Consumer", "ConsumerRecord", "OffsetAndTimestamp", "TopicPartition"]

log = logging.getLogger("brokernodes.client.consumer")

RESET_POLICIES = ("earliest", "latest", "none")
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
FETCH_MODES = ("long_poll", "websocket")


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


def _tp(value: TopicPartition | tuple[str, int]) -> TopicPartition:
    if type(value) is TopicPartition:
        return value
    topic, partition = value
    return TopicPartition(str(topic), int(partition))


class AsyncConsumer(Fetcher):
    """Asynchronous consumer with manual assignment.

    ``async with AsyncConsumer(url, api_key=...) as c: c.assign([("orders", 0)]); ...``
    """

    def __init__(
        self,
        url: str | list[str],
        api_key: str | None = None,
        *,
        auto_offset_reset: str = "latest",
        fetch_max_bytes: int = 1_048_576,
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        max_poll_records: int = 500,
        max_buffered_bytes: int = 4 * 1_048_576,
        request_timeout_ms: float = 30_000,
        retry_backoff_ms: float = 100,
        check_crcs: bool = True,
        fetch_mode: str = "long_poll",
        isolation_level: str = "read_uncommitted",
        max_connections_per_broker: int = 64,
        transport: HttpTransport | None = None,
    ) -> None:
        if isolation_level not in ISOLATION_LEVELS:
            raise ValueError(
                f"isolation_level must be one of {', '.join(ISOLATION_LEVELS)}, "
                f"not {isolation_level!r}"
            )
        if fetch_mode not in FETCH_MODES:
            raise ValueError(
                f"fetch_mode must be one of {', '.join(FETCH_MODES)}, not {fetch_mode!r}"
            )
        if (
            isinstance(max_connections_per_broker, bool)
            or not isinstance(max_connections_per_broker, int)
            or max_connections_per_broker < 1
        ):
            raise ValueError(
                f"max_connections_per_broker must be an integer of at least 1, "
                f"not {max_connections_per_broker!r}"
            )
        if auto_offset_reset not in RESET_POLICIES:
            raise ValueError(
                f"auto_offset_reset must be one of {', '.join(RESET_POLICIES)}, "
                f"not {auto_offset_reset!r}"
            )
        self._urls = bootstrap_urls(url)
        self.auto_offset_reset = auto_offset_reset
        self.fetch_max_bytes = fetch_max_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_min_bytes = fetch_min_bytes
        self.max_poll_records = max_poll_records
        self.max_buffered_bytes = max_buffered_bytes
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.check_crcs = check_crcs
        self.fetch_mode = fetch_mode
        self.isolation_level = isolation_level
        # A long poll answers after max_wait_ms at the latest: give it that on top. The
        # time a request waits for a connection (its turn) is not counted in its timeout.
        self._transport = transport or HttpTransport(
            api_key,
            max_connections_per_host=max_connections_per_broker,
            request_timeout_s=request_timeout_ms / 1000 + fetch_max_wait_ms / 1000,
        )
        self._owns_transport = transport is None
        self._metadata: ClusterMetadata | None = None
        self._partitions: dict[TopicPartition, _PartitionState] = {}
        self._data = asyncio.Event()
        self._started = False
        self._closed = False
        self._next = 0  # round-robin start for poll

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        if not self._started:
            try:
                self._metadata = await fetch_metadata(self._transport, self._urls)
            except BaseException:
                await self._close_transport()
                raise
            self._started = True

    async def __aenter__(self) -> AsyncConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._stop_fetchers(list(self._partitions.values()))
        self._partitions.clear()
        self._data.set()
        await self._close_transport()

    async def _close_transport(self) -> None:
        if self._owns_transport:
            await self._transport.close()

    @property
    def metadata(self) -> ClusterMetadata | None:
        return self._metadata

    async def refresh_metadata(self) -> ClusterMetadata:
        self._metadata = await fetch_metadata(self._transport, self._urls)
        return self._metadata

    async def partitions_for(self, topic: str) -> list[TopicPartition]:
        metadata = self._metadata or await self.refresh_metadata()
        if topic not in metadata.topics:
            metadata = await self.refresh_metadata()
        info = metadata.topic(topic)
        return [TopicPartition(topic, p.partition) for p in info.partitions]

    # --- assignment and positions ----------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Consume exactly these partitions (replacing any earlier assignment). Positions
        start unknown: ``seek`` them, or the first fetch applies ``auto_offset_reset``."""
        self._check_open()
        wanted = [_tp(p) for p in partitions]
        metadata = self._metadata
        for tp in wanted:
            if metadata is not None:
                n = metadata.num_partitions(tp.topic)
                if n is None:
                    metadata.topic(tp.topic)  # raises UnknownTopicError
                if not 0 <= tp.partition < n:
                    raise UnknownTopicError(
                        f"partition {tp.partition} does not exist: topic {tp.topic!r} has "
                        f"{n} partitions"
                    )
        removed = [s for tp, s in self._partitions.items() if tp not in wanted]
        for state in removed:
            del self._partitions[state.tp]
            if state.task is not None:
                state.task.cancel()
        for tp in wanted:
            if tp not in self._partitions:
                state = self._partitions[tp] = _PartitionState(tp)
                self._start_fetcher(state)

    def assignment(self) -> set[TopicPartition]:
        return set(self._partitions)

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        """Make the next ``poll`` return records of ``partition`` from ``offset``."""
        state = self._state(partition)
        if offset < 0:
            raise ValueError(f"offset must be >= 0, not {offset}")
        self._reposition(state, int(offset))

    async def seek_to_beginning(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        """Seek ``partitions`` (default: all assigned) to their log start offsets."""
        await self._seek_to("earliest", partitions)

    async def seek_to_end(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        """Seek ``partitions`` (default: all assigned) to their ends: only new records."""
        await self._seek_to("latest", partitions)

    async def seek_to_timestamp(
        self, timestamp_ms: int, *partitions: TopicPartition | tuple[str, int]
    ) -> None:
        """Seek to the first record at or after ``timestamp_ms`` (the end if none)."""
        await self._seek_to(int(timestamp_ms), partitions)

    async def _seek_to(self, spec: str | int, partitions: tuple) -> None:
        states = [self._state(p) for p in partitions] or list(self._partitions.values())
        found = await asyncio.gather(*(self._list_offset(s.tp, spec) for s in states))
        for state, result in zip(states, found, strict=True):
            self._reposition(state, result.offset)

    async def position(self, partition: TopicPartition | tuple[str, int]) -> int:
        """The offset of the next record ``poll`` returns for ``partition``."""
        state = self._state(partition)
        if state.position is None:
            await self._reset(state)
        assert state.position is not None
        return state.position

    def positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The known positions of those of ``partitions`` that are assigned."""
        states = self._partitions
        return {
            tp: state.position
            for tp in partitions
            if (state := states.get(tp)) is not None and state.position is not None
        }

    async def reset_offsets(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, int]:
        """Where ``auto_offset_reset`` puts each of ``partitions`` (looked up together)."""
        tps = [_tp(p) for p in partitions]
        if tps and self.auto_offset_reset == "none":
            raise SluiceError(
                f"partition {tps[0].topic}-{tps[0].partition} has no position and "
                "auto_offset_reset is none: seek it first"
            )
        found = await asyncio.gather(*(self._list_offset(tp, self.auto_offset_reset) for tp in tps))
        return {tp: r.offset for tp, r in zip(tps, found, strict=True)}

    async def offsets_for_times(
        self, timestamps: dict[TopicPartition | tuple[str, int], int]
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """For each partition, the first offset whose batch timestamp is >= the given time
        (Kafka's ListOffsets); the log end offset when there is none."""
        tps = [_tp(tp) for tp in timestamps]
        found = await asyncio.gather(
            *(
                self._list_offset(tp, int(ts))
                for tp, ts in zip(tps, timestamps.values(), strict=True)
            )
        )
        return dict(zip(tps, found, strict=True))

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, int]:
        tps = [_tp(p) for p in partitions]
        found = await asyncio.gather(*(self._list_offset(tp, "earliest") for tp in tps))
        return {tp: r.offset for tp, r in zip(tps, found, strict=True)}

    async def end_offsets(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, int]:
        tps = [_tp(p) for p in partitions]
        found = await asyncio.gather(*(self._list_offset(tp, "latest") for tp in tps))
        return {tp: r.offset for tp, r in zip(tps, found, strict=True)}

    def highwater(self, partition: TopicPartition | tuple[str, int]) -> int | None:
        """The high watermark the last fetch of ``partition`` reported."""
        return self._state(partition).high_watermark

    # --- poll ------------------------------------------------------------------------------

    async def poll(
        self, timeout: float = 1.0, max_records: int | None = None
    ) -> list[ConsumerRecord]:
        """Records from the assigned partitions, at most ``max_records`` (default
        ``max_poll_records``); waits up to ``timeout`` seconds for the first. Raises a
        partition's fetch error (e.g. OFFSET_OUT_OF_RANGE with ``auto_offset_reset="none"``)."""
        self._check_open()
        limit = max_records or self.max_poll_records
        records = self._take(limit)
        if records:
            return records
        # One timer ends the wait (no timeout scope per wait). The loop ends when the timer
        # has fired, not when the clock says the deadline has passed: uvloop's timers have
        # millisecond resolution and may fire just before it, and a clock test would then
        # wait again with no timer left to wake it.
        loop = asyncio.get_running_loop()
        data = self._data
        expired = False

        def expire() -> None:
            nonlocal expired
            expired = True
            data.set()

        timer = loop.call_later(max(0.0, timeout), expire)
        try:
            while not self._closed and not expired:
                data.clear()
                await data.wait()
                records = self._take(limit)
                if records:
                    return records
            return []
        finally:
            timer.cancel()

    def __aiter__(self) -> AsyncConsumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        while True:
            for state in self._partitions.values():
                if state.buffer or state.pending:
                    records = self._take(1)
                    if records:
                        return records[0]
            if self._closed:
                raise StopAsyncIteration
            records = await self.poll(1.0, 1)
            if records:
                return records[0]

    def _take(self, limit: int) -> list[ConsumerRecord]:
        """Up to ``limit`` records, partitions in turn (from where the last poll stopped),
        decoding each partition's fetched batches only as far as they are taken."""
        states = list(self._partitions.values())
        if not states:
            return []
        out: list[ConsumerRecord] = []
        count = len(states)
        start = self._next % count
        for i in range(count):
            state = states[(start + i) % count]
            buffer = state.buffer
            taken_from = len(out)
            while len(out) < limit:
                if not buffer:
                    if state.buffer_size:  # the batch in hand is all taken: its bytes free
                        state.buffered_bytes -= state.buffer_size
                        state.buffer_size = 0
                        state.room.set()
                    if not state.pending:
                        break
                    try:
                        self._decode_next(state)
                    except SluiceError as exc:
                        self._stop_partition(state, exc)
                        break
                    continue
                want = limit - len(out)
                if len(buffer) <= want:
                    out.extend(buffer)
                    buffer.clear()
                else:
                    out.extend([buffer.popleft() for _ in range(want)])
            if len(out) > taken_from:
                state.position = out[-1].offset + 1
            elif state.error is not None:
                if out:
                    break  # return these records; the error comes on the next poll
                raise state.error
            if len(out) >= limit:
                self._next = (start + i + 1) % count
                break
        return out

    def _stop_partition(self, state: _PartitionState, error: BaseException) -> None:
        """A fetched batch did not decode: drop what was fetched after it and stop fetching
        the partition; ``poll`` raises ``error`` (after the records before it) until a seek."""
        if state.task is not None:
            state.task.cancel()
        state.pending.clear()
        state.buffered_bytes = state.buffer_size = 0
        state.error = error

    # --- fetching --------------------------------------------------------------------------

    def _state(self, partition: TopicPartition | tuple[str, int]) -> _PartitionState:
        tp = _tp(partition)
        try:
            return self._partitions[tp]
        except KeyError:
            raise SluiceError(f"partition {tp.topic}-{tp.partition} is not assigned") from None

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the consumer is closed")
        if not self._started:
            raise SluiceError("the consumer is not started: await consumer.start() first")

    def _reposition(self, state: _PartitionState, offset: int | None) -> None:
        if state.task is not None:
            state.task.cancel()
        state.position = offset
        state.fetch_offset = offset
        state.buffer.clear()
        state.pending.clear()
        state.buffered_bytes = state.buffer_size = 0
        state.error = None
        self._start_fetcher(state)

    async def _list_offset(self, tp: TopicPartition, spec: str | int) -> OffsetAndTimestamp:
        attempt = 0
        while True:
            attempt += 1
            try:
                url = self._leader_url(tp) + _partition_path(tp, "offsets")
                params = {"timestamp": str(spec), **self._isolation_params}
                doc = await self._transport.get_json(url, params)
                return OffsetAndTimestamp(int(doc["offset"]), int(doc.get("timestamp", -1)))
            except (BrokerConnectionError, ClientTimeoutError, BrokerError) as exc:
                if not getattr(exc, "retriable", False) or attempt >= 5:
                    raise
                await self._backoff(attempt, refresh=True)

    async def _reset(self, state: _PartitionState) -> None:
        policy = self.auto_offset_reset
        if policy == "none":
            raise SluiceError(
                f"partition {state.tp.topic}-{state.tp.partition} has no position and "
                f"auto_offset_reset is none: seek it first"
            )
        result = await self._list_offset(state.tp, policy)
        # positioned meanwhile (a seek, or the fetch task's own reset, which may have
        # fetched from there already): keep that position, or records would come twice
        if state.fetch_offset is None:
            state.position = state.fetch_offset = result.offset
        elif state.position is None:
            state.position = state.fetch_offset


class Consumer:
    """Blocking consumer: the ``AsyncConsumer`` runs on a private event loop thread.
    Methods mirror ``AsyncConsumer``'s; timeouts are in seconds. Not thread-safe."""

    def __init__(self, url: str | list[str], api_key: str | None = None, **config: Any) -> None:
        self._thread = LoopThread("sluice-consumer")
        self._request_timeout = config.get("request_timeout_ms", 30_000) / 1000 + 5
        try:

            async def create() -> AsyncConsumer:
                consumer = AsyncConsumer(url, api_key, **config)
                await consumer.start()
                return consumer

            self._consumer = self._thread.run(create())
        except BaseException:
            self._thread.stop()
            raise
        self._closed = False

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run(self, coro: Any, timeout: float | None = None) -> Any:
        return self._thread.run(coro, timeout or self._request_timeout)

    async def _call(self, fn: Any, *args: Any) -> Any:
        return fn(*args)

    @property
    def metadata(self) -> ClusterMetadata | None:
        return self._consumer.metadata

    def partitions_for(self, topic: str) -> list[TopicPartition]:
        return self._run(self._consumer.partitions_for(topic))

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        self._run(self._call(self._consumer.assign, list(partitions)))

    def assignment(self) -> set[TopicPartition]:
        return self._consumer.assignment()

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        self._run(self._call(self._consumer.seek, partition, offset))

    def seek_to_beginning(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        self._run(self._consumer.seek_to_beginning(*partitions))

    def seek_to_end(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        self._run(self._consumer.seek_to_end(*partitions))

    def seek_to_timestamp(self, timestamp_ms: int, *partitions: Any) -> None:
        self._run(self._consumer.seek_to_timestamp(timestamp_ms, *partitions))

    def position(self, partition: TopicPartition | tuple[str, int]) -> int:
        return self._run(self._consumer.position(partition))

    def offsets_for_times(self, timestamps: dict) -> dict[TopicPartition, OffsetAndTimestamp]:
        return self._run(self._consumer.offsets_for_times(timestamps))

    def beginning_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        return self._run(self._consumer.beginning_offsets(list(partitions)))

    def end_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        return self._run(self._consumer.end_offsets(list(partitions)))

    def highwater(self, partition: TopicPartition | tuple[str, int]) -> int | None:
        return self._consumer.highwater(partition)

    def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ConsumerRecord]:
        return self._run(self._consumer.poll(timeout, max_records), timeout + 30)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._run(self._consumer.close(), 10)
        finally:
            self._thread.stop()
